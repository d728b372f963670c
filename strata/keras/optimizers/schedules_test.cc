#include "strata/keras/optimizers/schedules.h"

#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

#include "strata/base/errors.h"

namespace strata::keras {
namespace {

namespace sch = keras::optimizers::schedules;

TEST(ExponentialDecay, ContinuousAndStaircase) {
  auto smooth =
      sch::ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5});
  EXPECT_DOUBLE_EQ((*smooth)(0), 0.1);
  EXPECT_DOUBLE_EQ((*smooth)(10), 0.05);
  EXPECT_DOUBLE_EQ((*smooth)(5), 0.1 * std::sqrt(0.5));
  EXPECT_DOUBLE_EQ((*smooth)(25), 0.1 * std::pow(0.5, 2.5));
  auto stairs = sch::ExponentialDecay(
      {.initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5, .staircase = true});
  EXPECT_DOUBLE_EQ((*stairs)(9), 0.1);
  EXPECT_DOUBLE_EQ((*stairs)(10), 0.05);
  EXPECT_DOUBLE_EQ((*stairs)(19), 0.05);
  EXPECT_DOUBLE_EQ((*stairs)(25), 0.025);
  EXPECT_THROW(
      sch::ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 0, .decay_rate = 0.5}),
      InvalidArgumentError);
}

TEST(PiecewiseConstantDecay, BoundariesBelongToTheEarlierInterval) {
  // Keras's docstring: 1.0 for steps <= 100000, 0.5 up to 110000, then 0.1.
  auto pw = sch::PiecewiseConstantDecay({100000, 110000}, {1.0, 0.5, 0.1});
  EXPECT_EQ((*pw)(0), 1.0);
  EXPECT_EQ((*pw)(100000), 1.0);
  EXPECT_EQ((*pw)(100001), 0.5);
  EXPECT_EQ((*pw)(110000), 0.5);
  EXPECT_EQ((*pw)(110001), 0.1);
  EXPECT_EQ(pw->values().size(), 3u);
}

TEST(PiecewiseConstantDecay, InvalidListsAreErrors) {
  EXPECT_THROW(sch::PiecewiseConstantDecay({1, 2}, {1.0, 0.5}), InvalidArgumentError);
  EXPECT_THROW(sch::PiecewiseConstantDecay({2, 2}, {1.0, 0.5, 0.1}), InvalidArgumentError);
}

TEST(CosineDecay, DecaysToAlphaAndStays) {
  auto cos = sch::CosineDecay({.initial_learning_rate = 0.2, .decay_steps = 100, .alpha = 0.1});
  EXPECT_DOUBLE_EQ((*cos)(0), 0.2);
  // halfway: cosine part 0.5 -> 0.2 * (0.9 * 0.5 + 0.1)
  EXPECT_NEAR((*cos)(50), 0.2 * 0.55, 1e-15);
  EXPECT_NEAR((*cos)(25), 0.2 * (0.9 * 0.5 * (1 + std::cos(std::numbers::pi / 4)) + 0.1), 1e-15);
  EXPECT_NEAR((*cos)(100), 0.02, 1e-15);
  EXPECT_NEAR((*cos)(1000), 0.02, 1e-15);
}

TEST(CosineDecay, LinearWarmupThenDecayFromTheTarget) {
  auto cos = sch::CosineDecay(
      {.initial_learning_rate = 0.0, .decay_steps = 10, .warmup_target = 1.0, .warmup_steps = 4});
  EXPECT_DOUBLE_EQ((*cos)(0), 0.0);
  EXPECT_DOUBLE_EQ((*cos)(1), 0.25);
  EXPECT_DOUBLE_EQ((*cos)(3), 0.75);
  EXPECT_DOUBLE_EQ((*cos)(4), 1.0);    // decay starts at the target
  EXPECT_NEAR((*cos)(9), 0.5, 1e-15);  // 5 of 10 decay steps
  EXPECT_NEAR((*cos)(14), 0.0, 1e-15);
  EXPECT_NEAR((*cos)(100), 0.0, 1e-15);
  EXPECT_THROW(
      sch::CosineDecay({.initial_learning_rate = 0.1, .decay_steps = 10, .warmup_steps = -1}),
      InvalidArgumentError);
}

}  // namespace
}  // namespace strata::keras

namespace strata::keras {
namespace {

TEST(PolynomialDecay, LinearByDefaultAndHoldsTheEndRate) {
  auto poly = sch::PolynomialDecay(
      {.initial_learning_rate = 0.1, .decay_steps = 10, .end_learning_rate = 0.01});
  EXPECT_DOUBLE_EQ((*poly)(0), 0.1);
  EXPECT_NEAR((*poly)(5), 0.055, 1e-15);
  EXPECT_NEAR((*poly)(10), 0.01, 1e-15);
  EXPECT_NEAR((*poly)(50), 0.01, 1e-15);
  auto sqrt_decay = sch::PolynomialDecay(
      {.initial_learning_rate = 1.0, .decay_steps = 4, .end_learning_rate = 0.0, .power = 0.5});
  EXPECT_NEAR((*sqrt_decay)(3), 0.5, 1e-15);  // sqrt(1 - 3/4)
}

TEST(PolynomialDecay, CycleRestartsOverGrowingMultiplesOfDecaySteps) {
  auto poly = sch::PolynomialDecay(
      {.initial_learning_rate = 1.0, .decay_steps = 10, .end_learning_rate = 0.0, .cycle = true});
  EXPECT_DOUBLE_EQ((*poly)(0), 1.0);
  EXPECT_NEAR((*poly)(10), 0.0, 1e-15);   // ceil(1) = 1: 1 - 10/10
  EXPECT_NEAR((*poly)(15), 0.25, 1e-15);  // ceil(1.5) = 2: 1 - 15/20
  EXPECT_NEAR((*poly)(25), 1.0 - 25.0 / 30.0, 1e-15);
}

TEST(InverseTimeDecay, ContinuousAndStaircase) {
  auto inv =
      sch::InverseTimeDecay({.initial_learning_rate = 0.1, .decay_steps = 1.0, .decay_rate = 0.5});
  EXPECT_DOUBLE_EQ((*inv)(0), 0.1);
  EXPECT_DOUBLE_EQ((*inv)(2), 0.05);
  auto stairs = sch::InverseTimeDecay(
      {.initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 1.0, .staircase = true});
  EXPECT_DOUBLE_EQ((*stairs)(9), 0.1);
  EXPECT_DOUBLE_EQ((*stairs)(10), 0.05);
  EXPECT_THROW(
      sch::InverseTimeDecay({.initial_learning_rate = 0.1, .decay_steps = -1, .decay_rate = 1}),
      InvalidArgumentError);
}

}  // namespace
}  // namespace strata::keras
