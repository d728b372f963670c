#include "strata/keras/initializers.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "strata/base/errors.h"

namespace strata::keras {
namespace {

double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / double(v.size());
}
double variance_of(const std::vector<float>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return s / double(v.size());
}

TEST(ComputeFans, ConvKernelFansAreReceptiveFieldTimesChannels) {
  auto [fan_in, fan_out] = initializers::compute_fans(TensorShape{3, 3, 2, 32});
  EXPECT_EQ(fan_in, 18.0);    // 3*3*2
  EXPECT_EQ(fan_out, 288.0);  // 3*3*32
}

TEST(ComputeFans, MatrixAndVectorAndScalarFollowKeras) {
  EXPECT_EQ(initializers::compute_fans(TensorShape{5, 2}), std::make_pair(5.0, 2.0));
  EXPECT_EQ(initializers::compute_fans(TensorShape{7}), std::make_pair(7.0, 7.0));
  EXPECT_EQ(initializers::compute_fans(TensorShape{}), std::make_pair(1.0, 1.0));
}

TEST(GlorotUniform, StaysWithinTheKerasLimitAndHasItsVariance) {
  // limit = sqrt(6 / (100 + 200)) = 0.141421...; uniform variance = limit^2 / 3 = 1/150.
  Tensor w = initializers::glorot_uniform({.seed = 3})(TensorShape{100, 200}, DType::float32);
  ASSERT_EQ(w.shape(), (TensorShape{100, 200}));
  auto v = w.to_vector<float>();
  const double limit = std::sqrt(6.0 / 300.0);
  for (float x : v) ASSERT_LE(std::abs(x), limit);
  EXPECT_NEAR(variance_of(v), 1.0 / 150.0, 0.05 / 150.0);
  EXPECT_NEAR(mean_of(v), 0.0, 0.005);
}

TEST(GlorotUniform, SameSeedGivesSameValuesAndOtherSeedDiffers) {
  auto a = initializers::glorot_uniform({.seed = 1})(TensorShape{4, 4}, DType::float32)
               .to_vector<float>();
  auto b = initializers::glorot_uniform({.seed = 1})(TensorShape{4, 4}, DType::float32)
               .to_vector<float>();
  auto c = initializers::glorot_uniform({.seed = 2})(TensorShape{4, 4}, DType::float32)
               .to_vector<float>();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(HeUniform, StaysWithinSqrtSixOverFanIn) {
  auto v = initializers::he_uniform({.seed = 5})(TensorShape{3, 3, 4, 8}, DType::float32)
               .to_vector<float>();
  const double limit = std::sqrt(6.0 / 36.0);  // fan_in = 3*3*4
  for (float x : v) ASSERT_LE(std::abs(x), limit);
}

TEST(HeNormal, TruncatesAtTwoStddevsOfTheCorrectedScale) {
  // stddev = sqrt(2 / 50) / 0.87962566103423978 = 0.227369...; values within 2 stddev;
  // the truncated distribution's variance is then 2 / fan_in = 0.04.
  auto v =
      initializers::he_normal({.seed = 9})(TensorShape{50, 400}, DType::float32).to_vector<float>();
  const double stddev = std::sqrt(2.0 / 50.0) / 0.87962566103423978;
  for (float x : v) ASSERT_LE(std::abs(x), 2 * stddev + 1e-6);
  EXPECT_NEAR(variance_of(v), 0.04, 0.002);
}

TEST(RandomNormal, DefaultsToStddevPointZeroFive) {
  auto v = initializers::random_normal({.seed = 11})(TensorShape{20000}, DType::float32)
               .to_vector<float>();
  EXPECT_NEAR(std::sqrt(variance_of(v)), 0.05, 0.002);
  EXPECT_NEAR(mean_of(v), 0.0, 0.002);
}

TEST(TruncatedNormal, NeverExceedsTwoStddevs) {
  auto v = initializers::truncated_normal({.mean = 1.0, .stddev = 0.5, .seed = 4})(
               TensorShape{5000}, DType::float32)
               .to_vector<float>();
  for (float x : v) ASSERT_LE(std::abs(x - 1.0), 1.0 + 1e-6);
}

TEST(ConstantInitializers, FillWithTheirValueInTheRequestedDtype) {
  EXPECT_EQ(initializers::zeros()(TensorShape{2, 2}, DType::float32).to_vector<float>(),
            std::vector<float>(4, 0.f));
  EXPECT_EQ(initializers::ones()(TensorShape{3}, DType::float64).to_vector<double>(),
            std::vector<double>(3, 1.0));
  EXPECT_EQ(initializers::constant(2.5)(TensorShape{2}, DType::float32).to_vector<float>(),
            std::vector<float>(2, 2.5f));
}

TEST(GlorotUniform, RejectsAnIntegerDtype) {
  EXPECT_THROW(initializers::glorot_uniform()(TensorShape{2, 2}, DType::int32),
               InvalidArgumentError);
}

}  // namespace
}  // namespace strata::keras
