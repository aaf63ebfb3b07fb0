// The MLP's hand-written backward against finite differences, the digits data set, batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "support/dp_helpers.h"

namespace hoop::test {
namespace {

// One SGD step with lr 1 on a process without communicator turns parameters p into p - g:
// the gradients the model handed over, read back as a difference.
TEST(ModelMlp, BackwardMatchesFiniteDifferences) {
  for (model::Activation act : {model::Activation::gelu, model::Activation::relu}) {
    model::Mlp mlp(model::MlpConfig{{5, 7, 6, 3}, act, 11});
    dp::DpConfig cfg;
    cfg.optimizer.kind = dp::OptimizerKind::sgd;
    cfg.optimizer.lr = 1.0f;
    const auto& data = dp_test_data();
    std::vector<float> x(4 * 5);
    for (size_t i = 0; i < x.size(); ++i) x[i] = data.x[i] * 0.5f;
    std::vector<int> y{0, 2, 1, 2};

    auto dp = make_dp(nullptr, cfg, mlp);
    const auto before = all_params(*dp);
    mlp.train_batch(*dp, x.data(), y.data(), 4, 1.0f);
    dp->step();
    const auto after = all_params(*dp);

    // Finite differences of the loss sum, in double around each parameter (a fresh engine per
    // probe, parameters set through a checkpoint-free path: register with changed values).
    auto loss_at = [&](const std::vector<float>& params) {
      dp::DataParallel probe(nullptr, dp::DpConfig{});
      size_t off = 0;
      for (int l = 0; l < mlp.num_layers(); ++l) {
        const int in = mlp.config().dims[static_cast<size_t>(l)];
        const int out = mlp.config().dims[static_cast<size_t>(l) + 1];
        const size_t nw = static_cast<size_t>(in * out), nb = static_cast<size_t>(out);
        probe.register_param("w", nw, l, params.data() + off);
        probe.register_param("b", nb, l, params.data() + off + nw);
        off += nw + nb;
      }
      probe.finalize();
      return mlp.evaluate(probe, x.data(), y.data(), 4).loss_sum;
    };
    int checked = 0, kinks = 0;
    for (size_t i = 0; i < before.size(); i += 3) {
      const double analytic = static_cast<double>(before[i]) - after[i];
      // GELU is smooth: a wide step; ReLU: a narrow one, and a probe that straddles a kink
      // (one-sided slopes disagree) says nothing.
      const float h = act == model::Activation::gelu ? 1e-2f : 1e-3f;
      auto plus = before, minus = before;
      plus[i] += h;
      minus[i] -= h;
      const double f0 = loss_at(before), fp = loss_at(plus), fm = loss_at(minus);
      const double numeric = (fp - fm) / (2.0 * h);
      if (act == model::Activation::relu && std::fabs((fp - f0) - (f0 - fm)) > 1e-4) {
        ++kinks;
        continue;
      }
      EXPECT_NEAR(analytic, numeric, 2e-3 + 2e-2 * std::fabs(numeric))
          << (act == model::Activation::gelu ? "gelu" : "relu") << " parameter " << i;
      ++checked;
    }
    EXPECT_LE(kinks, checked / 4);
    EXPECT_GT(checked, static_cast<int>(before.size() / 3 / 2));
  }
}

TEST(ModelData, DigitsFromSklearn) {
  const auto path = model::find_digits_file();
  if (!path) GTEST_SKIP() << "python3-sklearn's digits.csv.gz is not installed";
  const model::Dataset d = model::load_digits(*path);
  EXPECT_EQ(d.size(), 1797u);
  EXPECT_EQ(d.features, 64);
  EXPECT_EQ(*std::max_element(d.x.begin(), d.x.end()), 1.0f);
  EXPECT_EQ(*std::min_element(d.x.begin(), d.x.end()), 0.0f);
  std::vector<int> per_class(10, 0);
  for (int y : d.y) ++per_class[static_cast<size_t>(y)];
  for (int c : per_class) EXPECT_GT(c, 170);
  // The first image is a 0 (sklearn's digits.images[0]).
  EXPECT_EQ(d.y[0], 0);
  EXPECT_FLOAT_EQ(d.x[2], 5.0f / 16.0f);
}

TEST(ModelData, MissingFileIsAnError) {
  EXPECT_THROW(model::load_digits("/nonexistent/digits.csv.gz"), Error);
}

TEST(ModelData, RankSharesCoverTheGlobalBatch) {
  const auto batch = model::global_batch(100, 14, 7, 5);
  EXPECT_EQ(batch, model::global_batch(100, 14, 7, 5));
  EXPECT_NE(batch, model::global_batch(100, 14, 8, 5));
  for (int n = 1; n <= 4; ++n) {
    std::vector<int> joined;
    for (int r = 0; r < n; ++r) {
      const auto s = model::rank_share(batch, r, n);
      joined.insert(joined.end(), s.begin(), s.end());
    }
    EXPECT_EQ(joined, batch) << n << " ranks";
  }
  // An epoch visits every row once.
  std::set<int> rows;
  for (uint64_t s = 0; s < 10; ++s) {
    for (int r : model::global_batch(100, 10, s, 5)) rows.insert(r);
  }
  EXPECT_EQ(rows.size(), 100u);
}

TEST(ModelMlp, LearnsTheDigits) {
  const auto path = model::find_digits_file();
  if (!path) GTEST_SKIP() << "python3-sklearn's digits.csv.gz is not installed";
  const auto [train, test] = model::split(model::load_digits(*path), 0.15, 1);
  model::Mlp mlp(model::MlpConfig{{64, 64, 10}, model::Activation::relu, 1});
  dp::DpConfig cfg;
  cfg.optimizer.lr = 3e-3f;
  auto dp = make_dp(nullptr, cfg, mlp);
  std::vector<float> x;
  std::vector<int> y;
  for (uint64_t s = 0; s < 200; ++s) {
    model::gather_rows(train, model::global_batch(train.size(), 64, s, 1), x, y);
    mlp.train_batch(*dp, x.data(), y.data(), 64, 1.0f / 64);
    dp->step();
  }
  std::vector<int> all(test.size());
  std::iota(all.begin(), all.end(), 0);
  model::gather_rows(test, all, x, y);
  const auto r = mlp.evaluate(*dp, x.data(), y.data(), static_cast<int>(all.size()));
  EXPECT_GT(static_cast<double>(r.correct) / r.count, 0.9);
}

}  // namespace
}  // namespace hoop::test
