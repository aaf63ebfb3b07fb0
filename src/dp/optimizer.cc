#include "dp/optimizer.h"

#include <algorithm>
#include <cmath>

#include "kernels/reduce.h"

namespace hoop::dp {

int optimizer_state_count(const OptimizerConfig& c) {
  if (c.kind == OptimizerKind::sgd) return c.momentum != 0.0f ? 1 : 0;
  return 2;
}

namespace {

void adam(const OptimizerConfig& c, uint64_t step, float* p, const float* g, float* m, float* v,
          size_t n) {
  const double t = static_cast<double>(step);
  const float bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(c.beta1), t));
  const float bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(c.beta2), t));
  const bool decoupled = c.kind == OptimizerKind::adamw;
  const float decay = decoupled ? 1.0f - c.lr * c.weight_decay : 1.0f;
  const float l2 = decoupled ? 0.0f : c.weight_decay;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] + l2 * p[i];
    m[i] = c.beta1 * m[i] + (1.0f - c.beta1) * gi;
    v[i] = c.beta2 * v[i] + (1.0f - c.beta2) * gi * gi;
    const float mhat = m[i] / bias1;
    const float vhat = v[i] / bias2;
    p[i] = p[i] * decay - c.lr * mhat / (std::sqrt(vhat) + c.eps);
  }
}

// 1-bit Adam past its warm-up: g is the step direction the hook computed from its own moments
// (CommHook::variance_frozen_at); Adam's moments here stay as they are.
void adam_direction(const OptimizerConfig& c, float* p, const float* g, size_t n) {
  const float decay = c.kind == OptimizerKind::adamw ? 1.0f - c.lr * c.weight_decay : 1.0f;
  for (size_t i = 0; i < n; ++i) p[i] = p[i] * decay - c.lr * g[i];
}

void sgd(const OptimizerConfig& c, float* p, const float* g, float* mom, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float gi = g[i] + c.weight_decay * p[i];
    if (mom != nullptr) {
      mom[i] = c.momentum * mom[i] + gi;
      gi = mom[i];
    }
    p[i] -= c.lr * gi;
  }
}

}  // namespace

void optimizer_update(const OptimizerConfig& c, uint64_t step, float* param, const void* grad,
                      DataType grad_dt, float* state0, float* state1, size_t n,
                      bool direction) {
  constexpr size_t kChunk = 1024;
  float wide[kChunk];
  for (size_t done = 0; done < n; done += kChunk) {
    const size_t len = std::min(kChunk, n - done);
    const float* g;
    if (grad_dt == DataType::f32) {
      g = static_cast<const float*>(grad) + done;
    } else {
      kernels::to_f32(wide, static_cast<const uint16_t*>(grad) + done, grad_dt, len);
      g = wide;
    }
    float* m = state0 ? state0 + done : nullptr;
    if (c.kind == OptimizerKind::sgd) {
      sgd(c, param + done, g, m, len);
    } else if (direction) {
      adam_direction(c, param + done, g, len);
    } else {
      adam(c, step, param + done, g, m, state1 + done, len);
    }
  }
}

}  // namespace hoop::dp
