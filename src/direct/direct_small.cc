// The small-message path of shm-direct: one cell per rank and op, read by everyone.
#include <cstring>

#include "core/errors.h"
#include "direct/direct_comm.h"
#include "direct/rank_order.h"

namespace hoop::direct {

const std::byte* DirectComm::small_cell(int peer, int buffer, uint64_t n, const OpSignature& sig) {
  CellHeader& h = region_->cell_header(peer, buffer);
  sync_->wait(peer, "publish its data", [&] { return h.seq.load(std::memory_order_acquire) >= n; });
  const uint64_t seq = h.seq.load(std::memory_order_acquire);
  cell_seen_[static_cast<size_t>(peer)] = seq;
  if (seq != n || !(h.sig == sig)) {
    if (seq != n)
      throw_error(ErrorCode::mismatch,
                  fmt::format("rank {} is at shm-direct small op {}, this rank at {}: the ranks "
                              "called different collectives",
                              peer, seq, n),
                  ErrorContext{p_.rank, sync_->context().op, sig.seq, peer});
    sync_->raise_mismatch(peer, sig, h.sig);
  }
  return region_->cell(peer, buffer);
}

void DirectComm::small(const Call& c) {
  const int n = p_.nranks;
  const int me = p_.rank;
  const uint64_t op = ++small_ops_;
  const int buffer = static_cast<int>(op & 1);
  const size_t es = dtype_size(c.dtype);
  const size_t bytes = c.count * es;
  const OpSignature sig = current_sig_;
  // A broadcast's non-roots publish their signature without data, so that a rank that names
  // another root finds out instead of waiting for a cell nobody fills.
  const bool writes = c.op != OpType::broadcast || me == c.root;

  {
    // This cell was last used two ops ago: everyone must have finished reading it. A peer
    // whose cell of the last op this rank saw has: it publishes an op only after finishing the
    // one before. Then its control line (rewritten every op) is not read, saving a miss.
    if (op > 2) {
      for (int p = 0; p < n; ++p) {
        if (p == me || cell_seen_[static_cast<size_t>(p)] >= op - 1) continue;
        RankControl& pc = region_->control(p);
        sync_->wait(p, "finish reading the previous small operation",
                    [&] { return pc.small_done.load(std::memory_order_acquire) >= op - 2; });
      }
    }
    CellHeader& mine = region_->cell_header(me, buffer);
    if (writes && input_bytes(c) > 0) std::memcpy(region_->cell(me, buffer), c.send, input_bytes(c));
    mine.sig = sig;
    mine.seq.store(op, std::memory_order_release);
    sync_->notify();
  }

  auto* out = static_cast<std::byte*>(c.recv);
  const auto reduce_all = [&](size_t offset, size_t count) {
    const auto cell = [&](int p) { return small_cell(p, buffer, op, sig) + offset; };
    reduce_in_rank_order(out, out, n, cell, count, c.dtype, c.redop);
  };
  switch (c.op) {
    case OpType::allreduce:
      if (c.count > 0) reduce_all(0, c.count);
      break;
    case OpType::reduce:
      if (me == c.root && c.count > 0) reduce_all(0, c.count);
      break;
    case OpType::reducescatter:
      if (c.count > 0) reduce_all(static_cast<size_t>(me) * bytes, c.count);
      break;
    case OpType::allgather:
      for (int p = 0; p < n; ++p) {
        std::byte* dst = out + static_cast<size_t>(p) * bytes;
        if (p == me) {
          if (dst != c.send && bytes > 0) std::memmove(dst, c.send, bytes);
        } else {
          const std::byte* src = small_cell(p, buffer, op, sig);
          if (bytes > 0) std::memcpy(dst, src, bytes);
        }
      }
      break;
    case OpType::alltoall:
      // The whole input went into the cell before any peer's is read: in place is safe.
      for (int p = 0; p < n; ++p) {
        std::byte* dst = out + static_cast<size_t>(p) * bytes;
        if (p == me) {
          const auto* own = static_cast<const std::byte*>(c.send) + static_cast<size_t>(me) * bytes;
          if (dst != own && bytes > 0) std::memmove(dst, own, bytes);
        } else {
          const std::byte* src = small_cell(p, buffer, op, sig) + static_cast<size_t>(me) * bytes;
          if (bytes > 0) std::memcpy(dst, src, bytes);
        }
      }
      break;
    case OpType::broadcast:
      if (me == c.root) {
        if (c.recv != c.send && bytes > 0) std::memmove(c.recv, c.send, bytes);
      } else {
        const std::byte* src = small_cell(c.root, buffer, op, sig);
        if (bytes > 0) std::memcpy(c.recv, src, bytes);
      }
      break;
    case OpType::barrier:
      // Everyone published its cell on entering: once every cell is seen, everyone entered.
      for (int p = 0; p < n; ++p)
        if (p != me) small_cell(p, buffer, op, sig);
      break;
    default:
      throw_error(ErrorCode::internal, "shm-direct small path: unsupported collective", sync_->context());
  }
  region_->control(me).small_done.store(op, std::memory_order_release);
  sync_->notify();
}

}  // namespace hoop::direct
