// ZeRO stages 0-3 on 1-4 ranks against one process training on the union of the batches, and
// stages 1-3 against each other with the ring forced. One job per rank count: every rank
// trains every configuration (the reference in-process, without a communicator) and checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/dp_helpers.h"
#include "support/spawn.h"

namespace hoop::test {
namespace {

constexpr int kSteps = 20;

dp::DpConfig config(int stage, dp::Precision precision, const std::string& algo) {
  dp::DpConfig c;
  c.stage = stage;
  c.precision = precision;
  c.optimizer.kind = dp::OptimizerKind::adamw;
  c.optimizer.lr = 1e-2f;
  c.optimizer.weight_decay = 1e-2f;
  // Small buckets: several per step, tensors of one layer in different buckets.
  c.first_bucket_bytes = 256;
  c.bucket_bytes = 1024;
  c.op_options.algo = algo;
  return c;
}

std::vector<float> train(const std::shared_ptr<Communicator>& comm, const dp::DpConfig& cfg) {
  DpRun run;
  model::Mlp mlp(model::MlpConfig{run.dims, run.activation, run.seed});
  auto dp = make_dp(comm, cfg, mlp);
  train_steps(*dp, mlp, run, 0, kSteps);
  return all_params(*dp);
}

void check_rank_count(int n) {
  auto results = run_ranks(n, [](RankContext& ctx) {
    auto comm = ctx.make_comm();
    for (dp::Precision p : {dp::Precision::f32, dp::Precision::bf16}) {
      const bool f32 = p == dp::Precision::f32;
      const std::string what = f32 ? "f32" : "bf16";
      const std::vector<float> reference = train(nullptr, config(0, p, ""));
      // Stage 0 with the default algorithm; stages 1-3 with the default and with the ring.
      for (int stage = 0; stage <= 3; ++stage) {
        const auto got = train(comm, config(stage, p, ""));
        // bf16 rounds parameters and gradients: a looser bound, same check.
        const double tol = f32 ? 1e-5 : 2e-2;
        EXPECT_LE(max_relative_diff(got, reference), tol)
            << what << " stage " << stage << " on " << ctx.size << " ranks vs one process";
      }
      std::vector<float> ring[4];
      for (int stage = 1; stage <= 3; ++stage) ring[stage] = train(comm, config(stage, p, "ring"));
      EXPECT_TRUE(bit_identical(ring[1], ring[2])) << what << ": stage 1 vs 2 with the ring";
      EXPECT_TRUE(bit_identical(ring[1], ring[3])) << what << ": stage 1 vs 3 with the ring";
      EXPECT_LE(max_relative_diff(ring[1], reference), f32 ? 1e-5 : 2e-2);
    }
  });
  EXPECT_TRUE(all_ok(results));
}

TEST(DpEquivalence, OneRank) { check_rank_count(1); }
TEST(DpEquivalence, TwoRanks) { check_rank_count(2); }
TEST(DpEquivalence, ThreeRanks) { check_rank_count(3); }
TEST(DpEquivalence, FourRanks) { check_rank_count(4); }

// The check can fail: a run that differs in one step is far from the reference.
TEST(DpEquivalence, DetectsADifferentRun) {
  const auto reference = train(nullptr, config(0, dp::Precision::f32, ""));
  DpRun run;
  model::Mlp mlp(model::MlpConfig{run.dims, run.activation, run.seed});
  auto dp = make_dp(nullptr, config(0, dp::Precision::f32, ""), mlp);
  train_steps(*dp, mlp, run, 1, kSteps);  // the batches shifted by one step
  EXPECT_GT(max_relative_diff(all_params(*dp), reference), 1e-3);
}

}  // namespace
}  // namespace hoop::test
