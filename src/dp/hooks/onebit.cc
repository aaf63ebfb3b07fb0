// 1-bit compression with error feedback, exchanged as 1-bit Adam's compressed AllReduce (Tang
// et al., 2021). Each rank compresses x (see onebit_codec.cc) and keeps error = x - what it
// sent; run q of the bucket (whole chunks, onebit_groups) goes to rank q (an AllToAll); rank q
// averages the N decoded runs in rank order, adds its server error, compresses that again and
// keeps server error = average - what it sent; an AllGather brings every compressed run to
// every rank, and all decode the same bytes. Per element: 2 (N-1)/N x (1 bit + 32 / C).
//
// With SGD (1-bit SGD, Seide et al., 2014) x is the gradient plus the error. With Adam the
// first `warmup` steps are uncompressed and the hook keeps Adam's two moments of the averaged
// gradients; then the variance is frozen and x is the rank's momentum, beta1 m + (1 - beta1) g,
// divided by the frozen denominator d = max(sqrt(v^), floor) + eps, plus the error. The
// averaged result u is the next m = u d (the same on every rank) and the bucket gets Adam's
// step direction u / (1 - beta1^t), which the optimizer applies (variance_frozen_at). At a
// few steps of exponentially growing intervals the variance is refreshed from uncompressed
// gradients (0/1 Adam), so the frozen d follows the gradients as the loss falls.
//
// Why divide by d before compressing: a chunk's code gives each of its elements the same
// magnitude, so the error is bounded in the units of what is compressed. Compressing m, as
// published, bounds the error of m; after the division by a small frozen sqrt(v) that error
// becomes a step of lr * scale / sqrt(v). Why the floor: an element whose gradient was
// (nearly) 0 through the warm-up (a pixel that is rarely lit, a unit not yet active) has a
// (nearly) 0 frozen variance, and when its gradient appears, m / sqrt(v) is unbounded, with or
// without compression. The floor is a fraction of the tensor's RMS of sqrt(v^); a tensor whose
// variance is all 0 gets no step (d = 0).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/errors.h"
#include "dp/hooks/hooks.h"

namespace hoop::dp::hooks {

namespace {

// The floor of sqrt(v^) per tensor, as a fraction of the tensor's RMS of sqrt(v^).
constexpr double kVarianceFloor = 0.03;

struct BucketState {
  std::vector<OneBitGroup> groups;
  std::vector<Chunk> tensors;   // [offset, offset + len) of each tensor of the bucket
  size_t wire = 0;              // bytes per run on the wire: the largest run's code
  std::vector<float> error;     // this rank's: x - what it sent
  std::vector<float> server;    // of this rank's run (bucket-sized: loads on any rank count)
  std::vector<float> momentum;  // 1-bit Adam: the first moment, the same on every rank
  std::vector<float> variance;  // 1-bit Adam: the second moment, frozen after the warm-up
  std::vector<float> denom;     // 1-bit Adam: d, from the frozen variance
};

class OneBitHook final : public CommHook {
 public:
  explicit OneBitHook(OneBitOptions o) : o_(o) {}
  std::string name() const override { return "onebit"; }
  uint64_t variance_frozen_at() const override {
    return adam_ ? static_cast<uint64_t>(o_.warmup) : 0;
  }

  void setup(const CommHookContext& ctx, const std::vector<GradBucket>& buckets) override {
    const OptimizerConfig* opt = ctx.optimizer;
    adam_ = opt != nullptr && opt->kind != OptimizerKind::sgd && o_.warmup > 0;
    if (adam_) {
      opt_ = *opt;
      HOOP_CHECK_ARG(opt->kind == OptimizerKind::adamw || opt->weight_decay == 0.0f,
                     (ErrorContext{ctx.rank, "dp.compress"}),
                     "compress 'onebit' with Adam compresses the momentum, which Adam's L2 weight "
                     "decay would enter: use adamw for weight decay");
    }
    const size_t ranks = static_cast<size_t>(ctx.size);
    for (const GradBucket& b : buckets) {
      BucketState st;
      st.groups = onebit_groups(onebit_chunks(b, o_.chunk), b.numel, ranks);
      for (const OneBitGroup& g : st.groups) {
        st.wire = std::max(st.wire, onebit_encoded_bytes(g.numel, g.chunks.size()));
      }
      for (const BucketTensor& t : b.tensors) st.tensors.push_back(Chunk{t.offset, t.numel});
      st.error.assign(b.numel, 0.0f);
      st.server.assign(b.numel, 0.0f);
      if (adam_) {
        st.momentum.assign(b.numel, 0.0f);
        st.variance.assign(b.numel, 0.0f);
      }
      state_.push_back(std::move(st));
    }
  }

