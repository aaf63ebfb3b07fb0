// The hierarchical AllReduce's symmetric form (see symmetric_forms.h), as hierarchical.cc
// builds it on hosts of equal size: a ring ReduceScatter inside each host, a ring AllReduce of
// each local rank's slice across the hosts (the host's ranks on its NIC at once), a ring
// AllGather inside each host. Hosts are alike, so one rank per local index is priced.
#pragma once

#include <optional>

#include "tuner/predict.h"

namespace hoop::tuner {

std::optional<Prediction> hierarchical_form(const schedule::CollectiveDesc& desc, size_t elem_bytes,
                                            const LinkView& links, const CostModel& model);

}  // namespace hoop::tuner
