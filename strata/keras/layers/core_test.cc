#include "strata/keras/layers/core.h"

#include <cmath>

#include <gtest/gtest.h>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/keras/layers/testing/layer_test_util.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/testing/gradient_check.h"

namespace strata::keras::layers {
namespace {

using testing_util::all_close;
using testing_util::as_doubles;

TEST(DropoutTest, IsTheIdentityWhenNotTraining) {
  auto drop = Dropout(0.5, {.seed = 1});
  const Tensor x = testing::random_uniform({4, 5}, 1, 2, 1);
  EXPECT_EQ(as_doubles((*drop)(x)), as_doubles(x));
  EXPECT_EQ(as_doubles((*drop)(x, /*training=*/false)), as_doubles(x));
  EXPECT_EQ(drop->compute_output_shape({-1, 5}), (TensorShape{-1, 5}));
  EXPECT_EQ(drop->count_params(), 0);
}

TEST(DropoutTest, TrainingZerosSomeAndScalesTheRestPreservingTheMean) {
  auto drop = Dropout(0.25, {.seed = 7});
  const Tensor x = strata::ones({100, 100});
  const std::vector<double> y = as_doubles((*drop)(x, /*training=*/true));
  int zeros = 0;
  double sum = 0;
  for (double v : y) {
    if (v == 0.0) {
      ++zeros;
    } else {
      EXPECT_NEAR(v, 1.0 / 0.75, 1e-6);
    }
    sum += v;
  }
  // 10000 Bernoulli(0.25) draws: 2500 expected, standard deviation ~43.
  EXPECT_GT(zeros, 2300);
  EXPECT_LT(zeros, 2700);
  EXPECT_NEAR(sum / y.size(), 1.0, 0.03);
}

TEST(DropoutTest, SeededLayersAreReproducibleButEachCallDrawsANewMask) {
  const Tensor x = strata::ones({8, 8});
  auto a = Dropout(0.5, {.seed = 3});
  auto b = Dropout(0.5, {.seed = 3});
  const std::vector<double> a1 = as_doubles((*a)(x, true));
  const std::vector<double> a2 = as_doubles((*a)(x, true));
  EXPECT_EQ(a1, as_doubles((*b)(x, true)));
  EXPECT_EQ(a2, as_doubles((*b)(x, true)));
  EXPECT_NE(a1, a2);
}

TEST(DropoutTest, NoiseShapeSharesTheMaskAlongBroadcastAxes) {
  auto drop = Dropout(0.5, {.noise_shape = {-1, 1}, .seed = 5});
  const std::vector<double> y = as_doubles((*drop)(strata::ones({16, 6}), true));
  for (int r = 0; r < 16; ++r) {
    for (int c = 1; c < 6; ++c) EXPECT_EQ(y[r * 6 + c], y[r * 6]) << "row " << r;
  }
  EXPECT_THROW((*drop)(strata::ones({2, 3, 4}), true), InvalidArgumentError);  // rank mismatch
  auto bad = Dropout(0.5, {.noise_shape = {2, 2}});
  EXPECT_THROW((*bad)(strata::ones({4, 4}), true), InvalidArgumentError);
}

TEST(DropoutTest, GradientIsTheMaskScaled) {
  auto drop = Dropout(0.5, {.seed = 9});
  const Tensor x = testing::random_uniform({6, 6}, 1, 2, 2);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = (*drop)(x, true);
  const Tensor g = tape.gradient(strata::reduce_sum(y), std::vector<Tensor>{x})[0];
  const std::vector<double> yv = as_doubles(y), xv = as_doubles(x), gv = as_doubles(g);
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_NEAR(gv[i], yv[i] / xv[i], 1e-12) << i;
}

TEST(DropoutTest, RejectsRatesOutsideZeroToOne) {
  EXPECT_THROW(Dropout(1.0), InvalidArgumentError);
  EXPECT_THROW(Dropout(-0.1), InvalidArgumentError);
  EXPECT_THROW(Dropout(0.5, {.noise_shape = {0}}), InvalidArgumentError);
  auto zero = Dropout(0.0);
  const Tensor x = strata::ones({2, 2});
  EXPECT_EQ(as_doubles((*zero)(x, true)), as_doubles(x));
}

TEST(ActivationTest, AppliesTheNamedFunction) {
  const Tensor x = strata::constant({-1.0, 0.0, 2.0, 1.0}, {2, 2});
  EXPECT_TRUE(all_close(as_doubles((*Activation("relu"))(x)), {0, 0, 2, 1}));
  const double e = std::exp(1.0);
  // softmax of [-1, 0] and [2, 1] along the last axis.
  EXPECT_TRUE(all_close(as_doubles((*Activation("softmax"))(x)),
                        {1 / (1 + e), e / (1 + e), e / (1 + e), 1 / (1 + e)}, 1e-12));
  auto act = Activation("tanh", {.name = "act"});
  EXPECT_EQ(act->name(), "act");
  EXPECT_EQ(act->activation(), "tanh");
  EXPECT_EQ(act->compute_output_shape({-1, 3}), (TensorShape{-1, 3}));
  auto r = testing::check_gradients([&](const std::vector<Tensor>& in) { return (*act)(in[0]); },
                                    {testing::random_uniform({3, 4}, -2, 2, 8)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(ActivationTest, AcceptsAFunction) {
  auto act = Activation([](const Tensor& t) { return t * 3.0; });
  EXPECT_EQ(act->activation(), "");
  EXPECT_EQ(as_doubles((*act)(strata::constant({1.0, -2.0}, {1, 2}))),
            (std::vector<double>{3, -6}));
}

TEST(ActivationTest, UnknownNameNamesTheLayer) {
  try {
    Activation("sofmax", {.name = "out"});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Activation 'out'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sofmax"), std::string::npos) << e.what();
  }
}

TEST(RescalingTest, ScalesAndOffsetsInTheLayerDtype) {
  auto rescale = Rescaling(1.0 / 255);
  const Tensor pixels = strata::constant<uint8_t>({0, 51, 255}, {1, 3});
  const Tensor y = (*rescale)(pixels);
  EXPECT_EQ(y.dtype(), DType::float32);
  EXPECT_TRUE(all_close(as_doubles(y), {0, 0.2, 1}, 1e-6));
  auto centred = Rescaling(2.0, {.offset = -1.0});
  EXPECT_TRUE(all_close(as_doubles((*centred)(strata::constant({0.f, 0.5f, 1.f}, {1, 3}))),
                        {-1, 0, 1}, 1e-6));
  EXPECT_EQ(centred->compute_output_shape({-1, 28, 28, 1}), (TensorShape{-1, 28, 28, 1}));
}

TEST(CoreLayersTest, DefaultNamesAreUniquePerClass) {
  reset_uids_for_testing();
  EXPECT_EQ(Dropout(0.1)->name(), "dropout");
  EXPECT_EQ(Dropout(0.1)->name(), "dropout_1");
  EXPECT_EQ(Activation("relu")->name(), "activation");
  EXPECT_EQ(Activation("relu")->name(), "activation_1");
}

}  // namespace
}  // namespace strata::keras::layers
