// Misuse of the data-parallel engine is refused with hoop::Error{invalid_argument}.
#include <gtest/gtest.h>

#include <vector>

#include "hoop/error.h"
#include "support/dp_helpers.h"

namespace hoop::test {
namespace {

ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::internal;  // nothing thrown
}

TEST(DpErrors, RefusesMisuse) {
  dp::DpConfig bad;
  bad.stage = 4;
  EXPECT_EQ(code_of([&] { dp::DataParallel d(nullptr, bad); }), ErrorCode::invalid_argument);

  dp::DataParallel empty(nullptr, dp::DpConfig{});
  EXPECT_EQ(code_of([&] { empty.finalize(); }), ErrorCode::invalid_argument);
  std::vector<float> v(4, 1.0f);
  EXPECT_EQ(code_of([&] { empty.register_param("x", 4, 1, v.data()); }),
            ErrorCode::invalid_argument);  // layer 1 before layer 0

  model::Mlp mlp(model::MlpConfig{{4, 3, 2}, model::Activation::relu, 1});
  auto dp = make_dp(nullptr, dp::DpConfig{}, mlp);
  EXPECT_EQ(code_of([&] { dp->register_param("late", 4, 1, v.data()); }),
            ErrorCode::invalid_argument);
  std::vector<float> grads(3 * 4 + 3, 0.0f);
  dp->layer_grads(1, grads.data());
  EXPECT_EQ(code_of([&] { dp->layer_grads(1, grads.data()); }), ErrorCode::invalid_argument);
  // Layer 0's gradients are missing.
  EXPECT_EQ(code_of([&] { dp->step(); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { dp->layer_params(2, dp::Phase::forward); }), ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace hoop::test
