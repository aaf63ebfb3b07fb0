// The ZeRO paper's model-state memory per rank (Rajbhandari et al., SC 2020, section 3-5).
#include "core/errors.h"
#include "hoop/dp.h"

namespace hoop::dp {

StateBytes state_bytes(Precision p, const OptimizerConfig& opt) {
  StateBytes b;
  const bool mixed = p == Precision::bf16;
  b.params = mixed ? 2 : 4;
  b.grads = mixed ? 2 : 4;
  double k = mixed ? 4 : 0;  // f32 master weights
  if (opt.kind == OptimizerKind::sgd) {
    if (opt.momentum != 0.0f) k += 4;
  } else {
    k += 8;  // first and second moments
  }
  b.optimizer = k;
  return b;
}

double model_state_bytes_formula(int stage, double psi, int ranks, const StateBytes& b) {
  HOOP_CHECK_ARG(ranks >= 1, ErrorContext{}, "ZeRO formula: {} ranks", ranks);
  const double n = ranks;
  switch (stage) {
    case 0: return (b.params + b.grads + b.optimizer) * psi;
    case 1: return (b.params + b.grads) * psi + b.optimizer * psi / n;
    case 2: return b.params * psi + (b.grads + b.optimizer) * psi / n;
    case 3: return (b.params + b.grads + b.optimizer) * psi / n;
    default: break;
  }
  throw_error(ErrorCode::invalid_argument, fmt::format("ZeRO formula: stage {} (0..3)", stage));
}

}  // namespace hoop::dp
