#include "comm/collective_args.h"

#include <algorithm>
#include <limits>

#include "core/errors.h"

namespace hoop::detail {

namespace {

// The end of the last-ending block, each block checked to fit `limit` elements.
size_t checked_extent(const schedule::Blocks& b, size_t n, size_t limit, const char* counts_name,
                      const char* displs_name, const ErrorContext& ctx) {
  HOOP_CHECK_ARG(b.counts.size() == n, ctx, "{} has {} entries, expected one per rank ({})", counts_name,
                 b.counts.size(), n);
  HOOP_CHECK_ARG(b.displs.size() == n, ctx, "{} has {} entries, expected one per rank ({}) or none (packed)",
                 displs_name, b.displs.size(), n);
  size_t end = 0;
  for (size_t j = 0; j < n; ++j) {
    const size_t c = b.counts[j], at = b.displs[j];
    HOOP_CHECK_ARG(c <= limit && at <= limit - c, ctx,
                   "block {} ({} elements at displacement {}, from {} and {}) overflows the address space", j, c,
                   at, counts_name, displs_name);
    end = std::max(end, at + c);
  }
  return end;
}

}  // namespace

Extents vector_extents(const OpTask& t, int rank, int nranks, const ErrorContext& ctx) {
  const auto& d = t.desc;
  const auto& l = *d.blocks;
  const auto n = static_cast<size_t>(nranks);
  const size_t limit = std::numeric_limits<size_t>::max() / dtype_size(t.dtype) / 2;
  const bool root = rank == d.root;
  auto own = [&](size_t c, const char* name) {
    HOOP_CHECK_ARG(c <= limit, ctx, "{} {} of {} overflows the address space", name, c, to_string(t.dtype));
    return c;
  };
  Extents e;
  switch (d.op) {
    case OpType::alltoallv:
      e.send = checked_extent(l.send, n, limit, "sendcounts", "sdispls", ctx);
      e.recv = checked_extent(l.recv, n, limit, "recvcounts", "rdispls", ctx);
      HOOP_CHECK_ARG(l.send.count(rank) == l.recv.count(rank), ctx,
                     "sendcounts[{}] is {} but recvcounts[{}] is {}: this rank's block to itself differs", rank,
                     l.send.count(rank), rank, l.recv.count(rank));
      break;
    case OpType::gatherv:
    case OpType::scatterv: {
      // The rank's own count, and at the root the blocks of every rank.
      const bool gather = d.op == OpType::gatherv;
      const char* own_name = gather ? "sendcount" : "recvcount";
      const char* blocks_name = gather ? "recvcounts" : "sendcounts";
      (gather ? e.send : e.recv) = own(d.count, own_name);
      if (!root) break;
      const schedule::Blocks& b = gather ? l.recv : l.send;
      (gather ? e.recv : e.send) = checked_extent(b, n, limit, blocks_name, "displs", ctx);
      HOOP_CHECK_ARG(b.count(rank) == d.count, ctx, "{}[{}] is {} but the root's {} is {}", blocks_name, rank,
                     b.count(rank), own_name, d.count);
      break;
    }
    case OpType::allgatherv:
      e.recv = checked_extent(l.recv, n, limit, "counts", "displs", ctx);
      e.send = l.recv.count(rank);
      break;
    case OpType::reducescatterv:
      e.send = checked_extent(l.send, n, limit, "recvcounts", "their packed displacements", ctx);
      e.recv = l.send.count(rank);
      break;
    default:
      throw_error(ErrorCode::internal, fmt::format("{} has no per-rank counts", to_string(d.op)), ctx);
  }
  return e;
}

const char* in_place_rule(OpType op) {
  switch (op) {
    case OpType::reducescatter: return "recv == send + rank*recvcount";
    case OpType::allgather: return "send == recv + rank*sendcount";
    case OpType::gather: return "the root's send == recv + root*count";
    case OpType::scatter: return "the root's recv == send + root*count";
    case OpType::gatherv: return "the root's send == recv + displs[root]";
    case OpType::scatterv: return "the root's recv == send + displs[root]";
    case OpType::allgatherv: return "send == recv + displs[rank]";
    case OpType::reducescatterv: return "recv == send + recvcounts[0] + ... + recvcounts[rank-1]";
    case OpType::alltoallv: return "nothing: alltoallv has no in-place form";
    default: return "send == recv";
  }
}

}  // namespace hoop::detail
