// Prices of algorithms that are not schedules (transport fast paths such as shm-direct, where
// ranks of one host read each other's buffers). A fast path is priced only where the
// communicator says it can run it.
#pragma once

#include <optional>
#include <string>

#include "tuner/predict.h"

namespace hoop::tuner {

// nullopt when `name` is not a known fast path; otherwise its prediction (applicable false
// when it cannot run this call, e.g. shm-direct across hosts).
std::optional<Prediction> predict_fast_path(const std::string& name, const schedule::CollectiveDesc& desc,
                                            size_t elem_bytes, const LinkView& links, const CostModel& model);

// Whether `name` is priced as a fast path. A fast path moves data through one shared region,
// never over parallel channels: more channels change nothing (and its schedule, which can be
// huge for many ranks and a large buffer, need not be built to find that out).
bool is_fast_path(const std::string& name);

}  // namespace hoop::tuner
