#include "support/vcounts.h"

#include <memory>

namespace hoop::test {

size_t vcount(int pattern, int from, int to, int n) {
  const auto f = static_cast<size_t>(from), t = static_cast<size_t>(to);
  switch (pattern) {
    case 0: return 0;
    case 1: return 1;
    case 2: return (f * 7 + t * 3 + static_cast<size_t>(n)) % 5;
    case 3: return ((f + 1) * (t + 2) * 13) % 97 + 1;
    default: return to % 2 == 0 ? 3 + f : 0;
  }
}

schedule::Blocks layout_blocks(const std::vector<size_t>& counts, bool spread) {
  if (!spread) return schedule::Blocks::packed(counts);
  schedule::Blocks b;
  b.counts = counts;
  b.displs.resize(counts.size());
  size_t at = 0;
  for (size_t j = counts.size(); j-- > 0;) {
    at += j % 3;
    b.displs[j] = at;
    at += counts[j];
  }
  return b;
}

namespace {

// counts[j] = vcount(pattern, from(j), to(j), n).
template <class From, class To>
std::vector<size_t> counts_of(int pattern, int n, From from, To to) {
  std::vector<size_t> c(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) c[static_cast<size_t>(j)] = vcount(pattern, from(j), to(j), n);
  return c;
}

}  // namespace

std::vector<size_t> send_counts(OpType op, int pattern, int r, int n, int root) {
  const int from = op == OpType::alltoallv ? r : op == OpType::scatterv ? root : 0;
  return counts_of(pattern, n, [&](int) { return from; }, [](int j) { return j; });
}

std::vector<size_t> recv_counts(OpType op, int pattern, int r, int n, int root) {
  const int to = op == OpType::alltoallv ? r : op == OpType::gatherv ? root : 0;
  return counts_of(pattern, n, [](int j) { return j; }, [&](int) { return to; });
}

size_t own_count(OpType op, int pattern, int r, int n, int root) {
  switch (op) {
    case OpType::gatherv: return vcount(pattern, r, root, n);
    case OpType::scatterv: return vcount(pattern, root, r, n);
    case OpType::allgatherv: return vcount(pattern, r, 0, n);
    case OpType::reducescatterv: return vcount(pattern, 0, r, n);
    default: return 0;
  }
}

std::vector<schedule::CollectiveDesc> v_descs(OpType op, int n, int pattern, bool spread, int root,
                                              bool in_place, RedOp redop) {
  std::vector<schedule::CollectiveDesc> out;
  for (int r = 0; r < n; ++r) {
    schedule::CollectiveDesc d;
    d.op = op;
    d.nranks = n;
    d.root = root;
    d.redop = redop;
    d.in_place = in_place;
    auto layout = std::make_shared<schedule::BlockLayout>();
    const bool at_root = r == root;
    // The buffers a call does not describe (a non-root's in Gatherv/Scatterv) stay empty;
    // ReduceScatterv's send buffer is always packed.
    if (op == OpType::alltoallv || (op == OpType::scatterv && at_root)) {
      layout->send = layout_blocks(send_counts(op, pattern, r, n, root), spread);
    }
    if (op == OpType::reducescatterv) layout->send = layout_blocks(send_counts(op, pattern, r, n, root), false);
    if (op == OpType::alltoallv || op == OpType::allgatherv || (op == OpType::gatherv && at_root)) {
      layout->recv = layout_blocks(recv_counts(op, pattern, r, n, root), spread);
    }
    d.count = op == OpType::alltoallv ? layout->send.total() : own_count(op, pattern, r, n, root);
    if (op == OpType::allgatherv) d.count = layout->recv.total();
    if (op == OpType::reducescatterv) d.count = layout->send.total();
    d.blocks = std::move(layout);
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace hoop::test
