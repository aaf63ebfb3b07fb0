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
#include "schedule/schedule_builders.h"

namespace hoop::schedule {

namespace {

// The root's receives, one step each: recv = send op rank a, then recv op rank b, ...
void reduce_at_root(RankSchedule& s, const CollectiveDesc& d, int root) {
  const Range in{Buf::send, 0, d.count}, out{Buf::recv, 0, d.count};
  bool first = true;
  for (int peer = 0; peer < d.nranks; ++peer) {
    if (peer == root) continue;
    s.steps.push_back({{recv_reduce_from(peer, first ? in : out, out)}});
    first = false;
  }
  if (first && !d.in_place) s.steps.push_back({{local_copy(in, out)}});  // alone
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

}  // namespace hoop::schedule
