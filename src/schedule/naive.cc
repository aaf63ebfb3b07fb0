// The parameter-server baseline: every rank sends its whole buffer to one root, the root reduces
// the buffers one after the other in rank order (its own first), and for AllReduce (root 0)
// sends the result back to everyone. It shows why the other algorithms exist: the root's link
// carries everything.
//
// Cost (M bytes, alpha per message, beta per byte):
//   Reduce: N-1 steps at the root (one receive each: one reduction into a range at a time), one
//     step elsewhere; the root receives (N-1)*M bytes, the others send M; time (N-1)(alpha + beta*M).
//   Broadcast: one step; the root sends (N-1)*M bytes at once; time about alpha + (N-1)*beta*M.
//   AllReduce: Reduce to rank 0 then Broadcast from it; N steps at the root, two elsewhere;
//     time about (N-1)(alpha + beta*M) + alpha + (N-1)*beta*M.
//   ReduceScatter (M the whole input, N blocks): Reduce to rank 0 in scratch, then rank 0 sends
//     each rank its block; the root receives (N-1)*M bytes and sends (N-1)*M/N. Two messages a
//     rank and 2(N-1) in all, against N log N for halving-doubling: where the ranks share the
//     machine's cores, what each message costs the processor is what counts.
#include "schedule/schedule_builders.h"

namespace hoop::schedule {

namespace {

// The root's receives, one step each, in rank order: out = in op rank a's, then out op rank
// b's, ... Alone, `in` is copied to `out` (not in place: there they are one buffer).
void reduce_at_root(RankSchedule& s, const CollectiveDesc& d, int root, Range in, Range out) {
  bool first = true;
  for (int peer = 0; peer < d.nranks; ++peer) {
    if (peer == root) continue;
    s.steps.push_back({{recv_reduce_from(peer, first ? in : out, out)}});
    first = false;
  }
  if (first && !d.in_place) s.steps.push_back({{local_copy(in, out)}});  // alone
}

void reduce_at_root(RankSchedule& s, const CollectiveDesc& d, int root) {
  reduce_at_root(s, d, root, Range{Buf::send, 0, d.count}, Range{Buf::recv, 0, d.count});
}

}  // namespace

RankSchedule naive_reduce(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "naive";
  if (d.count == 0) return s;
  if (r == d.root) {
    reduce_at_root(s, d, d.root);
    if (d.redop == RedOp::avg) s.steps.push_back({{finish_avg(Range{Buf::recv, 0, d.count})}});
  } else {
    s.steps.push_back({{send_to(d.root, Range{Buf::send, 0, d.count})}});
  }
  return s;
}

RankSchedule naive_broadcast(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "naive";
  if (d.count == 0) return s;
  const Range in{Buf::send, 0, d.count}, out{Buf::recv, 0, d.count};
  Step step;
  if (r == d.root) {
    if (!d.in_place) step.actions.push_back(local_copy(in, out));
    for (int peer = 0; peer < d.nranks; ++peer) {
      if (peer != r) step.actions.push_back(send_to(peer, in));
    }
  } else {
    step.actions.push_back(recv_copy_from(d.root, out));
  }
  s.steps.push_back(std::move(step));
  return s;
}

RankSchedule naive_allreduce(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "naive";
  if (d.count == 0) return s;
  const Range in{Buf::send, 0, d.count}, out{Buf::recv, 0, d.count};
  constexpr int root = 0;
  if (r == root) {
    reduce_at_root(s, d, root);
    Step back;
    if (d.redop == RedOp::avg) back.actions.push_back(finish_avg(out));  // runs before the sends
    for (int peer = 1; peer < d.nranks; ++peer) back.actions.push_back(send_to(peer, out));
    if (!back.actions.empty()) s.steps.push_back(std::move(back));
  } else {
    s.steps.push_back({{send_to(root, in)}});
    s.steps.push_back({{recv_copy_from(root, out)}});
  }
  return s;
}

// In place rank r's block of the input is its output (recv == send + r * count): each rank's
// output is written only after its whole input has been sent or reduced.
RankSchedule naive_reducescatter(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "naive";
  const size_t c = d.count;
  if (c == 0) return s;
  const int n = d.nranks;
  const size_t total = c * static_cast<size_t>(n);
  const Range in{Buf::send, 0, total}, out{Buf::recv, 0, c};
  constexpr int root = 0;
  if (n == 1) {
    if (!d.in_place) s.steps.push_back({{local_copy(Range{Buf::send, 0, c}, out)}});
    if (d.redop == RedOp::avg) s.steps.push_back({{finish_avg(out)}});
    return s;
  }
  if (r != root) {
    s.steps.push_back({{send_to(root, in)}});
    s.steps.push_back({{recv_copy_from(root, out)}});
    return s;
  }
  const Range sum{Buf::scratch, 0, total};
  s.scratch_count = total;
  reduce_at_root(s, d, root, in, sum);
  auto block = [&](int p) { return Range{Buf::scratch, c * static_cast<size_t>(p), c}; };
  Step back;
  if (d.redop == RedOp::avg) back.actions.push_back(finish_avg(sum));  // runs before the sends
  back.actions.push_back(local_copy(block(root), out));
  for (int peer = 1; peer < n; ++peer) back.actions.push_back(send_to(peer, block(peer)));
  s.steps.push_back(std::move(back));
  return s;
}

}  // namespace hoop::schedule
