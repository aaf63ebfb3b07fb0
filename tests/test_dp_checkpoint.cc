// Sharded checkpoints: saved on 4 ranks (stage 2) at step 10 of a 20-step run, loaded on 2
// ranks (stage 3), 3 ranks (stage 1) and 4 ranks (stage 2) and continued to step 20: the
// same parameters as the uninterrupted run (bit for bit on the same rank count and stage).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hoop/error.h"
#include "support/dp_helpers.h"
#include "support/spawn.h"

namespace hoop::test {
namespace {

dp::DpConfig config(int stage) {
  dp::DpConfig c;
  c.stage = stage;
  c.optimizer.kind = dp::OptimizerKind::adam;
  c.optimizer.lr = 1e-2f;
  c.first_bucket_bytes = 256;
  c.bucket_bytes = 1024;
  return c;
}

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::vector<float> v(static_cast<size_t>(in.tellg()) / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

class DpCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("hoop-ckpt-" + unique_job_id());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(DpCheckpoint, SaveOnFourLoadOnTwoThreeFour) {
  const std::string ckpt = (dir_ / "ckpt").string();
  const std::string dir = dir_.string();
  // The uninterrupted run, saving at step 10.
  ASSERT_TRUE(all_ok(run_ranks(4, [&](RankContext& ctx) {
    DpRun run;
    model::Mlp mlp(model::MlpConfig{run.dims, run.activation, run.seed});
    auto dp = make_dp(ctx.make_comm(), config(2), mlp);
    train_steps(*dp, mlp, run, 0, 10);
    dp->save(ckpt);
    train_steps(*dp, mlp, run, 10, 10);
    const auto p = all_params(*dp);
    if (ctx.rank == 0) write_floats(dir + "/full.bin", p);
  })));
  ASSERT_TRUE(std::filesystem::exists(ckpt + "/manifest.json"));
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(std::filesystem::exists(ckpt + "/rank_" + std::to_string(r) + ".bin"));

  struct Resume {
    int ranks, stage;
  };
  for (Resume res : {Resume{2, 3}, Resume{3, 1}, Resume{4, 2}}) {
    ASSERT_TRUE(all_ok(run_ranks(res.ranks, [&](RankContext& ctx) {
      DpRun run;
      model::Mlp mlp(model::MlpConfig{run.dims, run.activation, run.seed});
      auto dp = make_dp(ctx.make_comm(), config(res.stage), mlp);
      dp->load(ckpt);
      EXPECT_EQ(dp->steps_done(), 10u);
      train_steps(*dp, mlp, run, dp->steps_done(), 10);
      const auto p = all_params(*dp);
      if (ctx.rank == 0) write_floats(dir + "/resumed" + std::to_string(res.ranks) + ".bin", p);
    })));
    const auto full = read_floats(dir + "/full.bin");
    const auto resumed = read_floats(dir + "/resumed" + std::to_string(res.ranks) + ".bin");
    ASSERT_EQ(full.size(), resumed.size());
    if (res.ranks == 4) {
      EXPECT_TRUE(bit_identical(resumed, full)) << "same ranks and stage: the same bits";
    } else {
      EXPECT_LE(max_relative_diff(resumed, full), 1e-5) << res.ranks << " ranks, stage " << res.stage;
    }
  }
}

TEST_F(DpCheckpoint, RefusesAnotherModel) {
  DpRun run;
  model::Mlp mlp(model::MlpConfig{run.dims, run.activation, run.seed});
  auto dp = make_dp(nullptr, config(0), mlp);
  train_steps(*dp, mlp, run, 0, 1);
  dp->save(dir_.string());
  model::Mlp other(model::MlpConfig{{16, 30, 5}, run.activation, run.seed});
  auto dp2 = make_dp(nullptr, config(0), other);
  EXPECT_THROW(dp2->load(dir_.string()), Error);
  // Another optimizer (SGD without momentum keeps no state) is refused too.
  dp::DpConfig sgd = config(0);
  sgd.optimizer.kind = dp::OptimizerKind::sgd;
  auto dp3 = make_dp(nullptr, sgd, mlp);
  EXPECT_THROW(dp3->load(dir_.string()), Error);
}

}  // namespace
}  // namespace hoop::test
