// Argument checks of every call, before it is given a sequence number.
#include "comm/comm_impl.h"

#include <cstdint>
#include <limits>

#include "comm/collective_args.h"
#include "core/byte_ranges.h"
#include "core/errors.h"
#include "core/op_traits.h"

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
  const size_t one = d.count * es, all = one * mult;
  size_t send_bytes = 0, recv_bytes = 0;
  switch (d.op) {
    case OpType::allreduce: send_bytes = one; recv_bytes = one; break;
    case OpType::reducescatter: send_bytes = all; recv_bytes = one; break;
    case OpType::allgather: send_bytes = one; recv_bytes = all; break;
    case OpType::broadcast: send_bytes = rank_ == d.root ? one : 0; recv_bytes = one; break;
    case OpType::reduce: send_bytes = one; recv_bytes = rank_ == d.root ? one : 0; break;
    case OpType::send: send_bytes = one; break;
    case OpType::recv: recv_bytes = one; break;
    case OpType::barrier: break;
    case OpType::alltoall: send_bytes = all; recv_bytes = all; break;
    case OpType::gather: send_bytes = one; recv_bytes = rank_ == d.root ? all : 0; break;
    case OpType::scatter: send_bytes = rank_ == d.root ? all : 0; recv_bytes = one; break;
    case OpType::alltoallv:
    case OpType::gatherv:
    case OpType::scatterv:
    case OpType::allgatherv:
    case OpType::reducescatterv: send_bytes = v.send * es; recv_bytes = v.recv * es; break;
  }
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
}

}  // namespace hoop::detail