  void allreduce(const CommHookContext& ctx, GradBucket& b) override {
    BucketState& st = state_[static_cast<size_t>(b.index)];
    const size_t n = b.numel;
    if (ctx.step < static_cast<uint64_t>(o_.warmup)) {
      allreduce_avg(ctx, b.data, n, b.dtype);
      if (adam_) track_moments(st, b);
      return;
    }
    if (adam_ && is_refresh_step(ctx.step)) {
      refresh_variance(ctx, st, b);
      return;
    }
    x_.resize(n);
    load_f32(x_.data(), b.data, b.dtype, n);
    if (adam_) {
      if (st.denom.empty()) freeze(st, last_variance_step(ctx.step));
      const float b1 = opt_.beta1;
      for (size_t i = 0; i < n; ++i) {
        const float d = st.denom[i];
        x_[i] = d == 0.0f ? 0.0f : (b1 * st.momentum[i] + (1.0f - b1) * x_[i]) / d;
      }
    }
    for (size_t i = 0; i < n; ++i) x_[i] += st.error[i];
    compressed_average(ctx, st, n);
    if (adam_) {
      const float bias1 = static_cast<float>(
          1.0 - std::pow(static_cast<double>(opt_.beta1), static_cast<double>(ctx.step + 1)));
      for (size_t i = 0; i < n; ++i) {
        st.momentum[i] = x_[i] * st.denom[i];
        x_[i] /= bias1;
      }
    }
    store_f32(b.data, b.dtype, x_.data(), n);
  }

  std::vector<CommHookState> state() override {
    std::vector<CommHookState> out;
    for (size_t b = 0; b < state_.size(); ++b) {
      BucketState& st = state_[b];
      out.push_back(CommHookState{fmt::format("bucket{}.error", b), &st.error, false});
      out.push_back(CommHookState{fmt::format("bucket{}.server_error", b), &st.server, false});
      if (adam_) {
        out.push_back(CommHookState{fmt::format("bucket{}.momentum", b), &st.momentum, true});
        out.push_back(CommHookState{fmt::format("bucket{}.variance", b), &st.variance, true});
      }
    }
    return out;
  }

 private:
  // x_ (this rank's values, error included) -> their compressed average, the same bits on
  // every rank; the worker and server errors keep what was not sent.
  void compressed_average(const CommHookContext& ctx, BucketState& st, size_t n) {
    const size_t ranks = static_cast<size_t>(ctx.size), wire = st.wire;
    send_.resize(wire * ranks);
    for (size_t q = 0; q < ranks; ++q) {
      const OneBitGroup& g = st.groups[q];
      onebit_encode(x_.data() + g.offset, g.numel, g.chunks, send_.data() + q * wire,
                    st.error.data() + g.offset);
    }
    for (size_t i = 0; i < n; ++i) st.error[i] = x_[i] - st.error[i];  // x - decoded
    recv_.resize(wire * ranks);
    exchange(ctx, wire, true);

    // This rank's run: the average of the N codes, plus the server error, compressed again.
    const OneBitGroup& mine = st.groups[static_cast<size_t>(ctx.rank)];
    avg_.resize(mine.numel);
    for (size_t q = 0; q < ranks; ++q) {
      onebit_decode(recv_.data() + q * wire, mine.chunks, avg_.data(), q == 0);
    }
    float* server = st.server.data() + mine.offset;
    const float div = static_cast<float>(ranks);
    for (size_t i = 0; i < mine.numel; ++i) avg_[i] = avg_[i] / div + server[i];
    onebit_encode(avg_.data(), mine.numel, mine.chunks, send_.data(), server);
    for (size_t i = 0; i < mine.numel; ++i) server[i] = avg_[i] - server[i];
    exchange(ctx, wire, false);
    for (size_t q = 0; q < ranks; ++q) {
      const OneBitGroup& g = st.groups[q];
      onebit_decode(recv_.data() + q * wire, g.chunks, x_.data() + g.offset, true);
    }
  }

  // `all_to_all`: run q of send_ to rank q; else the first run of send_ to every rank.
  void exchange(const CommHookContext& ctx, size_t wire, bool all_to_all) {
    if (!ctx.comm) {
      std::memcpy(recv_.data(), send_.data(), wire);
    } else if (all_to_all) {
      ctx.comm->alltoall(send_.data(), recv_.data(), wire, DataType::u8, ctx.op_options);
    } else {
      ctx.comm->allgather(send_.data(), recv_.data(), wire, DataType::u8, ctx.op_options);
    }
  }

  // Adam's moments of the averaged gradients, as the optimizer computes them.
  void track_moments(BucketState& st, const GradBucket& b) {
    x_.resize(b.numel);
    load_f32(x_.data(), b.data, b.dtype, b.numel);
    const float b1 = opt_.beta1, b2 = opt_.beta2;
    for (size_t i = 0; i < b.numel; ++i) {
      st.momentum[i] = b1 * st.momentum[i] + (1.0f - b1) * x_[i];
      st.variance[i] = b2 * st.variance[i] + (1.0f - b2) * x_[i] * x_[i];
    }
  }

