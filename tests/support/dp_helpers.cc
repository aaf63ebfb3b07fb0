#include "support/dp_helpers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace hoop::test {

const model::Dataset& dp_test_data() {
  static const model::Dataset d = model::make_synthetic(256, 16, 5, 1.0f, 3);
  return d;
}

std::unique_ptr<dp::DataParallel> make_dp(const std::shared_ptr<Communicator>& comm,
                                          const dp::DpConfig& cfg, const model::Mlp& mlp) {
  auto dp = std::make_unique<dp::DataParallel>(comm, cfg);
  mlp.register_params(*dp);
  dp->finalize();
  return dp;
}

void train_steps(dp::DataParallel& dp, model::Mlp& mlp, const DpRun& run, uint64_t first,
                 int steps) {
  const model::Dataset& data = dp_test_data();
  std::vector<float> x;
  std::vector<int> y;
  for (int i = 0; i < steps; ++i) {
    const auto batch = model::global_batch(data.size(), run.global_batch,
                                           first + static_cast<uint64_t>(i), run.seed);
    const auto rows = model::rank_share(batch, dp.rank(), dp.world_size());
    model::gather_rows(data, rows, x, y);
    const float scale = static_cast<float>(dp.world_size()) / static_cast<float>(run.global_batch);
    mlp.train_batch(dp, x.data(), y.data(), static_cast<int>(rows.size()), scale);
    dp.step();
  }
}

std::vector<float> all_params(dp::DataParallel& dp) {
  std::vector<float> out;
  for (int t = 0; t < static_cast<int>(dp.num_tensors()); ++t) {
    const auto v = dp.gather_tensor(t);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

double max_relative_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace hoop::test
