// Symmetry-reduced pricing of the algorithms whose ranks play a few distinct parts. The ring's
// ranks differ only by where their neighbours live (same host or not) and how many of their
// host's ranks use the network in the same step, so one rank per such class is priced; its
// steps differ only by which chunk they carry (chunks differ by at most one element), so the
// steps are cut into runs of equal cost, each priced once (step_price, as the walk does) and
// multiplied by its length. The forms follow the builders in src/schedule/ step for step;
// tests/test_sim_fast.cc compares them with the full walk of every rank.
#pragma once

#include <optional>
#include <string>

#include "tuner/predict.h"

namespace hoop::tuner {

// nullopt when `name` has no symmetric form for this call (the caller walks the schedules).
std::optional<Prediction> symmetric_form(const std::string& name, const schedule::CollectiveDesc& desc,
                                         size_t elem_bytes, const LinkView& links, const CostModel& model);

// Whether `name` spreads desc over desc.nchannels channels, when its symmetric form knows
// without building a schedule (nullopt: build one and look).
std::optional<bool> symmetric_uses_channels(const std::string& name, const schedule::CollectiveDesc& desc);

}  // namespace hoop::tuner
