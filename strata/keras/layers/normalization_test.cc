#include "strata/keras/layers/normalization.h"

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

// Feature 0 holds 1, 3, 5, 7 (mean 4, biased variance 5); feature 1 is
// constant 2 (mean 2, variance 0).
Tensor batch() { return strata::constant({1.f, 2.f, 3.f, 2.f, 5.f, 2.f, 7.f, 2.f}, {4, 2}); }

std::shared_ptr<BatchNormalizationLayer> with_gamma_beta(
    const BatchNormalizationOptions& options = {}) {
  auto bn = BatchNormalization(options);
  bn->build({-1, 2});
  // gamma, beta, moving_mean, moving_variance (Keras's get_weights order).
  bn->set_weights({strata::constant({2.f, 1.f}), strata::constant({0.5f, -1.f}),
                   strata::constant({0.f, 0.f}), strata::constant({1.f, 1.f})});
  return bn;
}

TEST(BatchNormalizationTest, TrainingUsesBatchStatisticsAndUpdatesMovingAverages) {
  auto bn = with_gamma_beta();
  const std::vector<double> y = as_doubles((*bn)(batch(), /*training=*/true));
  const double s = std::sqrt(5.0 + 1e-3);
  const std::vector<double> want = {(1 - 4) / s * 2 + 0.5, -1, (3 - 4) / s * 2 + 0.5, -1,
                                    (5 - 4) / s * 2 + 0.5, -1, (7 - 4) / s * 2 + 0.5, -1};
  EXPECT_TRUE(all_close(y, want, 1e-5));
  // moving = moving * 0.99 + batch * 0.01
  EXPECT_TRUE(all_close(as_doubles(bn->moving_mean().value()), {0.04, 0.02}, 1e-6));
  EXPECT_TRUE(all_close(as_doubles(bn->moving_variance().value()), {1.04, 0.99}, 1e-6));
  // A second step moves them again from there.
  (*bn)(batch(), true);
  EXPECT_TRUE(all_close(as_doubles(bn->moving_mean().value()),
                        {0.04 * 0.99 + 0.04, 0.02 * 0.99 + 0.02}, 1e-6));
  EXPECT_TRUE(all_close(as_doubles(bn->moving_variance().value()),
                        {1.04 * 0.99 + 0.05, 0.99 * 0.99}, 1e-6));
}

TEST(BatchNormalizationTest, InferenceUsesTheMovingStatisticsAndLeavesThem) {
  auto bn = with_gamma_beta({.momentum = 0.5});
  const double s0 = std::sqrt(1.0 + 1e-3);
  EXPECT_TRUE(all_close(as_doubles((*bn)(batch())),
                        {1 / s0 * 2 + 0.5, 2 / s0 - 1, 3 / s0 * 2 + 0.5, 2 / s0 - 1,
                         5 / s0 * 2 + 0.5, 2 / s0 - 1, 7 / s0 * 2 + 0.5, 2 / s0 - 1},
                        1e-5));
  EXPECT_TRUE(all_close(as_doubles(bn->moving_mean().value()), {0, 0}));
  (*bn)(batch(), true);  // momentum 0.5: moving mean [2, 1], moving variance [3, 0.5]
  EXPECT_TRUE(all_close(as_doubles(bn->moving_mean().value()), {2, 1}, 1e-6));
  EXPECT_TRUE(all_close(as_doubles(bn->moving_variance().value()), {3, 0.5}, 1e-6));
  const double s1 = std::sqrt(3.0 + 1e-3), s2 = std::sqrt(0.5 + 1e-3);
  const std::vector<double> y = as_doubles((*bn)(batch(), false));
  EXPECT_NEAR(y[0], (1 - 2) / s1 * 2 + 0.5, 1e-5);
  EXPECT_NEAR(y[1], (2 - 1) / s2 - 1, 1e-5);
  EXPECT_NEAR(y[6], (7 - 2) / s1 * 2 + 0.5, 1e-5);
}

TEST(BatchNormalizationTest, FrozenLayerRunsInInferenceMode) {
  auto bn = with_gamma_beta();
  bn->set_trainable(false);
  const std::vector<double> inference = as_doubles((*bn)(batch(), false));
  EXPECT_EQ(as_doubles((*bn)(batch(), true)), inference);
  EXPECT_TRUE(all_close(as_doubles(bn->moving_mean().value()), {0, 0}));
}

