// Double binary tree (the idea of NCCL's trees): AllReduce, Reduce and Broadcast.
//
// Shape. The top T (the root of a Reduce or Broadcast, rank 0 for AllReduce) heads two binary
// trees over the other M = N-1 ranks. Label them 1..M (rank = (label + T) mod N). Tree 0 is the
// in-order tree of the labels: label p with lowest set bit b has children p - b/2 and p + b'
// (b' the largest power of two below b that stays within M); its root is the largest power of
// two <= M and odd labels are its leaves. Tree 1 relabels tree 0 so that its inner nodes are
// tree 0's leaves: p -> M+1-p for even M, p -> p mod M + 1 for odd M (both send even labels to
// odd ones). So every rank but the top has children in at most one tree, and the top has one
// child in each. Half of the buffer travels each tree.
//
// Pipeline. Each half is cut into chunks of about kTreeChunkElements elements (at least one
// chunk per non-empty half); steps are global "ticks" and every transfer of chunk k happens in
// the same step on both sides. A rank whose subtree is complete `d` ticks after a leaf has sent
// chunk k sends chunk k up at step k + d; a node reduces its two children's chunks in different
// steps (they write the same range), the later one forwarded up in that very step (Action::after).
// The top receives chunk k at step k + D-1 and sends it down at step k + D; every rank receives it
// at k + D and forwards it to its children at once (after), so the way down costs one step per
// chunk however deep the tree. AllReduce overlaps both ways: chunk k goes down while chunk k+D
// goes up. Each element is reduced in exactly one place (in its tree, on the way up, finished at
// the top) and then copied, so every rank gets the top's bits. Partial results live in recv
// (AllReduce; for Reduce at the top) or in scratch (Reduce elsewhere: a non-root's buffers are
// not written).
//
// Cost (M bytes, K = ceil(count / 2 / kTreeChunkElements) chunks per half, depth D of about
// log2 N, alpha per message, beta per byte; chunk bytes c = M / 2K):
//   AllReduce: K + D + 1 steps. A rank sends and receives about 2M bytes in all (M up, M down),
//     at most 4 chunks each way per step: time about (K + D + 1) * (alpha + 4*beta*c), that is
//     (log2 N + 2)*alpha + 2*beta*M for one chunk, and about 2*beta*M + K*alpha for large M
//     (ring: 2(N-1)*alpha + 2(N-1)/N*beta*M).
//   Reduce: K + D steps (+1 for avg); about M bytes sent and received per rank.
//   Broadcast: 1 step; the engine streams each half down its tree slice by slice (after): a rank
//     receives M bytes and sends at most M; time about D*alpha + beta*M.
#include <algorithm>

#include "core/errors.h"
#include "schedule/schedule_builders.h"

