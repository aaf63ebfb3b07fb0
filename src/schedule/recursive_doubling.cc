// Recursive doubling AllReduce, for small messages: at level k every rank exchanges its whole
// partial vector with (virtual) rank XOR 2^k and both reduce, so after log2 N levels everyone
// holds the total. N not a power of two: the pairs of Fold (fold.h) hand over and take back.
//
// Bit-identical results: the float kernels are not bitwise commutative (op(a, b) and op(b, a)
// differ for min/max of -0.0/+0.0 or with a NaN, and for sum/prod of two different NaNs: the
// first operand's payload wins), so both sides of an exchange reduce in one canonical order:
// the lower virtual rank's partial is the left operand (the higher rank's receive sets
// Action::received_first). By induction every member of a group of 2^k ranks holds the same
// bits, so all ranks end equal.
//
// A rank sends its partial while the partner's arrives, so the reduction writes another buffer
// than the one being sent: levels alternate between recv and scratch, arranged to end in recv.
//
// Cost for n elements: log2 N steps, n log2 N sent per rank:
//   log2(N) (alpha + n beta + n gamma); N not a power of two: + 2 steps and 2 n beta.
// AllGather under this name is recursive doubling too: the AllGather half of halving-doubling.
#include "schedule/fold.h"

namespace hoop::schedule {

namespace {
Buf other(Buf b) { return b == Buf::recv ? Buf::scratch : Buf::recv; }
}  // namespace

RankSchedule recursive_doubling_allreduce(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "recursive-doubling";
  const size_t count = d.count;
  const Range all_in{Buf::send, 0, count}, all_out{Buf::recv, 0, count};
  const Fold f(d.nranks);
  if (fold_trivial_allreduce(d, r, f, s)) return s;
  const int levels = f.levels;
  // loc[k]: where the partial of level k lives (loc[0]: the input).
  std::vector<Buf> loc(static_cast<size_t>(levels) + 1);
  auto assign = [&](Buf last) {
    loc[static_cast<size_t>(levels)] = last;
    for (int k = levels - 1; k >= 1; --k) loc[static_cast<size_t>(k)] = other(loc[static_cast<size_t>(k) + 1]);
  };
  assign(Buf::recv);
  const bool absorbs = f.absorbs(r);
  if (absorbs) {
    loc[0] = other(loc[1]);
    s.steps.push_back({{recv_reduce_from(r - 1, all_in, Range{loc[0], 0, count})}});
  } else {
    // In place, the input is recv itself: level 1 must not write there.
    if (d.in_place && loc[1] == Buf::recv) assign(Buf::scratch);
    loc[0] = Buf::send;
  }
  const int v = f.virtual_rank(r);
  for (int k = 0; k < levels; ++k) {
    const int pv = v ^ (1 << k);
    const Range cur{loc[static_cast<size_t>(k)], 0, count}, next{loc[static_cast<size_t>(k) + 1], 0, count};
    Action reduce = recv_reduce_from(f.real_rank(pv), cur, next);
    reduce.received_first = pv < v;
    s.steps.push_back({{send_to(f.real_rank(pv), cur), reduce}});
  }
  for (Buf b : loc) {
    if (b == Buf::scratch) s.scratch_count = count;
  }
  if (loc[static_cast<size_t>(levels)] == Buf::scratch) {
    s.steps.push_back({{local_copy(Range{Buf::scratch, 0, count}, all_out)}});
  }
  if (d.redop == RedOp::avg) s.steps.push_back({{finish_avg(all_out)}});
  if (absorbs) s.steps.push_back({{send_to(r - 1, all_out)}});
  return s;
}

}  // namespace hoop::schedule
