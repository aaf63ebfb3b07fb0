#include "planner.h"

#include <fmt/format.h>

namespace hoop::train {

namespace {

std::string num(double v) { return v == static_cast<int>(v) ? fmt::format("{}", static_cast<int>(v))
                                                            : fmt::format("{:g}", v); }

std::string human(double bytes) {
  if (bytes >= 1e12) return fmt::format("{:.1f} TB", bytes / 1e12);
  if (bytes >= 1e9) return fmt::format("{:.1f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.1f} MB", bytes / 1e6);
  if (bytes >= 1e3) return fmt::format("{:.1f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

}  // namespace

std::string plan_table(double params, int ranks, dp::Precision precision,
                       const dp::OptimizerConfig& opt) {
  const dp::StateBytes b = dp::state_bytes(precision, opt);
  const char* opt_name = opt.kind == dp::OptimizerKind::sgd ? "SGD"
                         : opt.kind == dp::OptimizerKind::adamw ? "AdamW" : "Adam";
  const std::string P = num(b.params), G = num(b.grads), K = num(b.optimizer);
  std::string out = fmt::format(
      "model states per rank: psi = {:g} parameters, N = {} ranks, {} {} "
      "(P = {}, G = {}, K = {} bytes per parameter)\n",
      params, ranks, precision == dp::Precision::bf16 ? "mixed-precision" : "f32", opt_name, P, G,
      K);
  const std::string formulas[4] = {
      fmt::format("({} + {} + {}) psi", P, G, K),
      fmt::format("({} + {}) psi + {} psi / N", P, G, K),
      fmt::format("{} psi + ({} + {}) psi / N", P, G, K),
      fmt::format("({} + {} + {}) psi / N", P, G, K),
  };
  const char* what[4] = {"DDP: everything replicated", "optimizer states sharded",
                         "+ gradients sharded", "+ parameters sharded"};
  out += fmt::format("{:<6} {:<28} {:>10}  {}\n", "stage", "formula", "per rank", "");
  for (int s = 0; s < 4; ++s) {
    out += fmt::format("{:<6} {:<28} {:>10}  {}\n", s, formulas[s],
                       human(dp::model_state_bytes_formula(s, params, ranks, b)), what[s]);
  }
  return out;
}

}  // namespace hoop::train
