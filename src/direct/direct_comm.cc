#include "direct/direct_comm.h"

#include <algorithm>
#include <cstring>

#include "core/errors.h"
#include "core/log.h"
#include "core/op_traits.h"
#include "kernels/reduce.h"

namespace hoop::direct {

namespace {

void copy_if_apart(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

}  // namespace

DirectComm::DirectComm(CommParams p, transport::Waiter& waiter, const std::atomic<bool>& abort_flag)
    : p_(std::move(p)), waiter_(waiter), abort_(abort_flag) {}

DirectComm::~DirectComm() = default;

void DirectComm::ensure_region(const ErrorContext& ctx, std::chrono::milliseconds timeout) {
  if (region_) return;
  const Tunables& t = tunables(p_.nranks);
  RegionParams rp;
  rp.job_id = p_.job_id;
  rp.comm_id = p_.comm_id;
  rp.rank = p_.rank;
  rp.nranks = p_.nranks;
  rp.pids = p_.pids;
  rp.cell_bytes = t.cell_bytes;
  rp.chunk_bytes = t.chunk_bytes;
  rp.stages = t.stages;
  region_ = Region::open(rp, *p_.store, Clock::now() + timeout, abort_, ctx);
  sync_ = std::make_unique<Sync>(*region_, p_.rank, p_.pids, waiter_, abort_, p_.spin);
  small_limit_ = std::min(t.small_bytes, region_->geometry().cell_bytes);
  cell_seen_.assign(static_cast<size_t>(p_.nranks), 0);
  single_copy_part_ = t.single_copy_part_bytes;
  single_copy_allreduce_bytes_ = t.single_copy_allreduce_bytes;
  const bool possible = single_copy_possible(p_.pids);
  single_copy_bytes_ = t.single_copy_bytes > 0 && possible ? t.single_copy_bytes : 0;
  single_copy_alltoall_bytes_ = t.single_copy_alltoall_bytes > 0 && possible ? t.single_copy_alltoall_bytes : 0;
}

void DirectComm::poison(const std::string& reason) noexcept {
  if (region_) region_->poison(p_.rank, reason);
}

OpSignature DirectComm::signature(const Call& c) const {
  OpSignature s;
  s.seq = c.seq;
  s.count = c.count;
  s.root = has_root(c.op) ? c.root : -1;
  s.op = static_cast<uint8_t>(c.op);
  s.dtype = static_cast<uint8_t>(c.dtype);
  s.redop = is_reducing(c.op) ? static_cast<uint8_t>(c.redop) : 0;
  return s;
}

size_t DirectComm::input_bytes(const Call& c) const {
  const size_t bytes = c.count * dtype_size(c.dtype);
  const bool n_blocks = c.op == OpType::reducescatter || c.op == OpType::alltoall;
  return n_blocks ? bytes * static_cast<size_t>(p_.nranks) : bytes;
}

void DirectComm::run(const Call& c, std::chrono::milliseconds timeout) {
  const ErrorContext ctx{p_.rank, std::string(to_string(c.op)), c.seq, -1};
  const size_t es = dtype_size(c.dtype);
  if (p_.nranks == 1) {
    // Nothing to exchange: the result is the input (an average of one is the value itself).
    const size_t bytes = c.count * es;
    if (c.op != OpType::barrier && (c.op != OpType::reduce || c.recv)) copy_if_apart(c.recv, c.send, bytes);
    return;
  }
  ensure_region(ctx, timeout);
  sync_->begin_op(ctx, timeout);
  if (region_->poisoned()) region_->raise_poisoned(ctx);
  // The caller's call, also when f16/bf16 run as f32: ranks naming f16 and bf16 must differ.
  current_sig_ = signature(c);
  sync_->announce(++ops_, current_sig_);
  if (is_half_reduction(c.dtype, c.op)) {
    run_half(c);
  } else {
    run_native(c);
  }
}

void DirectComm::run_native(const Call& c) {
  if (input_bytes(c) <= small_limit_) {
    small(c);
    return;
  }
  if (single_copy(c)) {
    switch (c.op) {
      case OpType::allreduce: single_copy_allreduce(c); return;
      case OpType::reducescatter: single_copy_reducescatter(c); return;
      case OpType::allgather: single_copy_allgather(c); return;
      case OpType::broadcast: single_copy_broadcast(c); return;
      case OpType::alltoall: single_copy_alltoall(c); return;
      default: break;
    }
  }
  switch (c.op) {
    case OpType::allreduce: large_allreduce(c, false); return;
    case OpType::reduce: large_allreduce(c, true); return;
    case OpType::reducescatter: large_reducescatter(c); return;
    case OpType::allgather: large_allgather(c); return;
    case OpType::broadcast: large_broadcast(c); return;
    case OpType::alltoall: large_alltoall(c); return;
    default: throw_error(ErrorCode::internal, "shm-direct does not run this collective", sync_->context());
  }
}

bool DirectComm::single_copy(const Call& c) const {
  const size_t bytes = c.count * dtype_size(c.dtype);
  if (c.op == OpType::alltoall)
    return single_copy_alltoall_bytes_ > 0 && bytes * static_cast<size_t>(p_.nranks) >= single_copy_alltoall_bytes_;
  if (single_copy_bytes_ == 0) return false;
  switch (c.op) {
    // Not whether this rank works in place: ranks may differ there, and all must take one path.
    case OpType::allreduce: return bytes >= std::max(single_copy_bytes_, single_copy_allreduce_bytes_);
    case OpType::broadcast: return bytes >= single_copy_bytes_;
    // What each rank reads or writes in all: N blocks.
    case OpType::reducescatter:
    case OpType::allgather: return bytes * static_cast<size_t>(p_.nranks) >= single_copy_bytes_;
    // Reduce stays on the slots: non-roots have no output buffer to leave their part in.
    default: return false;
  }
}

// f16/bf16: widen into an f32 staging buffer, run in place there, round once.
void DirectComm::run_half(const Call& c) {
  const size_t n = static_cast<size_t>(p_.nranks);
  const size_t in_count = c.op == OpType::reducescatter ? c.count * n : c.count;
  auto* f = static_cast<float*>(staging_.get(std::max<size_t>(in_count, 1) * sizeof(float)));
  kernels::to_f32(f, c.send, c.dtype, in_count);
  Call w = c;
  w.dtype = DataType::f32;
  w.send = f;
  w.recv = c.op == OpType::reducescatter ? f + static_cast<size_t>(p_.rank) * c.count : f;
  run_native(w);
  if (c.op == OpType::reduce && p_.rank != c.root) return;
  kernels::from_f32(c.recv, c.dtype, static_cast<const float*>(w.recv), c.count);
}

}  // namespace hoop::direct