TEST(BatchNormalizationTest, WeightsMatchKeras) {
  reset_uids_for_testing();
  auto bn = BatchNormalization();
  EXPECT_EQ(bn->name(), "batch_normalization");
  bn->build({-1, 8, 8, 64});
  EXPECT_EQ(bn->count_params(), 256);
  ASSERT_EQ(bn->trainable_weights().size(), 2u);
  ASSERT_EQ(bn->non_trainable_weights().size(), 2u);
  int64_t trainable = 0;
  for (const Variable& v : bn->trainable_weights()) trainable += v.shape().num_elements();
  EXPECT_EQ(trainable, 128);
  const std::vector<Variable> w = bn->weights();
  EXPECT_EQ(w[0].name(), "batch_normalization/gamma");
  EXPECT_EQ(w[1].name(), "batch_normalization/beta");
  EXPECT_EQ(w[2].name(), "batch_normalization/moving_mean");
  EXPECT_EQ(w[3].name(), "batch_normalization/moving_variance");
  for (int i = 2; i < 4; ++i) {
    EXPECT_EQ(w[i].synchronization(), VariableSynchronization::ON_READ);
    EXPECT_EQ(w[i].aggregation(), VariableAggregation::MEAN);
    EXPECT_FALSE(w[i].trainable());
  }
  EXPECT_EQ(as_doubles(w[0].value())[0], 1.0);  // gamma: ones
  EXPECT_EQ(as_doubles(w[3].value())[0], 1.0);  // moving variance: ones
  auto plain = BatchNormalization({.center = false, .scale = false});
  plain->build({-1, 5});
  EXPECT_EQ(plain->count_params(), 10);
  EXPECT_TRUE(plain->trainable_weights().empty());
  EXPECT_EQ(bn->compute_output_shape({-1, 8, 8, 64}), (TensorShape{-1, 8, 8, 64}));
}

TEST(BatchNormalizationTest, NormalisesAnyAxis) {
  // axis 1 of [2, 3, 2, 2] (channels first): statistics over axes 0, 2, 3.
  auto bn = BatchNormalization({.axis = 1, .epsilon = 0.0, .dtype = DType::float64});
  const Tensor x = strata::testing::random_uniform({2, 3, 2, 2}, -2, 2, 6);
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<double> y = as_doubles((*bn)(x, true));
  EXPECT_EQ(bn->moving_mean().shape(), (TensorShape{3}));
  for (int c = 0; c < 3; ++c) {
    double mean = 0, var = 0;
    std::vector<int> idx;
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 4; ++k) idx.push_back((n * 3 + c) * 4 + k);
    for (int i : idx) mean += xv[i] / 8;
    for (int i : idx) var += (xv[i] - mean) * (xv[i] - mean) / 8;
    for (int i : idx) EXPECT_NEAR(y[i], (xv[i] - mean) / std::sqrt(var), 1e-9) << "channel " << c;
  }
}

TEST(BatchNormalizationTest, GradientsMatchFiniteDifferences) {
  for (bool training : {true, false}) {
    SCOPED_TRACE(training);
    auto bn = BatchNormalization({.dtype = DType::float64});
    const Tensor x = strata::testing::random_uniform({5, 3}, -1, 1, 8);
    bn->build(x.shape());
    bn->set_weights({strata::testing::random_uniform({3}, 0.5, 1.5, 1),
                     strata::testing::random_uniform({3}, -1, 1, 2),
                     strata::testing::random_uniform({3}, -1, 1, 3),
                     strata::testing::random_uniform({3}, 0.5, 2, 4)});
    auto input_check = strata::testing::check_gradients(
        [&](const std::vector<Tensor>& in) { return (*bn)(in[0], training); }, {x});
    EXPECT_TRUE(input_check.ok) << input_check.message;
    auto weight_check = testing_util::check_weight_gradients(*bn, x, training);
    EXPECT_TRUE(weight_check.ok) << weight_check.message;
  }
}

TEST(BatchNormalizationTest, RejectsBadOptionsAndInputs) {
  EXPECT_THROW(BatchNormalization({.momentum = 1.5}), InvalidArgumentError);
  EXPECT_THROW(BatchNormalization({.epsilon = -1}), InvalidArgumentError);
  EXPECT_THROW(BatchNormalization({.axis = 2})->build({-1, 4}), InvalidArgumentError);
  EXPECT_THROW(BatchNormalization()->build({-1, -1}), InvalidArgumentError);
  auto bn = BatchNormalization({.name = "bn"});
  (*bn)(strata::ones({2, 4}));
  try {
    (*bn)(strata::ones({2, 5}));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("BatchNormalization 'bn'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2, 5]"), std::string::npos) << e.what();
  }
  EXPECT_THROW((*bn)(strata::ones({2, 3, 4})), InvalidArgumentError);  // built for rank 2
}

