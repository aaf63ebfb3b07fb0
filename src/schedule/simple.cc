// Barrier and point-to-point schedules.
#include "schedule/schedule_builders.h"

namespace hoop::schedule {

RankSchedule dissemination_barrier(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "dissemination";
  const int n = d.nranks;
  for (int dist = 1; dist < n; dist *= 2) {
    Step step;
    step.actions.push_back(send_to(wrap(r + dist, n), Range{Buf::send, 0, 0}));
    step.actions.push_back(recv_copy_from(wrap(r - dist, n), Range{Buf::recv, 0, 0}));
    s.steps.push_back(std::move(step));
  }
  return s;
}

RankSchedule signature_ring(int nranks, int r) {
  RankSchedule s;
  s.algorithm = "signature-check";
  if (nranks > 1) {
    Step step;
    step.actions.push_back(send_to(wrap(r + 1, nranks), Range{Buf::send, 0, 0}));
    step.actions.push_back(recv_copy_from(wrap(r - 1, nranks), Range{Buf::recv, 0, 0}));
    s.steps.push_back(std::move(step));
  }
  return s;
}

RankSchedule point_to_point(const CollectiveDesc& d, int /*rank*/) {
  RankSchedule s;
  s.algorithm = "p2p";
  if (d.op == OpType::send) {
    s.steps.push_back({{send_to(d.root, Range{Buf::send, 0, d.count})}});
  } else {
    s.steps.push_back({{recv_copy_from(d.root, Range{Buf::recv, 0, d.count})}});
  }
  return s;
}

}  // namespace hoop::schedule
