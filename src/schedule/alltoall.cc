// AllToAll and AllToAllv, and AllGatherv and ReduceScatterv by pairwise exchange.
//
// pairwise (AllToAll, AllToAllv): N-1 steps; at step k rank r sends its block for r+k and
// receives the block of r-k, so every step is a permutation and no link carries two
// messages at once. Cost: (N-1) alpha + (N-1)/N M beta (M = a rank's whole send buffer).
// AllToAllv runs pairwise only: an intermediate rank of Bruck would forward blocks whose sizes
// only their senders and receivers know.
//
// bruck (AllToAll): block j of rank r (for rank r+j, j = 1..N-1, "position j" after a
// rotation) moves 2^k ranks on at every step k where bit k of j is set; after ceil(log2 N)
// steps it has moved j ranks and arrives, at its last move, straight in the receiver's recv.
// A rank holds the blocks in transit in two scratch copies of positions 1..N-1, receiving a
// position into the copy it does not send from. Cost: ceil(log2 N) alpha + about
// ceil(log2 N)/2 M beta: fewer steps, more bytes (small messages, many ranks).
#include <algorithm>

#include "schedule/schedule_builders.h"

namespace hoop::schedule {

namespace {

// Sends block r+k of `in` to r+k and receives r-k's into block r-k of `out` at step k. The own
// block is copied unless in place; `stage` first copies the whole input to scratch (in place
// AllToAll: recv overwrites blocks not sent yet).
RankSchedule pairwise_exchange(const CollectiveDesc& d, int r, const Blocks& in, const Blocks& out, bool stage) {
  RankSchedule s;
  s.algorithm = "pairwise";
  const int n = d.nranks;
  Step first;
  Buf src = Buf::send;
  if (stage) {
    const size_t all = in.extent();
    first.actions.push_back(local_copy(Range{Buf::send, 0, all}, Range{Buf::scratch, 0, all}));
    s.scratch_count = all;
    src = Buf::scratch;
  } else if (!d.in_place) {
    first.actions.push_back(local_copy(in.range(Buf::send, r), out.range(Buf::recv, r)));
  }
  for (int k = 1; k < n; ++k) {
    Step step = k == 1 ? std::move(first) : Step{};
    step.actions.push_back(send_to(wrap(r + k, n), in.range(src, wrap(r + k, n))));
    step.actions.push_back(recv_copy_from(wrap(r - k, n), out.range(Buf::recv, wrap(r - k, n))));
    s.steps.push_back(std::move(step));
  }
  if (n == 1 && !first.actions.empty()) s.steps.push_back(std::move(first));
  return s;
}

}  // namespace

RankSchedule pairwise_alltoall(const CollectiveDesc& d, int r) {
  if (d.op == OpType::alltoallv) return pairwise_exchange(d, r, d.blocks->send, d.blocks->recv, false);
  if (d.count == 0) return RankSchedule{"pairwise", {}, 0};
  const Blocks b = Blocks::uniform(d.count, d.nranks);
  return pairwise_exchange(d, r, b, b, d.in_place && d.nranks > 1);
}

RankSchedule pairwise_allgatherv(const CollectiveDesc& d, int r) {
  // Every peer gets the same block: this rank's input.
  const Blocks& out = d.blocks->recv;
  Blocks in;
  in.counts.assign(static_cast<size_t>(d.nranks), out.count(r));
  in.displs.assign(static_cast<size_t>(d.nranks), 0);
  return pairwise_exchange(d, r, in, out, false);
}

RankSchedule pairwise_reducescatterv(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "pairwise";
  const int n = d.nranks;
  const Blocks& in = d.blocks->send;
  const Range mine = in.range(Buf::send, r), out{Buf::recv, 0, in.count(r)};
  if (n == 1) {
    if (!d.in_place) s.steps.push_back({{local_copy(mine, out)}});
    return s;
  }
  for (int k = 1; k < n; ++k) {
    Step step;
    step.actions.push_back(send_to(wrap(r + k, n), in.range(Buf::send, wrap(r + k, n))));
    step.actions.push_back(recv_reduce_from(wrap(r - k, n), k == 1 ? mine : out, out));
    s.steps.push_back(std::move(step));
  }
  if (d.redop == RedOp::avg) s.steps.push_back({{finish_avg(out)}});
  return s;
}

RankSchedule bruck_alltoall(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "bruck";
  const int n = d.nranks;
  const size_t c = d.count;
  if (c == 0) return s;
  auto user = [&](Buf b, int j) { return Range{b, static_cast<size_t>(wrap(j, n)) * c, c}; };
  Step first;
  if (!d.in_place) first.actions.push_back(local_copy(user(Buf::send, r), user(Buf::recv, r)));
  // Position j (1..n-1) of scratch copy x.
  const size_t copy_size = static_cast<size_t>(n - 1) * c;
  auto pos = [&](int x, int j) {
    return Range{Buf::scratch, static_cast<size_t>(x) * copy_size + static_cast<size_t>(j - 1) * c, c};
  };
  // Where position j is now: -1 in the caller's send buffer (block r+j), else a scratch copy.
  std::vector<int> where(static_cast<size_t>(n), -1);
  if (d.in_place && n > 1) {
    // The rotation, as copies: in place, recv would overwrite blocks not sent yet.
    const size_t tail = static_cast<size_t>(n - 1 - r) * c, head = static_cast<size_t>(r) * c;
    if (tail > 0) first.actions.push_back(local_copy(Range{Buf::send, (static_cast<size_t>(r) + 1) * c, tail}, Range{Buf::scratch, 0, tail}));
    if (head > 0) first.actions.push_back(local_copy(Range{Buf::send, 0, head}, Range{Buf::scratch, tail, head}));
    std::fill(where.begin(), where.end(), 0);
  }
  int copies = d.in_place && n > 1 ? 1 : 0;
  for (int bit = 1; bit < n; bit <<= 1) {
    Step step = bit == 1 ? std::move(first) : Step{};
    const int to = wrap(r + bit, n), from = wrap(r - bit, n);
    for (int j = bit; j < n; ++j) {
      if (!(j & bit)) continue;
      int& at = where[static_cast<size_t>(j)];
      step.actions.push_back(send_to(to, at < 0 ? user(Buf::send, r + j) : pos(at, j)));
      if (j < 2 * bit) {  // its last move: it arrives from rank r-j, for this rank
        step.actions.push_back(recv_copy_from(from, user(Buf::recv, r - j)));
      } else {
        at = at == 0 ? 1 : 0;
        copies = std::max(copies, at + 1);
        step.actions.push_back(recv_copy_from(from, pos(at, j)));
      }
    }
    s.steps.push_back(std::move(step));
  }
  if (n == 1 && !first.actions.empty()) s.steps.push_back(std::move(first));
  s.scratch_count = static_cast<size_t>(copies) * copy_size;
  return s;
}

}  // namespace hoop::schedule
