#include <utility>

#include "schedule/schedule.h"

namespace hoop::schedule {

bool ends_with_closing_publish(const std::vector<Step>& steps) {
  for (auto step = steps.rbegin(); step != steps.rend(); ++step) {
    for (auto a = step->actions.rbegin(); a != step->actions.rend(); ++a) {
      if (a->kind == ActionKind::publish) return true;
      if (a->kind != ActionKind::wait_flag) return false;
    }
  }
  return false;
}

RankSchedule with_variant(const RankSchedule& s, size_t variant) {
  RankSchedule out{s.algorithm, s.steps, s.scratch_count, s.region_count, s.shared_region};
  out.announces_buffers = s.announces_buffers;
  out.closing_publish = s.closing_publish;
  if (s.branch != BranchRule::none && variant < s.variants.size()) {
    const auto& more = s.variants[variant];
    out.steps.insert(out.steps.end(), more.begin(), more.end());
  }
  return out;
}

}  // namespace hoop::schedule
