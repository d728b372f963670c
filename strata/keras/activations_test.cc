#include "strata/keras/activations.h"

#include <cmath>

#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/ops/math_ops.h"
#include "strata/testing/gradient_check.h"

namespace strata::keras::activations {
namespace {

std::vector<double> apply_to(const ActivationFunction& f, const std::vector<double>& x) {
  return strata::cast(f(strata::constant(x, {1, static_cast<int64_t>(x.size())})), DType::float64)
      .to_vector<double>();
}

double sigm(double x) { return 1 / (1 + std::exp(-x)); }
double softplus_ref(double x) { return std::log1p(std::exp(x)); }

// The textbook formula of each named activation, evaluated in double.
double reference(const std::string& name, double x) {
  if (name == "linear") return x;
  if (name == "relu") return std::max(x, 0.0);
  if (name == "sigmoid") return sigm(x);
  if (name == "tanh") return std::tanh(x);
  if (name == "elu") return x > 0 ? x : std::exp(x) - 1;
  if (name == "selu") return 1.05070098 * (x > 0 ? x : 1.67326324 * (std::exp(x) - 1));
  if (name == "softplus") return softplus_ref(x);
  if (name == "softsign") return x / (std::abs(x) + 1);
  if (name == "swish" || name == "silu") return x * sigm(x);
  if (name == "gelu") return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  if (name == "exponential") return std::exp(x);
  if (name == "hard_sigmoid") return std::clamp(0.2 * x + 0.5, 0.0, 1.0);
  if (name == "mish") return x * std::tanh(softplus_ref(x));
  if (name == "relu6") return std::clamp(x, 0.0, 6.0);
  if (name == "leaky_relu") return x > 0 ? x : 0.2 * x;
  ADD_FAILURE() << "no reference for " << name;
  return 0;
}

TEST(ActivationsTest, ElementwiseFunctionsMatchTheirFormulas) {
  const std::vector<double> x = {-7.0, -3.1, -1.0, -0.3, 0.2, 0.9, 2.5, 4.0, 8.0};
  for (const std::string& name : activation_names()) {
    if (name == "softmax" || name == "log_softmax") continue;
    SCOPED_TRACE(name);
    const std::vector<double> y = apply_to(get(name), x);
    ASSERT_EQ(y.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = reference(name, x[i]);
      EXPECT_NEAR(y[i], want, 1e-6 * std::max(1.0, std::abs(want))) << "x = " << x[i];
    }
  }
}

TEST(ActivationsTest, SoftmaxNormalisesTheLastAxis) {
  const Tensor x = strata::constant({1.0, 2.0, 3.0, 0.0, 0.0, 0.0}, {2, 3});
  const std::vector<double> y = activations::softmax(x).to_vector<double>();
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(y[0], std::exp(1.0) / z, 1e-12);
  EXPECT_NEAR(y[2], std::exp(3.0) / z, 1e-12);
  EXPECT_NEAR(y[4], 1.0 / 3, 1e-12);
  const std::vector<double> l = activations::log_softmax(x).to_vector<double>();
  EXPECT_NEAR(l[1], 2.0 - std::log(z), 1e-12);
  // tf.keras refuses a 1-D softmax.
  EXPECT_THROW(activations::softmax(strata::constant({1.0, 2.0})), InvalidArgumentError);
}

TEST(ActivationsTest, ReluOptionsFollowKeras) {
  const Tensor x = strata::constant({-1.0, 0.5, 1.0, 2.0, 5.0}, {5});
  const std::vector<double> y =
      activations::relu(x, {.alpha = 0.1, .max_value = 3.0, .threshold = 1.0}).to_vector<double>();
  const std::vector<double> want = {-0.2, -0.05, 0.0, 2.0, 3.0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-12) << i;
  EXPECT_EQ(activations::relu(x, {.max_value = 6.0}).to_vector<double>(),
            (std::vector<double>{0, 0.5, 1, 2, 5}));
  EXPECT_EQ(activations::relu(x, {.max_value = 1.5}).to_vector<double>(),
            (std::vector<double>{0, 0.5, 1, 1.5, 1.5}));
  const std::vector<double> leaky = activations::relu(x, {.alpha = 0.5}).to_vector<double>();
  EXPECT_DOUBLE_EQ(leaky[0], -0.5);
  EXPECT_NEAR(activations::elu(x, 2.0).to_vector<double>()[0], 2.0 * (std::exp(-1.0) - 1), 1e-12);
}

TEST(ActivationsTest, GeluApproximateUsesTheTanhForm) {
  const double x = 0.7;
  const double want = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  EXPECT_NEAR(activations::gelu(strata::constant(x), true).item<double>(), want, 1e-12);
}

TEST(ActivationsTest, GradientsMatchFiniteDifferences) {
  for (const std::string& name : activation_names()) {
    SCOPED_TRACE(name);
    const ActivationFunction f = get(name);
    auto r = testing::check_gradients([&](const std::vector<Tensor>& in) { return f(in[0]); },
                                      {testing::random_uniform({3, 4}, -3, 3, 17)});
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST(ActivationsTest, UnknownNamesAreRejectedWithTheKnownList) {
  EXPECT_EQ(apply_to(get(""), {1.5, -2.0}), (std::vector<double>{1.5, -2.0}));
  try {
    get("Relu");
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("\"Relu\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sigmoid"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::keras::activations