  // 0/1 Adam's variance refresh (Lu et al., 2022): past the warm-up, at steps W + R, W + 3R,
  // W + 7R, ... (intervals R, 2R, 4R: a few uncompressed steps in a long run), the gradients
  // are averaged uncompressed and enter the variance; the frozen d follows the gradients as
  // they shrink, where a variance frozen at the warm-up's large gradients keeps every later
  // step too short.
  bool is_refresh_step(uint64_t step) const {
    if (o_.refresh <= 0) return false;
    const uint64_t w = static_cast<uint64_t>(o_.warmup), r = static_cast<uint64_t>(o_.refresh);
    for (uint64_t at = w + r, gap = r; at <= step; gap *= 2, at += gap) {
      if (at == step) return true;
    }
    return false;
  }
  // The step whose gradients entered the variance last, at or before `step` (>= warmup - 1).
  uint64_t last_variance_step(uint64_t step) const {
    uint64_t last = static_cast<uint64_t>(o_.warmup) - 1;
    if (o_.refresh <= 0) return last;
    const uint64_t w = static_cast<uint64_t>(o_.warmup), r = static_cast<uint64_t>(o_.refresh);
    for (uint64_t at = w + r, gap = r; at <= step; gap *= 2, at += gap) last = at;
    return last;
  }

  // A refresh step: Adam's exact step from the averaged gradients g. The variance takes g^2 as
  // the sample of every step since its last update, v = beta2^k v + (1 - beta2^k) g^2, which
  // is Adam's average had g^2 stayed constant over those k steps; d is frozen anew from it,
  // and the errors, kept in units of m / d, are carried into the new units.
  void refresh_variance(const CommHookContext& ctx, BucketState& st, GradBucket& b) {
    const size_t n = b.numel;
    if (st.denom.empty()) freeze(st, last_variance_step(ctx.step - 1));
    allreduce_avg(ctx, b.data, n, b.dtype);
    x_.resize(n);
    load_f32(x_.data(), b.data, b.dtype, n);
    const uint64_t k = ctx.step - last_variance_step(ctx.step - 1);
    const float b1 = opt_.beta1;
    const float keep = static_cast<float>(std::pow(static_cast<double>(opt_.beta2), static_cast<double>(k)));
    for (size_t i = 0; i < n; ++i) {
      st.momentum[i] = b1 * st.momentum[i] + (1.0f - b1) * x_[i];
      st.variance[i] = keep * st.variance[i] + (1.0f - keep) * x_[i] * x_[i];
    }
    const std::vector<float> old = st.denom;
    freeze(st, ctx.step);
    for (size_t i = 0; i < n; ++i) {
      const float scale = st.denom[i] == 0.0f ? 0.0f : old[i] / st.denom[i];
      st.error[i] *= scale;
      st.server[i] *= scale;
    }
    const float bias1 = static_cast<float>(
        1.0 - std::pow(static_cast<double>(b1), static_cast<double>(ctx.step + 1)));
    for (size_t i = 0; i < n; ++i) {
      const float d = st.denom[i];
      x_[i] = d == 0.0f ? 0.0f : st.momentum[i] / d / bias1;
    }
    store_f32(b.data, b.dtype, x_.data(), n);
  }

  // d per element from the variance as it was after step `last` (bias-corrected as Adam's
  // then).
  void freeze(BucketState& st, uint64_t last) const {
    const double bias2 =
        1.0 - std::pow(static_cast<double>(opt_.beta2), static_cast<double>(last + 1));
    st.denom.resize(st.variance.size());
    for (const Chunk& t : st.tensors) {
      const float* v = st.variance.data() + t.offset;
      float* d = st.denom.data() + t.offset;
      double sum = 0;
      for (size_t i = 0; i < t.len; ++i) sum += static_cast<double>(v[i]) / bias2;
      const double floor = kVarianceFloor * std::sqrt(sum / static_cast<double>(t.len));
      for (size_t i = 0; i < t.len; ++i) {
        const double r = std::max(std::sqrt(static_cast<double>(v[i]) / bias2), floor);
        d[i] = r == 0.0 ? 0.0f : static_cast<float>(r) + opt_.eps;
      }
    }
  }

  OneBitOptions o_;
  bool adam_ = false;
  OptimizerConfig opt_;
  std::vector<BucketState> state_;
  std::vector<float> x_, avg_;
  std::vector<std::byte> send_, recv_;
};

}  // namespace

std::shared_ptr<CommHook> make_onebit(const OneBitOptions& o) {
  return std::make_shared<OneBitHook>(o);
}

}  // namespace hoop::dp::hooks