TEST(LayerNormalizationTest, NormalisesEachExampleOverTheLastAxis) {
  auto ln = LayerNormalization();
  const Tensor x = strata::constant({1.f, 2.f, 3.f, 2.f, 4.f, 6.f}, {2, 3});
  const double s1 = std::sqrt(2.0 / 3 + 1e-3), s2 = std::sqrt(8.0 / 3 + 1e-3);
  const std::vector<double> plain = {-1 / s1, 0, 1 / s1, -2 / s2, 0, 2 / s2};
  EXPECT_TRUE(all_close(as_doubles((*ln)(x)), plain, 1e-5));
  EXPECT_EQ(as_doubles((*ln)(x, /*training=*/true)), as_doubles((*ln)(x)));  // no batch statistics
  ln->set_weights({strata::constant({1.f, 2.f, 3.f}), strata::constant({0.f, 1.f, -1.f})});
  EXPECT_TRUE(
      all_close(as_doubles((*ln)(x)), {-1 / s1, 1, 3 / s1 - 1, -2 / s2, 1, 6 / s2 - 1}, 1e-5));
  EXPECT_EQ(ln->weights()[0].name(), ln->name() + "/gamma");
  EXPECT_EQ(ln->weights()[1].name(), ln->name() + "/beta");
}

TEST(LayerNormalizationTest, SeveralAxesShareOneMeanAndVariance) {
  reset_uids_for_testing();
  auto ln = LayerNormalization({.axis = {-2, -1}, .epsilon = 0.0, .dtype = DType::float64});
  EXPECT_EQ(ln->name(), "layer_normalization");
  const Tensor x = strata::testing::random_uniform({2, 3, 4}, -2, 2, 12);
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<double> y = as_doubles((*ln)(x));
  EXPECT_EQ(ln->gamma().shape(), (TensorShape{3, 4}));
  EXPECT_EQ(ln->count_params(), 24);
  for (int n = 0; n < 2; ++n) {
    double mean = 0, var = 0;
    for (int i = 0; i < 12; ++i) mean += xv[n * 12 + i] / 12;
    for (int i = 0; i < 12; ++i) var += (xv[n * 12 + i] - mean) * (xv[n * 12 + i] - mean) / 12;
    for (int i = 0; i < 12; ++i)
      EXPECT_NEAR(y[n * 12 + i], (xv[n * 12 + i] - mean) / std::sqrt(var), 1e-9);
  }
  EXPECT_EQ(ln->compute_output_shape({-1, 3, 4}), (TensorShape{-1, 3, 4}));
}

TEST(LayerNormalizationTest, GradientsMatchFiniteDifferences) {
  auto ln = LayerNormalization({.dtype = DType::float64});
  const Tensor x = strata::testing::random_uniform({3, 5}, -1, 1, 13);
  ln->build(x.shape());
  ln->set_weights({strata::testing::random_uniform({5}, 0.5, 1.5, 1),
                   strata::testing::random_uniform({5}, -1, 1, 2)});
  auto input_check = strata::testing::check_gradients(
      [&](const std::vector<Tensor>& in) { return (*ln)(in[0]); }, {x});
  EXPECT_TRUE(input_check.ok) << input_check.message;
  auto weight_check = testing_util::check_weight_gradients(*ln, x);
  EXPECT_TRUE(weight_check.ok) << weight_check.message;
}

TEST(LayerNormalizationTest, RejectsBadAxesAndInputs) {
  EXPECT_THROW(LayerNormalization({.axis = {}}), InvalidArgumentError);
  EXPECT_THROW(LayerNormalization({.epsilon = -1}), InvalidArgumentError);
  EXPECT_THROW(LayerNormalization({.axis = {0}})->build({-1, 4}),
               InvalidArgumentError);  // the batch axis
  EXPECT_THROW(LayerNormalization({.axis = {2}})->build({-1, 4}),
               InvalidArgumentError);  // out of range
  EXPECT_THROW(LayerNormalization({.axis = {1, -1}})->build({-1, 4}),
               InvalidArgumentError);  // duplicate
  EXPECT_THROW(LayerNormalization()->build({-1, -1}), InvalidArgumentError);
  auto ln = LayerNormalization({.name = "ln"});
  (*ln)(strata::ones({2, 4}));
  try {
    (*ln)(strata::ones({2, 5}));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("LayerNormalization 'ln'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2, 5]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::keras::layers
