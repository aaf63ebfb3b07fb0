// Element-wise optimizer updates on one contiguous range (a tensor, or a rank's slice of it).
// The same code runs for every stage, so the same inputs give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hoop/dp.h"
#include "hoop/types.h"

namespace hoop::dp {

// Number of f32 state arrays besides the parameters: Adam/AdamW 2 (exp_avg, exp_avg_sq),
// SGD 1 with momentum, else 0.
int optimizer_state_count(const OptimizerConfig& c);

// One update of `n` parameters. `grad` holds n elements of `grad_dt` (f32 or bf16); `state0`
// and `state1` are the state arrays (null when the optimizer has fewer). `step` counts from 1.
// Adam with `direction` (1-bit Adam past its warm-up, see CommHook::variance_frozen_at):
// `grad` is the step direction, param -= lr * grad (and AdamW's decay), the states untouched.
void optimizer_update(const OptimizerConfig& c, uint64_t step, float* param, const void* grad,
                      DataType grad_dt, float* state0, float* state1, size_t n,
                      bool direction = false);

}  // namespace hoop::dp
