#include "tuner/symmetric_forms.h"

#include "schedule/schedule.h"
#include "tuner/symmetric_hierarchical.h"
#include "tuner/symmetric_ring.h"

namespace hoop::tuner {

namespace {

bool has_ring_form(const std::string& name, OpType op) {
  return name == "ring" && (op == OpType::allreduce || op == OpType::reducescatter || op == OpType::allgather);
}

}  // namespace

std::optional<Prediction> symmetric_form(const std::string& name, const schedule::CollectiveDesc& desc,
                                         size_t elem_bytes, const LinkView& links, const CostModel& model) {
  if (has_ring_form(name, desc.op)) return ring_form(desc, elem_bytes, links, model);
  if (name == "hierarchical") return hierarchical_form(desc, elem_bytes, links, model);
  return std::nullopt;
}

std::optional<bool> symmetric_uses_channels(const std::string& name, const schedule::CollectiveDesc& desc) {
  // with_channels (channels.cc) cuts the call into channel_parts parts, one per channel.
  if (has_ring_form(name, desc.op)) return schedule::channel_parts(desc.count, desc.nchannels) > 1;
  return std::nullopt;
}

}  // namespace hoop::tuner
