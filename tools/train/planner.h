// hoop-train --plan: the ZeRO paper's per-rank model-state memory for every stage.
#pragma once

#include <string>

#include "hoop/dp.h"

namespace hoop::train {

// The table for `params` parameters on `ranks` ranks with the given precision and optimizer.
std::string plan_table(double params, int ranks, dp::Precision precision,
                       const dp::OptimizerConfig& opt);

}  // namespace hoop::train
