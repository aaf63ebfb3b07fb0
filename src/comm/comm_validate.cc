// Argument checks of every call, before it is given a sequence number.
#include "comm/comm_impl.h"

#include <cstdint>
#include <limits>

#include "comm/collective_args.h"
#include "core/byte_ranges.h"
#include "core/errors.h"
#include "core/op_traits.h"
#include "transport/shm/buffer_registry.h"

namespace hoop::detail {

void CommImpl::validate(const OpTask& t) const {
  const auto& d = t.desc;
  const ErrorContext ctx{rank_, std::string(to_string(d.op)), 0, -1};
  const int n = size();
  HOOP_CHECK_ARG(is_valid(t.dtype), ctx, "unknown dtype value {}", static_cast<int>(t.dtype));
  if (is_reducing(d.op)) {
    HOOP_CHECK_ARG(is_valid(d.redop), ctx, "unknown reduction op value {}", static_cast<int>(d.redop));
  }
  if (has_root(d.op)) {
    HOOP_CHECK_ARG(d.root >= 0 && d.root < n, ctx, "root {} is out of range [0, {})", d.root, n);
  }
  if (is_point_to_point(d.op)) {
    const bool any = d.op == OpType::recv && d.root == kAnySource;
    HOOP_CHECK_ARG(any || (d.root >= 0 && d.root < n), ctx, "peer {} is out of range [0, {})", d.root, n);
    HOOP_CHECK_ARG(d.root != rank_, ctx, "peer {} is this rank itself", d.root);
    HOOP_CHECK_ARG(t.tag >= 0 || (d.op == OpType::recv && t.tag == kAnyTag), ctx,
                   "tag {} is negative (kAnyTag is for receives only)", t.tag);
  }
  const size_t es = dtype_size(t.dtype);
  const bool blocked = sends_block_per_rank(d.op) || receives_block_per_rank(d.op);
  const size_t mult = blocked ? static_cast<size_t>(n) : 1;
  // The v-forms' sizes come from their blocks (their count is a sum, checked there).
  const Extents v = is_vector_op(d.op) ? vector_extents(t, rank_, n, ctx) : Extents{};
  HOOP_CHECK_ARG(is_vector_op(d.op) || d.count <= std::numeric_limits<size_t>::max() / es / mult / 2, ctx,
                 "count {} of {} overflows the address space", d.count, to_string(t.dtype));
  const Extents e = is_vector_op(d.op) ? v : call_extents(d.op, d.count, rank_, n, d.root);
  const size_t send_bytes = e.send * es, recv_bytes = e.recv * es;
  HOOP_CHECK_ARG(send_bytes == 0 || t.send, ctx, "send buffer is null (count {})", d.count);
  HOOP_CHECK_ARG(recv_bytes == 0 || t.recv, ctx, "recv buffer is null (count {})", d.count);
  const auto end_ok = [](const void* p, size_t bytes) {
    return !p || bytes <= std::numeric_limits<uintptr_t>::max() - reinterpret_cast<uintptr_t>(p);
  };
  HOOP_CHECK_ARG(end_ok(t.send, send_bytes), ctx, "the send buffer's {} bytes reach past the address space",
                 send_bytes);
  HOOP_CHECK_ARG(end_ok(t.recv, recv_bytes), ctx, "the recv buffer's {} bytes reach past the address space",
                 recv_bytes);
  if (send_bytes && recv_bytes && !d.in_place) {
    HOOP_CHECK_ARG(!ranges_overlap(t.send, send_bytes, t.recv, recv_bytes), ctx,
                   "send and recv buffers overlap without being in place (in place means {})", in_place_rule(d.op));
  }
  auto& registry = transport::shm::BufferRegistry::instance();
  if (!registry.none_freed()) {
    HOOP_CHECK_ARG(send_bytes == 0 || !registry.was_freed(t.send, send_bytes), ctx,
                   "the send buffer lies in a SharedBuffer that was freed");
    HOOP_CHECK_ARG(recv_bytes == 0 || !registry.was_freed(t.recv, recv_bytes), ctx,
                   "the recv buffer lies in a SharedBuffer that was freed");
  }
}

Extents call_extents(OpType op, size_t count, int rank, int nranks, int root) {
  const size_t all = sends_block_per_rank(op) || receives_block_per_rank(op) ? count * static_cast<size_t>(nranks) : count;
  const bool is_root = rank == root;
  switch (op) {
    case OpType::allreduce: return {count, count};
    case OpType::reducescatter: return {all, count};
    case OpType::allgather: return {count, all};
    case OpType::broadcast: return {is_root ? count : 0, count};
    case OpType::reduce: return {count, is_root ? count : 0};
    case OpType::send: return {count, 0};
    case OpType::recv: return {0, count};
    case OpType::alltoall: return {all, all};
    case OpType::gather: return {count, is_root ? all : 0};
    case OpType::scatter: return {is_root ? all : 0, count};
    default: return {};  // barrier; the v-forms' come from their blocks
  }
}

}  // namespace hoop::detail
