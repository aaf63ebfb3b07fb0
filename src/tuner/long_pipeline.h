// Long pipelines priced from two short ones. The tree's steps are chunks moving through fixed
// offsets: once there are more chunks than the pipeline is deep, one more chunk adds the same
// steady-state step to every rank, so each rank's time, steps and bytes are linear in the
// chunk count. The walk prices the same call with K1 and K1 + 1 chunks of the real chunk size
// (K1 a little more than the depth its schedule shows), and each rank's time is carried on to
// the real count of chunks. The walk of such a call visits every rank (the pipeline's fill
// depends on the whole tree) with every chunk's steps: thousands of ranks times thousands of
// chunks. The short pair is kept for the next call of the same shape (hoop-sim's larger sizes
// share it). tests/test_sim_fast.cc compares the result with the full walk.
#pragma once

#include <optional>
#include <string>

#include "tuner/predict.h"

namespace hoop::tuner {

std::optional<Prediction> long_pipeline(const std::string& name, const schedule::CollectiveDesc& desc,
                                        size_t elem_bytes, const LinkView& links, const CostModel& model, Walk walk);

}  // namespace hoop::tuner
