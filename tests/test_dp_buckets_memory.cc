// Gradient buckets (boundaries, order, a collective started before backward ends) and the
// per-rank model-state memory against the ZeRO formulas.
#include <gtest/gtest.h>

#include <vector>

#include "dp/memory.h"
#include "support/dp_helpers.h"
#include "support/spawn.h"

namespace hoop::test {
namespace {

using Buckets = std::vector<std::vector<int>>;

Buckets bucket_tensors(const dp::DataParallel& dp) {
  Buckets out;
  for (const auto& b : dp.buckets()) out.push_back(b.tensors);
  return out;
}

// Tensors of the 8-16-16-4 MLP: 0 W0 (16x8 f32 = 512 B), 1 b0 (64 B), 2 W1 (1024 B),
// 3 b1 (64 B), 4 W2 (256 B), 5 b2 (16 B).
TEST(DpBuckets, ReverseOrderWithFirstAndLaterCaps) {
  model::Mlp mlp(model::MlpConfig{{8, 16, 16, 4}, model::Activation::relu, 1});
  dp::DpConfig cfg;
  cfg.first_bucket_bytes = 300;
  cfg.bucket_bytes = 1000;
  auto dp = make_dp(nullptr, cfg, mlp);
  // b2 + W2 = 272 B < 300, + b1 = 336 B closes the first; W1 alone reaches 1000; the rest.
  EXPECT_EQ(bucket_tensors(*dp), (Buckets{{5, 4, 3}, {2}, {1, 0}}));
  EXPECT_EQ(dp->buckets()[0].bytes, 336u);
  EXPECT_EQ(dp->buckets()[1].bytes, 1024u);
  EXPECT_EQ(dp->buckets()[2].bytes, 576u);

  // bf16 gradients are half the bytes: the same caps hold more tensors.
  cfg.precision = dp::Precision::bf16;
  auto half = make_dp(nullptr, cfg, mlp);
  EXPECT_EQ(bucket_tensors(*half), (Buckets{{5, 4, 3, 2}, {1, 0}}));
}

TEST(DpBuckets, DefaultCapsAreOneAndTwentyFiveMiB) {
  dp::DpConfig cfg;
  EXPECT_EQ(cfg.first_bucket_bytes, size_t{1} << 20);
  EXPECT_EQ(cfg.bucket_bytes, size_t{25} << 20);
  // 64-512-512-10: b2 W2 b1 W1 pass 1 MiB with W1 (1 MiB alone); then b0, W0.
  model::Mlp mlp(model::MlpConfig{{64, 512, 512, 10}, model::Activation::relu, 1});
  auto dp = make_dp(nullptr, cfg, mlp);
  EXPECT_EQ(bucket_tensors(*dp), (Buckets{{5, 4, 3, 2}, {1, 0}}));
}

// On 2 ranks, stages 0 and 2: the bucket collectives start in bucket order, the first one
// while backward still has layers to go (read from the engine's launch counter in the
// backward hook, i.e. before layer 0's gradients exist).
TEST(DpBuckets, FirstCollectiveStartsBeforeBackwardEnds) {
  auto results = run_ranks(2, [](RankContext& ctx) {
    auto comm = ctx.make_comm();
    for (int stage : {0, 2}) {
      dp::DpConfig cfg;
      cfg.stage = stage;
      cfg.first_bucket_bytes = 300;
      cfg.bucket_bytes = 1000;
      model::Mlp mlp(model::MlpConfig{{8, 16, 16, 4}, model::Activation::relu, 1});
      auto dp = make_dp(comm, cfg, mlp);
      std::vector<float> x(static_cast<size_t>(6 * 8), 0.5f);
      std::vector<int> y{0, 1, 2, 3, 0, 1};
      std::vector<size_t> launched_after(3, 99);
      mlp.train_batch(*dp, x.data(), y.data(), 6, 1.0f / 12,
                      [&](int layer) { launched_after[static_cast<size_t>(layer)] = dp->buckets_launched(); });
      // Bucket 0 = {b2, W2, b1} completes with layer 1, bucket 1 = {W1} too, bucket 2 with 0.
      EXPECT_EQ(launched_after, (std::vector<size_t>{3, 2, 0})) << "stage " << stage;
      EXPECT_EQ(dp->launch_order(), (std::vector<int>{0, 1, 2})) << "stage " << stage;
      dp->step();
      EXPECT_EQ(dp->buckets_launched(), 0u);
    }
  });
  EXPECT_TRUE(all_ok(results));
}

// Expected bytes from the shard size: P, G and K bytes per element, padded per tensor.
struct Expect {
  uint64_t params, grads, optimizer;
};

Expect expected(int stage, uint64_t psi, uint64_t shard, uint64_t n, const dp::StateBytes& b) {
  const auto P = static_cast<uint64_t>(b.params), G = static_cast<uint64_t>(b.grads),
             K = static_cast<uint64_t>(b.optimizer);
  switch (stage) {
    case 0: return {P * psi, G * psi, K * psi};
    case 1: return {P * psi, G * shard * n, K * shard};
    case 2: return {P * psi, G * shard, K * shard};
    default: return {P * shard, G * shard, K * shard};
  }
}

TEST(DpMemory, MeasuredMatchesFormulaWithinPadding) {
  auto results = run_ranks(4, [](RankContext& ctx) {
    auto comm = ctx.make_comm();
    for (dp::Precision p : {dp::Precision::f32, dp::Precision::bf16}) {
      for (dp::OptimizerKind kind : {dp::OptimizerKind::adam, dp::OptimizerKind::sgd}) {
        for (int stage = 0; stage <= 3; ++stage) {
          dp::DpConfig cfg;
          cfg.stage = stage;
          cfg.precision = p;
          cfg.optimizer.kind = kind;
          cfg.optimizer.momentum = 0.9f;
          cfg.first_bucket_bytes = 512;
          cfg.bucket_bytes = 2048;
          DpRun run;
          model::Mlp mlp(model::MlpConfig{run.dims, run.activation, run.seed});
          auto dp = make_dp(comm, cfg, mlp);
          train_steps(*dp, mlp, run, 0, 2);
          const dp::MemoryReport m = dp->memory();
          const dp::StateBytes b = dp::state_bytes(p, cfg.optimizer);
          const uint64_t psi = dp->num_params(), shard = dp->shard_elements(), n = 4;
          const std::string what = "stage " + std::to_string(stage) +
                                   (p == dp::Precision::bf16 ? " bf16 " : " f32 ") +
                                   (kind == dp::OptimizerKind::sgd ? "sgd" : "adam");
          const Expect e = expected(stage, psi, shard, n, b);
          EXPECT_EQ(m.current.params, e.params) << what;
          EXPECT_EQ(m.current.grads, e.grads) << what;
          EXPECT_EQ(m.current.optimizer, e.optimizer) << what;
          // The formula, within the padding of the last slices.
          const double formula = dp->model_state_formula_bytes();
          const double pad = static_cast<double>(shard * n - psi);
          const double measured = static_cast<double>(m.current.model_states());
          EXPECT_GE(measured, formula - 1e-6) << what;
          EXPECT_LE(measured - formula, (b.params + b.grads + b.optimizer) * pad) << what;
          // Buckets, gathered layers and staging buffers exist only during the step.
          EXPECT_EQ(m.current.comm, 0u) << what;
          if (stage >= 2) {
            EXPECT_GT(m.peak.comm, 0u) << what;
          }
          EXPECT_GE(m.peak_total, m.current.total()) << what;
        }
      }
    }
  });
  EXPECT_TRUE(all_ok(results));
}

TEST(DpMemory, FormulaOfThePlannerExample) {
  // 7.5e9 parameters, 64 ranks, mixed-precision Adam: 120 / 31.4 / 16.6 / 1.9 GB.
  dp::OptimizerConfig adam;
  const dp::StateBytes b = dp::state_bytes(dp::Precision::bf16, adam);
  EXPECT_EQ(b.optimizer, 12);
  const double expect[4] = {120.0, 31.40625, 16.640625, 1.875};
  for (int s = 0; s < 4; ++s) {
    EXPECT_NEAR(dp::model_state_bytes_formula(s, 7.5e9, 64, b) / 1e9, expect[s], 1e-9) << s;
  }
  // f32 SGD without momentum keeps no optimizer state.
  dp::OptimizerConfig sgd;
  sgd.kind = dp::OptimizerKind::sgd;
  EXPECT_EQ(dp::state_bytes(dp::Precision::f32, sgd).optimizer, 0);
}

TEST(DpMemory, LedgerCountsPeaks) {
  dp::MemoryLedger ledger;
  {
    dp::TrackedBuffer a(ledger, dp::MemKind::params, 100);
    dp::TrackedBuffer c(ledger, dp::MemKind::comm, 50);
    EXPECT_EQ(ledger.report().current.total(), 150u);
  }
  dp::TrackedBuffer g(ledger, dp::MemKind::grads, 10);
  const auto r = ledger.report();
  EXPECT_EQ(r.current.total(), 10u);
  EXPECT_EQ(r.peak.params, 100u);
  EXPECT_EQ(r.peak.comm, 50u);
  EXPECT_EQ(r.peak_total, 150u);
}

}  // namespace
}  // namespace hoop::test
