// Pipelined chains along the ring order, for Broadcast and Reduce: every rank forwards each
// slice as soon as it has it (Action::after), so a chain of N ranks costs about one message
// time plus N-1 slice times.
#include "schedule/schedule_builders.h"

namespace hoop::schedule {

RankSchedule chain_broadcast(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "ring";
  const int n = d.nranks;
  const Range all_in{Buf::send, 0, d.count}, all_out{Buf::recv, 0, d.count};
  Step step;
  const int pos = wrap(r - d.root, n);  // 0 at the root
  if (pos == 0) {
    if (!d.in_place) step.actions.push_back(local_copy(all_in, all_out));
    if (n > 1) step.actions.push_back(send_to(wrap(r + 1, n), all_in));
  } else {
    step.actions.push_back(recv_copy_from(wrap(r - 1, n), all_out));
    if (pos < n - 1) step.actions.push_back(send_to(wrap(r + 1, n), all_out, 0));
  }
  if (!step.actions.empty()) s.steps.push_back(std::move(step));
  return s;
}

RankSchedule chain_reduce(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "ring";
  const int n = d.nranks;
  const Range all_in{Buf::send, 0, d.count}, all_out{Buf::recv, 0, d.count};
  if (n == 1) {
    if (!d.in_place) s.steps.push_back({{local_copy(all_in, all_out)}});
    return s;
  }
  const int pos = wrap(r - d.root - 1, n);  // 0 for the first rank, n-1 at the root
  Step step;
  if (pos == 0) {
    step.actions.push_back(send_to(wrap(r + 1, n), all_in));
  } else if (pos < n - 1) {
    const Range partial{Buf::scratch, 0, d.count};
    step.actions.push_back(recv_reduce_from(wrap(r - 1, n), all_in, partial));
    step.actions.push_back(send_to(wrap(r + 1, n), partial, 0));
    s.scratch_count = d.count;
  } else {
    step.actions.push_back(recv_reduce_from(wrap(r - 1, n), all_in, all_out));
  }
  s.steps.push_back(std::move(step));
  if (pos == n - 1 && d.redop == RedOp::avg) s.steps.push_back({{finish_avg(all_out)}});
  return s;
}

}  // namespace hoop::schedule
