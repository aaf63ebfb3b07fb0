#include "model/mlp.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/errors.h"

namespace hoop::model {

namespace {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

float activate(Activation a, float z) {
  if (a == Activation::relu) return z > 0.0f ? z : 0.0f;
  const float t = std::tanh(kGeluK * (z + kGeluC * z * z * z));
  return 0.5f * z * (1.0f + t);
}

float activate_grad(Activation a, float z) {
  if (a == Activation::relu) return z > 0.0f ? 1.0f : 0.0f;
  const float t = std::tanh(kGeluK * (z + kGeluC * z * z * z));
  return 0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * kGeluK * (1.0f + 3.0f * kGeluC * z * z);
}

}  // namespace

Mlp::Mlp(MlpConfig config) : config_(std::move(config)) {
  HOOP_CHECK_ARG(config_.dims.size() >= 2, ErrorContext{}, "an MLP needs at least 2 sizes, got {}",
                 config_.dims.size());
  for (int d : config_.dims) HOOP_CHECK_ARG(d > 0, ErrorContext{}, "MLP layer size {}", d);
  // Ranks are processes: one BLAS thread each, and results independent of thread counts.
  openblas_set_num_threads(1);
}

size_t Mlp::num_params() const {
  size_t n = 0;
  for (int l = 0; l < num_layers(); ++l) {
    n += static_cast<size_t>(out_dim(l)) * static_cast<size_t>(in_dim(l) + 1);
  }
  return n;
}

void Mlp::register_params(dp::DataParallel& dp) const {
  std::mt19937_64 rng(config_.seed);
  for (int l = 0; l < num_layers(); ++l) {
    const size_t in = static_cast<size_t>(in_dim(l)), out = static_cast<size_t>(out_dim(l));
    // He (ReLU/GELU) uniform initialisation; biases start at zero.
    const float bound = std::sqrt(6.0f / static_cast<float>(in));
    std::vector<float> w(in * out);
    for (float& v : w) {
      const double u = static_cast<double>(rng() >> 11) * 0x1p-53;  // [0, 1)
      v = static_cast<float>((2.0 * u - 1.0) * bound);
    }
    std::vector<float> b(out, 0.0f);
    dp.register_param("layer" + std::to_string(l) + ".weight", {out, in}, l, w.data());
    dp.register_param("layer" + std::to_string(l) + ".bias", {out}, l, b.data());
  }
}

const float* Mlp::forward(dp::DataParallel& dp, const float* x, int rows, bool keep) {
  const int L = num_layers();
  inputs_.resize(static_cast<size_t>(L));
  pre_.resize(static_cast<size_t>(L));
  std::vector<float> cur(x, x + static_cast<size_t>(rows) * static_cast<size_t>(inputs()));
  for (int l = 0; l < L; ++l) {
    const int in = in_dim(l), out = out_dim(l);
    const float* p = dp.layer_params(l, dp::Phase::forward);
    const float* w = p;
    const float* b = p + static_cast<size_t>(in) * static_cast<size_t>(out);
    std::vector<float> z(static_cast<size_t>(rows) * static_cast<size_t>(out));
    for (int r = 0; r < rows; ++r) std::copy(b, b + out, z.begin() + static_cast<long>(r) * out);
    // z = cur * w^T + b
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in, 1.0f, cur.data(), in, w,
                in, 1.0f, z.data(), out);
    dp.release_layer(l, dp::Phase::forward);
    if (keep) inputs_[static_cast<size_t>(l)] = cur;
    if (l + 1 < L) {
      cur.resize(z.size());
      std::transform(z.begin(), z.end(), cur.begin(),
                     [&](float v) { return activate(config_.activation, v); });
    }
    pre_[static_cast<size_t>(l)] = std::move(z);
  }
  return pre_.back().data();
}

BatchResult Mlp::loss(const float* logits, const int* y, int rows, float* dlogits,
                      float scale) const {
  BatchResult r;
  r.count = rows;
  const int c = classes();
  for (int i = 0; i < rows; ++i) {
    const float* z = logits + static_cast<size_t>(i) * static_cast<size_t>(c);
    const int label = y[i];
    HOOP_CHECK_ARG(label >= 0 && label < c, ErrorContext{}, "label {} of row {} outside 0..{}",
                   label, i, c - 1);
    const float zmax = *std::max_element(z, z + c);
    double sum = 0;
    for (int k = 0; k < c; ++k) sum += std::exp(static_cast<double>(z[k] - zmax));
    const double log_sum = std::log(sum) + zmax;
    r.loss_sum += log_sum - z[label];
    if (std::max_element(z, z + c) - z == label) ++r.correct;
    if (dlogits != nullptr) {
      float* d = dlogits + static_cast<size_t>(i) * static_cast<size_t>(c);
      for (int k = 0; k < c; ++k) {
        const float p = static_cast<float>(std::exp(static_cast<double>(z[k]) - log_sum));
        d[k] = (p - (k == label ? 1.0f : 0.0f)) * scale;
      }
    }
  }
  return r;
}

BatchResult Mlp::train_batch(dp::DataParallel& dp, const float* x, const int* y, int batch,
                             float grad_scale,
                             const std::function<void(int layer)>& after_layer_grads) {
  const int L = num_layers();
  const float* logits = forward(dp, x, batch, true);
  dz_.assign(static_cast<size_t>(batch) * static_cast<size_t>(classes()), 0.0f);
  const BatchResult result = loss(logits, y, batch, dz_.data(), grad_scale);
  for (int l = L - 1; l >= 0; --l) {
    const int in = in_dim(l), out = out_dim(l);
    const float* p = dp.layer_params(l, dp::Phase::backward);
    const std::vector<float>& xin = inputs_[static_cast<size_t>(l)];
    grads_.assign(static_cast<size_t>(out) * static_cast<size_t>(in + 1), 0.0f);
    float* dw = grads_.data();
    float* db = dw + static_cast<size_t>(out) * static_cast<size_t>(in);
    // dW = dZ^T X, db = column sums of dZ
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dz_.data(), out,
                xin.data(), in, 0.0f, dw, in);
    for (int r = 0; r < batch; ++r) {
      const float* row = dz_.data() + static_cast<size_t>(r) * static_cast<size_t>(out);
      for (int k = 0; k < out; ++k) db[k] += row[k];
    }
    dp.layer_grads(l, grads_.data());
    if (after_layer_grads) after_layer_grads(l);
    if (l > 0) {
      // dX = dZ W, then through the previous layer's activation.
      dx_.assign(static_cast<size_t>(batch) * static_cast<size_t>(in), 0.0f);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dz_.data(), out,
                  p, in, 0.0f, dx_.data(), in);
      const std::vector<float>& z = pre_[static_cast<size_t>(l) - 1];
      for (size_t i = 0; i < dx_.size(); ++i) dx_[i] *= activate_grad(config_.activation, z[i]);
      dz_.swap(dx_);
    }
    dp.release_layer(l, dp::Phase::backward);
  }
  return result;
}

BatchResult Mlp::evaluate(dp::DataParallel& dp, const float* x, const int* y, int rows) {
  const float* logits = forward(dp, x, rows, false);
  return loss(logits, y, rows, nullptr, 0.0f);
}

}  // namespace hoop::model
