// A small multi-layer perceptron for examples, tests and benchmarks: linear layers with ReLU
// or GELU between them and a softmax cross-entropy loss. Forward and backward are written by
// hand and run layer by layer, backward from the last layer to the first, so each layer's
// gradients are handed to the data-parallel engine as soon as they exist (as autograd hooks
// would). Matrix products go through OpenBLAS (single-threaded: ranks are the parallelism).
// The parameters live in the DataParallel engine; the model asks it for each layer.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "hoop/dp.h"

namespace hoop::model {

enum class Activation : uint8_t { relu, gelu };

struct MlpConfig {
  std::vector<int> dims;  // {inputs, hidden..., classes}: dims.size() - 1 layers
  Activation activation = Activation::relu;
  uint64_t seed = 1;      // initial weights
};

struct BatchResult {
  double loss_sum = 0;  // sum over the batch of -log p(label)
  int correct = 0;
  int count = 0;
};

class Mlp {
 public:
  explicit Mlp(MlpConfig config);

  int num_layers() const { return static_cast<int>(config_.dims.size()) - 1; }
  int inputs() const { return config_.dims.front(); }
  int classes() const { return config_.dims.back(); }
  const MlpConfig& config() const { return config_; }
  size_t num_params() const;

  // Registers layer l's weight (out x in, row-major) and bias as "layer<l>.weight/bias".
  void register_params(dp::DataParallel& dp) const;

  // Forward and backward on `batch` rows of x (batch x inputs) with labels y. The gradient of
  // grad_scale * loss_sum goes to dp, layer by layer; `after_layer_grads(l)` (optional) runs
  // right after layer l's gradients were handed over.
  BatchResult train_batch(dp::DataParallel& dp, const float* x, const int* y, int batch,
                          float grad_scale,
                          const std::function<void(int layer)>& after_layer_grads = {});
  // Forward only.
  BatchResult evaluate(dp::DataParallel& dp, const float* x, const int* y, int rows);

 private:
  int in_dim(int l) const { return config_.dims[static_cast<size_t>(l)]; }
  int out_dim(int l) const { return config_.dims[static_cast<size_t>(l) + 1]; }
  // Runs the layers; keeps inputs and pre-activations when `keep` (for backward).
  const float* forward(dp::DataParallel& dp, const float* x, int rows, bool keep);
  BatchResult loss(const float* logits, const int* y, int rows, float* dlogits, float scale) const;

  MlpConfig config_;
  std::vector<std::vector<float>> inputs_;  // per layer: its input (rows x in)
  std::vector<std::vector<float>> pre_;     // per layer: pre-activation (rows x out)
  std::vector<float> out_, dz_, dx_, grads_;
};

}  // namespace hoop::model
