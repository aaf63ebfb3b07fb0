// The ways to price a schedule, from the same schedules and the same step price
// (step_cost.h):
//  - sampled_walk: the schedule walk over a sample of ranks beyond 64 (predict.h): the tuner;
//  - full_walk: the walk over every rank (hoop-sim --exact): exact, but its time grows with
//    N * steps, and the tree's and chain's pipeline analysis visits every rank;
//  - symmetric: where an algorithm's ranks fall into a few classes that play the same part
//    (symmetric_forms.h), one rank of each class is priced and runs of steps that cost the
//    same are priced once and multiplied; any other algorithm is walked: every rank up to 256
//    ranks, the sample beyond.
//    tests/test_sim_fast.cc holds it to the full walk within 1%.
#pragma once

#include <string>

#include "tuner/predict.h"

namespace hoop::tuner {

enum class Pricing { sampled_walk, full_walk, symmetric };

Prediction price(Pricing how, const std::string& name, const schedule::CollectiveDesc& desc, size_t elem_bytes,
                 const LinkView& links, const CostModel& model);

}  // namespace hoop::tuner
