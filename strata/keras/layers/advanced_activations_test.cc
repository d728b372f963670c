#include "strata/keras/layers/advanced_activations.h"

#include <cmath>

#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/keras/layers/testing/layer_test_util.h"
#include "strata/ops/array_ops.h"
#include "strata/testing/gradient_check.h"

namespace strata::keras::layers {
namespace {

using testing_util::all_close;
using testing_util::as_doubles;

Tensor values() { return strata::constant({-2.f, -0.5f, 0.f, 1.f, 7.f}, {1, 5}); }

TEST(AdvancedActivationsTest, ReluLeakyReluAndEluFollowKerasDefaults) {
  reset_uids_for_testing();
  auto relu = ReLU();
  EXPECT_EQ(relu->name(), "re_lu");
  EXPECT_EQ(as_doubles((*relu)(values())), (std::vector<double>{0, 0, 0, 1, 7}));
  auto capped = ReLU({.max_value = 6.0, .negative_slope = 0.1, .threshold = 0.5});
  EXPECT_TRUE(all_close(as_doubles((*capped)(values())), {-0.25, -0.1, -0.05, 1, 6}, 1e-6));
  auto leaky = LeakyReLU();
  EXPECT_EQ(leaky->name(), "leaky_re_lu");
  EXPECT_DOUBLE_EQ(leaky->alpha(), 0.3);
  EXPECT_TRUE(all_close(as_doubles((*leaky)(values())), {-0.6, -0.15, 0, 1, 7}, 1e-6));
  auto elu = ELU({.alpha = 2.0});
  EXPECT_TRUE(all_close(as_doubles((*elu)(values())),
                        {2 * (std::exp(-2.0) - 1), 2 * (std::exp(-0.5) - 1), 0, 1, 7}, 1e-6));
  EXPECT_DOUBLE_EQ(ELU()->alpha(), 1.0);
  EXPECT_THROW(ReLU({.max_value = -1.0}), InvalidArgumentError);
  EXPECT_THROW(ReLU({.negative_slope = -0.1}), InvalidArgumentError);
  EXPECT_THROW(LeakyReLU({.alpha = -1.0}), InvalidArgumentError);
}

TEST(AdvancedActivationsTest, SoftmaxUsesTheGivenAxis) {
  auto soft = Softmax({.axis = 0});
  const Tensor x = strata::constant({0.0, 1.0, 0.0, 3.0}, {2, 2});
  const std::vector<double> y = as_doubles((*soft)(x));
  EXPECT_NEAR(y[0], 0.5, 1e-12);
  EXPECT_NEAR(y[1], 1 / (1 + std::exp(2.0)), 1e-12);
  EXPECT_NEAR(y[3], std::exp(2.0) / (1 + std::exp(2.0)), 1e-12);
  EXPECT_THROW((*Softmax({.axis = 2}))(x), InvalidArgumentError);
}

TEST(AdvancedActivationsTest, PReluLearnsOneAlphaPerUnsharedPosition) {
  reset_uids_for_testing();
  auto prelu = PReLU({.alpha_initializer = initializers::constant(0.25), .shared_axes = {1, 2}});
  EXPECT_EQ(prelu->name(), "p_re_lu");
  const Tensor x = strata::constant({-4.f, 2.f, -1.f, -8.f, 3.f, 1.f, -2.f, 5.f}, {1, 2, 2, 2});
  const std::vector<double> y = as_doubles((*prelu)(x));
  EXPECT_EQ(prelu->alpha().shape(), (TensorShape{1, 1, 2}));
  EXPECT_EQ(prelu->count_params(), 2);
  EXPECT_TRUE(all_close(y, {-1, 2, -0.25, -2, 3, 1, -0.5, 5}, 1e-6));
  EXPECT_THROW((*prelu)(strata::ones({1, 2, 2, 3})), InvalidArgumentError);  // built for 2 channels
  auto full = PReLU({.dtype = DType::float64});
  const Tensor xs = strata::testing::random_uniform({3, 4}, -1, 1, 14);
  (*full)(xs);
  EXPECT_EQ(full->alpha().shape(), (TensorShape{4}));
  full->set_weights({strata::testing::random_uniform({4}, 0, 1, 15)});
  auto input_check = strata::testing::check_gradients(
      [&](const std::vector<Tensor>& in) { return (*full)(in[0]); }, {xs});
  EXPECT_TRUE(input_check.ok) << input_check.message;
  auto weight_check = testing_util::check_weight_gradients(*full, xs);
  EXPECT_TRUE(weight_check.ok) << weight_check.message;
  EXPECT_THROW(PReLU({.shared_axes = {0}})->build({-1, 4}), InvalidArgumentError);
}

}  // namespace
}  // namespace strata::keras::layers
