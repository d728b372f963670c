#include "strata/keras/layers/dense.h"

#include <cmath>

#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/keras/layers/testing/layer_test_util.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/testing/gradient_check.h"

namespace strata::keras::layers {
namespace {

using testing_util::all_close;
using testing_util::as_doubles;

TEST(DenseTest, ComputesXTimesKernelPlusBiasThenActivation) {
  auto linear = Dense(2);
  auto relu = Dense(2, {.activation = "relu"});
  const Tensor x = constant({1.f, 0.f, -1.f, 2.f, 1.f, 0.f}, {2, 3});
  const std::vector<Tensor> w = {constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {3, 2}),
                                 constant({0.5f, -0.5f}, {2})};
  linear->build(x.shape());
  relu->build(x.shape());
  linear->set_weights(w);
  relu->set_weights(w);
  // [1, 0, -1] . K = [-4, -4]; [2, 1, 0] . K = [5, 8]; plus the bias.
  EXPECT_TRUE(all_close(as_doubles((*linear)(x)), {-3.5, -4.5, 5.5, 7.5}));
  EXPECT_TRUE(all_close(as_doubles((*relu)(x)), {0, 0, 5.5, 7.5}));
  EXPECT_EQ((*linear)(x).shape(), (TensorShape{2, 2}));
}

TEST(DenseTest, AcceptsAFunctionAsActivation) {
  auto dense = Dense(1, {.activation = [](const Tensor& t) { return strata::square(t); },
                         .kernel_initializer = initializers::ones()});
  EXPECT_EQ(as_doubles((*dense)(constant({1.f, 2.f}, {1, 2}))), (std::vector<double>{9}));
}

TEST(DenseTest, ContractsTheLastAxisOfHigherRankInputs) {
  auto dense = Dense(2, {.kernel_initializer =
                             initializers::random_uniform({.minval = -1, .maxval = 1, .seed = 3}),
                         .bias_initializer = initializers::constant(0.25)});
  const Tensor x = testing::random_uniform({2, 3, 4}, -1, 1, 5);
  const Tensor y = (*dense)(strata::cast(x, DType::float32));
  ASSERT_EQ(y.shape(), (TensorShape{2, 3, 2}));
  // Naive tensordot.
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<double> kv = as_doubles(dense->kernel().value());
  std::vector<double> expected;
  for (int r = 0; r < 6; ++r) {
    for (int u = 0; u < 2; ++u) {
      double s = 0.25;
      for (int k = 0; k < 4; ++k) s += xv[r * 4 + k] * kv[k * 2 + u];
      expected.push_back(s);
    }
  }
  EXPECT_TRUE(all_close(as_doubles(y), expected, 1e-5));
  EXPECT_EQ(dense->compute_output_shape({-1, 3, 4}), (TensorShape{-1, 3, 2}));
}

TEST(DenseTest, ParameterCountsAndWeightNamesMatchKeras) {
  reset_uids_for_testing();
  auto dense = Dense(512);
  dense->build({-1, 784});
  EXPECT_EQ(dense->count_params(), 401920);
  ASSERT_EQ(dense->weights().size(), 2u);
  EXPECT_EQ(dense->weights()[0].name(), "dense/kernel");
  EXPECT_EQ(dense->weights()[1].name(), "dense/bias");
  EXPECT_EQ(dense->kernel().shape(), (TensorShape{784, 512}));
  auto no_bias = Dense(10, {.use_bias = false});
  EXPECT_EQ(no_bias->name(), "dense_1");
  no_bias->build({-1, 4});
  EXPECT_EQ(no_bias->count_params(), 40);
  EXPECT_EQ(no_bias->weights().size(), 1u);
  EXPECT_EQ(dense->compute_output_shape({-1, 784}), (TensorShape{-1, 512}));
}

TEST(DenseTest, DefaultInitializersAreGlorotUniformAndZeros) {
  auto dense = Dense(30);
  dense->build({-1, 20});
  const double limit = std::sqrt(6.0 / (20 + 30));
  double max_abs = 0;
  for (double k : as_doubles(dense->kernel().value())) max_abs = std::max(max_abs, std::abs(k));
  EXPECT_LE(max_abs, limit);
  EXPECT_GT(max_abs, 0.5 * limit);  // 600 draws: the largest is near the limit
  for (double b : as_doubles(dense->bias().value())) EXPECT_EQ(b, 0.0);
}

TEST(DenseTest, KeepsDeclaredInputShapeAndCastsInputs) {
  auto dense = Dense(2, {.input_shape = {5}});
  ASSERT_TRUE(dense->declared_input_shape().has_value());
  EXPECT_EQ(*dense->declared_input_shape(), (std::vector<int64_t>{5}));
  const Tensor y = (*dense)(strata::ones({3, 5}, DType::float64));
  EXPECT_EQ(y.dtype(), DType::float32);
}

TEST(DenseTest, GradientsMatchFiniteDifferences) {
  for (const char* activation : {"", "tanh", "sigmoid"}) {
    SCOPED_TRACE(activation);
    auto dense = Dense(3, {.activation = activation, .dtype = DType::float64});
    const Tensor x = testing::random_uniform({2, 4, 5}, -1, 1, 1);
    auto input_check = testing::check_gradients(
        [&](const std::vector<Tensor>& in) { return (*dense)(in[0]); }, {x});
    EXPECT_TRUE(input_check.ok) << input_check.message;
    auto weight_check = testing_util::check_weight_gradients(*dense, x);
    EXPECT_TRUE(weight_check.ok) << weight_check.message;
  }
}

TEST(DenseTest, RejectsBadArgumentsAndInputsNamingTheLayer) {
  EXPECT_THROW(Dense(0), InvalidArgumentError);
  try {
    Dense(2, {.activation = "relu_", .name = "head"});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Dense 'head'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("relu_"), std::string::npos) << e.what();
  }
  auto dense = Dense(2, {.name = "d"});
  try {
    (*dense)(strata::ones({4}));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Dense 'd'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dense->build({-1, -1}), InvalidArgumentError);  // the last dimension must be known
  (*dense)(strata::ones({1, 3}));
  EXPECT_THROW((*dense)(strata::ones({1, 4})), InvalidArgumentError);  // built for 3 features
  EXPECT_THROW(dense->compute_output_shape({-1, 4}), InvalidArgumentError);
}

}  // namespace
}  // namespace strata::keras::layers