namespace hoop::schedule {

namespace {

// A tree by label (0 = the top, 1..m the other ranks).
struct LabelTree {
  std::vector<int> parent;
  std::vector<std::vector<int>> children;
};

LabelTree in_order_tree(int m) {
  LabelTree t;
  t.parent.assign(static_cast<size_t>(m) + 1, -1);
  t.children.assign(static_cast<size_t>(m) + 1, {});
  auto link = [&](int p, int c) {
    t.children[static_cast<size_t>(p)].push_back(c);
    t.parent[static_cast<size_t>(c)] = p;
  };
  if (m == 0) return t;
  int root = 1;
  while (root * 2 <= m) root *= 2;
  link(0, root);
  for (int p = 2; p <= m; p += 2) {
    const int b = p & -p;
    link(p, p - b / 2);
    int right = b / 2;
    while (right >= 1 && p + right > m) right /= 2;
    if (right >= 1) link(p, p + right);
  }
  return t;
}

LabelTree relabelled(const LabelTree& t0, int m) {
  auto sigma = [m](int p) {
    if (p == 0) return 0;
    return m % 2 == 0 ? m + 1 - p : p % m + 1;
  };
  LabelTree t;
  t.parent.assign(t0.parent.size(), -1);
  t.children.assign(t0.children.size(), {});
  for (int p = 0; p <= m; ++p) {
    for (int c : t0.children[static_cast<size_t>(p)]) {
      t.children[static_cast<size_t>(sigma(p))].push_back(sigma(c));
      t.parent[static_cast<size_t>(sigma(c))] = sigma(p);
    }
  }
  return t;
}

BinaryTree to_ranks(const LabelTree& t, int n, int top) {
  BinaryTree out;
  out.parent.assign(static_cast<size_t>(n), -1);
  out.children.assign(static_cast<size_t>(n), {});
  auto rank_of = [&](int label) { return (label + top) % n; };
  for (int p = 0; p < n; ++p) {
    const auto r = static_cast<size_t>(rank_of(p));
    const int parent = t.parent[static_cast<size_t>(p)];
    out.parent[r] = parent < 0 ? -1 : rank_of(parent);
    for (int c : t.children[static_cast<size_t>(p)]) out.children[r].push_back(rank_of(c));
  }
  return out;
}

// When each rank of one tree handles chunk k, as offsets from k (see the file comment).
struct TreeTiming {
  std::vector<int> ready;    // the rank's partial of chunk k is complete at step k + ready
  std::vector<int> send_up;  // it sends chunk k to its parent at step k + send_up
  std::vector<std::vector<int>> order;  // children in the order their chunks are reduced
  int top_receives = 0;      // the top receives (and finishes) chunk k at step k + top_receives
  int down = 0;              // chunk k goes down at step k + down
};

TreeTiming time_tree(const BinaryTree& t, int top) {
  const size_t n = t.parent.size();
  TreeTiming tm;
  tm.ready.assign(n, 0);
  tm.send_up.assign(n, 0);
  tm.order.assign(n, {});
  // Children before parents: visit in reverse breadth-first order from the top.
  std::vector<int> bfs{top};
  for (size_t i = 0; i < bfs.size(); ++i) {
    for (int c : t.children[static_cast<size_t>(bfs[i])]) bfs.push_back(c);
  }
  for (auto it = bfs.rbegin(); it != bfs.rend(); ++it) {
    const auto x = static_cast<size_t>(*it);
    std::vector<int> kids = t.children[x];
    std::stable_sort(kids.begin(), kids.end(), [&](int a, int b) {
      return tm.ready[static_cast<size_t>(a)] < tm.ready[static_cast<size_t>(b)];
    });
    int last = -1;
    for (int c : kids) {
      auto& s = tm.send_up[static_cast<size_t>(c)];
      s = std::max(tm.ready[static_cast<size_t>(c)], last + 1);  // one child per step
      last = s;
    }
    tm.ready[x] = std::max(last, 0);
    tm.order[x] = kids;
  }
  tm.top_receives = tm.ready[static_cast<size_t>(top)];
  tm.down = tm.top_receives + 1;
  return tm;
}

size_t chunks_for(size_t elements) {
  if (elements == 0) return 0;
  return (elements + kTreeChunkElements - 1) / kTreeChunkElements;
}

enum class TreeOp { allreduce, reduce };

// Adds `a` to step `k` (growing the schedule) and returns its index within the step.
int add(RankSchedule& s, size_t k, Action a) {
  if (s.steps.size() <= k) s.steps.resize(k + 1);
  s.steps[k].actions.push_back(a);
  return static_cast<int>(s.steps[k].actions.size()) - 1;
}

RankSchedule tree_reduction(const CollectiveDesc& d, int r, TreeOp op) {
  RankSchedule s;
  s.algorithm = "tree";
  const int n = d.nranks;
  const int top = op == TreeOp::allreduce ? 0 : d.root;
  const bool at_top = r == top;
  if (n == 1) {
    if (!d.in_place && d.count > 0) {
      s.steps.push_back({{local_copy(Range{Buf::send, 0, d.count}, Range{Buf::recv, 0, d.count})}});
    }
    if (d.redop == RedOp::avg && d.count > 0) s.steps.push_back({{finish_avg(Range{Buf::recv, 0, d.count})}});
    return s;
  }
  const DoubleBinaryTree dbt = double_binary_tree(n, top);
  const Chunking halves{d.count, 2};
  // Partial sums: in recv where this rank may write it, else in scratch (same offsets).
  const Buf partial = (op == TreeOp::allreduce || at_top) ? Buf::recv : Buf::scratch;
  const bool avg = d.redop == RedOp::avg;
  for (int t = 0; t < 2; ++t) {
    const BinaryTree& tree = dbt.trees[t];
    const TreeTiming tm = time_tree(tree, top);
    const size_t lo = halves.offset(t), len = halves.size(t);
    const size_t nchunks = chunks_for(len);
    if (nchunks == 0) continue;
    const Chunking chunks{len, static_cast<int>(nchunks)};
    const auto x = static_cast<size_t>(r);
    const int parent = tree.parent[x];
    const std::vector<int>& kids = tm.order[x];
    if (!kids.empty() && partial == Buf::scratch) s.scratch_count = d.count;
    for (size_t k = 0; k < nchunks; ++k) {
      const size_t off = lo + chunks.offset(static_cast<int>(k)), cnt = chunks.size(static_cast<int>(k));
      const Range in{Buf::send, off, cnt}, part{partial, off, cnt}, out{Buf::recv, off, cnt};
      // Up: reduce the children's chunks in order, then pass the partial on.
      int last_recv = -1;
      size_t last_step = 0;
      for (size_t i = 0; i < kids.size(); ++i) {
        const int c = kids[i];
        last_step = k + static_cast<size_t>(tm.send_up[static_cast<size_t>(c)]);
        last_recv = add(s, last_step, recv_reduce_from(c, i == 0 ? in : part, part));
      }
      if (!at_top) {
        const size_t up = k + static_cast<size_t>(tm.send_up[x]);
        const Range what = kids.empty() ? in : part;
        const int after = (!kids.empty() && up == last_step) ? last_recv : -1;
        add(s, up, send_to(parent, what, after));
      }
      if (op != TreeOp::allreduce) continue;
      // Down: the top sends the finished chunk; everyone else forwards it as it arrives.
      const size_t down = k + static_cast<size_t>(tm.down);
      if (at_top) {
        if (avg) add(s, down, finish_avg(out));
        for (int c : tree.children[x]) add(s, down, send_to(c, out));
      } else {
        const int got = add(s, down, recv_copy_from(parent, out));
        for (int c : tree.children[x]) add(s, down, send_to(c, out, got));
      }
    }
  }
  if (op == TreeOp::reduce && at_top && avg && d.count > 0) {
    s.steps.push_back({{finish_avg(Range{Buf::recv, 0, d.count})}});
  }
  return s;
}

}  // namespace

DoubleBinaryTree double_binary_tree(int nranks, int top) {
  const int m = nranks - 1;
  const LabelTree t0 = in_order_tree(m);
  DoubleBinaryTree out;
  out.top = top;
  out.trees[0] = to_ranks(t0, nranks, top);
  out.trees[1] = to_ranks(relabelled(t0, m), nranks, top);
  return out;
}

RankSchedule tree_allreduce(const CollectiveDesc& d, int r) {
  return tree_reduction(d, r, TreeOp::allreduce);
}

RankSchedule tree_reduce(const CollectiveDesc& d, int r) { return tree_reduction(d, r, TreeOp::reduce); }

RankSchedule tree_broadcast(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "tree";
  const int n = d.nranks;
  Step step;
  if (r == d.root && !d.in_place && d.count > 0) {
    step.actions.push_back(local_copy(Range{Buf::send, 0, d.count}, Range{Buf::recv, 0, d.count}));
  }
  if (n > 1) {
    const DoubleBinaryTree dbt = double_binary_tree(n, d.root);
    const Chunking halves{d.count, 2};
    for (int t = 0; t < 2; ++t) {
      const BinaryTree& tree = dbt.trees[t];
      if (halves.size(t) == 0) continue;
      const Range in{Buf::send, halves.offset(t), halves.size(t)};
      const Range out{Buf::recv, halves.offset(t), halves.size(t)};
      const auto x = static_cast<size_t>(r);
      int got = -1;
      if (r != d.root) {
        step.actions.push_back(recv_copy_from(tree.parent[x], out));
        got = static_cast<int>(step.actions.size()) - 1;
      }
      for (int c : tree.children[x]) step.actions.push_back(send_to(c, r == d.root ? in : out, got));
    }
  }
  if (!step.actions.empty()) s.steps.push_back(std::move(step));
  return s;
}

}  // namespace hoop::schedule
