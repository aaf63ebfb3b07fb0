// Gather(v) and Scatter(v).
//
// linear: the root receives from (sends to) every other rank in one step, each on its own
// link. Cost at the root: alpha plus one message overhead per peer, (N-1)/N M beta (M = the
// root's whole buffer). Gatherv and Scatterv run linear only: their counts are known at the
// root alone, so no other rank could forward a subtree's blocks.
//
// binomial (Gather, Scatter): a binomial tree over ranks relative to the root (v = r - root
// mod N). Relative rank v > 0 whose lowest set bit is 2^L heads the subtree [v, v + 2^L); a
// Gather collects it child by child (v + 1, v + 2, v + 4, ...) into scratch and sends it to
// v - 2^L; a Scatter does the reverse, the biggest subtree first. Blocks in transit are kept
// in relative order; the root's buffer is in rank order, so a range of relative ranks that
// crosses relative rank N - root (where rank numbers wrap to 0) is sent as two messages, by
// both sides alike. Cost: ceil(log2 N) alpha + (N-1)/N M beta at the root.
#include <algorithm>

#include "schedule/schedule_builders.h"

namespace hoop::schedule {

namespace {

// The binomial tree of relative rank v among n.
struct Subtree {
  int v = 0;
  int end = 0;     // the subtree is relative ranks [v, end)
  int lowbit = 0;  // v's lowest set bit (n, rounded up to a power of two, for the root)
};

Subtree subtree(int v, int n) {
  int low = 1;
  while (low < n && !(v & low)) low <<= 1;
  return Subtree{v, std::min(n, v + low), low};
}

// One rank's place in the binomial tree of a Gather (blocks flow to the root) or a Scatter
// (from it), and where the blocks in transit lie: the user's buffer at the root (rank order),
// scratch elsewhere (relative order from the rank's own block).
struct TreeRank {
  int n, root;
  size_t c;
  Subtree t;
  Buf user;    // the root's buffer of N blocks
  Range mine;  // this rank's own block (Gather: its send, Scatter: its recv)
  bool leaf;   // no children: its block goes straight between `mine` and the parent

  int rank_of(int v) const { return wrap(v + root, n); }
  Range at(int lo, int hi) const {
    const size_t len = static_cast<size_t>(hi - lo) * c;
    if (t.v == 0) return Range{user, static_cast<size_t>(rank_of(lo)) * c, len};
    return Range{Buf::scratch, static_cast<size_t>(lo - t.v) * c, len};
  }
  // The root out of place and inner ranks copy their own block between `mine` and at(v, v+1).
  bool copies_own(bool in_place) const { return t.v == 0 ? !in_place : !leaf; }
  size_t scratch() const { return t.v > 0 && !leaf ? static_cast<size_t>(t.end - t.v) * c : 0; }
  // The messages carrying relative ranks [lo, hi) to or from `peer`: split where the rank
  // numbers wrap to 0 (relative rank n - root), on both sides alike.
  void transfer(Step& step, bool out, int peer, int lo, int hi) const {
    auto one = [&](Range range) {
      step.actions.push_back(out ? send_to(peer, range) : recv_copy_from(peer, range));
    };
    const int cut = n - root;
    if (lo < cut && cut < hi) {
      one(at(lo, cut));
      one(at(cut, hi));
    } else if (lo < hi) {
      one(at(lo, hi));
    }
  }
  void with_child(Step& step, bool out, int child) const {
    transfer(step, out, rank_of(child), child, subtree(child, n).end);
  }
  void with_parent(Step& step, bool out) const {
    const int parent = rank_of(t.v - t.lowbit);
    if (leaf) {
      step.actions.push_back(out ? send_to(parent, mine) : recv_copy_from(parent, mine));
    } else {
      transfer(step, out, parent, t.v, t.end);
    }
  }
};

TreeRank tree_rank(const CollectiveDesc& d, int r, Buf user, Buf own) {
  const Subtree t = subtree(wrap(r - d.root, d.nranks), d.nranks);
  return TreeRank{d.nranks, d.root, d.count, t, user, Range{own, 0, d.count}, t.v + 1 >= t.end};
}

// The root exchanges with every rank at once: a Gather receives block q from rank q, a Scatter
// sends it.
RankSchedule linear(const CollectiveDesc& d, int r, bool gather) {
  RankSchedule s;
  s.algorithm = "linear";
  if (!d.blocks && d.count == 0) return s;
  const Range mine{gather ? Buf::send : Buf::recv, 0, d.count};
  if (r != d.root) {
    s.steps.push_back({{gather ? send_to(d.root, mine) : recv_copy_from(d.root, mine)}});
    return s;
  }
  const Buf user = gather ? Buf::recv : Buf::send;
  const Blocks b = !d.blocks ? Blocks::uniform(d.count, d.nranks) : gather ? d.blocks->recv : d.blocks->send;
  Step step;
  if (!d.in_place) {
    const Range own{mine.buf, 0, b.count(r)};
    step.actions.push_back(gather ? local_copy(own, b.range(user, r)) : local_copy(b.range(user, r), own));
  }
  for (int q = 0; q < d.nranks; ++q) {
    if (q == r) continue;
    step.actions.push_back(gather ? recv_copy_from(q, b.range(user, q)) : send_to(q, b.range(user, q)));
  }
  if (!step.actions.empty()) s.steps.push_back(std::move(step));
  return s;
}

}  // namespace

RankSchedule linear_gather(const CollectiveDesc& d, int r) { return linear(d, r, true); }

RankSchedule linear_scatter(const CollectiveDesc& d, int r) { return linear(d, r, false); }

RankSchedule binomial_gather(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "binomial";
  if (d.count == 0) return s;
  const TreeRank tr = tree_rank(d, r, Buf::recv, Buf::send);
  Step first;
  if (tr.copies_own(d.in_place)) first.actions.push_back(local_copy(tr.mine, tr.at(tr.t.v, tr.t.v + 1)));
  // Children in increasing subtree size, then the whole subtree to the parent.
  for (int bit = 1; bit < tr.t.lowbit && tr.t.v + bit < tr.n; bit <<= 1) {
    Step step = bit == 1 ? std::move(first) : Step{};
    tr.with_child(step, false, tr.t.v + bit);
    s.steps.push_back(std::move(step));
  }
  if (s.steps.empty() && !first.actions.empty()) s.steps.push_back(std::move(first));  // the root alone
  if (tr.t.v > 0) {
    s.steps.emplace_back();
    tr.with_parent(s.steps.back(), true);
  }
  s.scratch_count = tr.scratch();
  return s;
}

RankSchedule binomial_scatter(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "binomial";
  if (d.count == 0) return s;
  const TreeRank tr = tree_rank(d, r, Buf::send, Buf::recv);
  if (tr.t.v > 0) {
    s.steps.emplace_back();
    tr.with_parent(s.steps.back(), false);
  }
  Step first;
  if (tr.copies_own(d.in_place)) first.actions.push_back(local_copy(tr.at(tr.t.v, tr.t.v + 1), tr.mine));
  // Children in decreasing subtree size: the farthest-reaching block leaves first.
  bool sent = false;
  for (int bit = tr.t.lowbit / 2; bit >= 1; bit /= 2) {
    if (tr.t.v + bit >= tr.n) continue;
    Step step = sent ? Step{} : std::move(first);
    sent = true;
    tr.with_child(step, true, tr.t.v + bit);
    s.steps.push_back(std::move(step));
  }
  if (!sent && !first.actions.empty()) s.steps.push_back(std::move(first));  // the root alone
  s.scratch_count = tr.scratch();
  return s;
}

}  // namespace hoop::schedule
