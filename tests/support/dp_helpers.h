// Shared pieces of the data-parallel tests: a small MLP on synthetic data, trained for some
// steps on a rank's share of every global batch, and parameter comparisons.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/dp.h"
#include "model/dataset.h"
#include "model/mlp.h"

namespace hoop::test {

struct DpRun {
  std::vector<int> dims{16, 24, 20, 5};
  model::Activation activation = model::Activation::gelu;
  int global_batch = 14;  // uneven shares on 3 and 4 ranks
  uint64_t seed = 7;
};

const model::Dataset& dp_test_data();

// A DataParallel for the MLP of `run`, registered and finalized.
std::unique_ptr<dp::DataParallel> make_dp(const std::shared_ptr<Communicator>& comm,
                                          const dp::DpConfig& cfg, const model::Mlp& mlp);

// Trains steps [first, first + steps) of the global batch sequence; rank/ranks from dp.
void train_steps(dp::DataParallel& dp, model::Mlp& mlp, const DpRun& run, uint64_t first,
                 int steps);

// Every parameter, registration order (collective at stage 3).
std::vector<float> all_params(dp::DataParallel& dp);

// max |a - b| / max |b|; infinity when the sizes differ.
double max_relative_diff(const std::vector<float>& a, const std::vector<float>& b);
bool bit_identical(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace hoop::test
