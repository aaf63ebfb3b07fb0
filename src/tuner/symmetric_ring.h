// The ring's symmetric form (see symmetric_forms.h): AllReduce, ReduceScatter and AllGather,
// over any channel count, as ring.cc and channels.cc build them.
#pragma once

#include <optional>

#include "tuner/predict.h"

namespace hoop::tuner {

std::optional<Prediction> ring_form(const schedule::CollectiveDesc& desc, size_t elem_bytes, const LinkView& links,
                                    const CostModel& model);

}  // namespace hoop::tuner
