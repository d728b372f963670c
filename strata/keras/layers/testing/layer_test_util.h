#pragma once
// Test helpers for the layer tests (not installed): a
// finite-difference check of a layer's gradients with respect to its weights,
// complementing strata::testing::check_gradients (which covers the inputs).
//
//   auto dense = layers::Dense(3, {.dtype = DType::float64});
//   Tensor x = strata::testing::random_uniform({2, 4}, -1, 1, 1);
//   auto r = check_weight_gradients(*dense, x);
//   EXPECT_TRUE(r.ok) << r.message;
//
// The objective is sum(layer(x) * w) with fixed pseudo-random w; each weight
// element is perturbed in place (assign) by +-delta and restored. Build the
// layer in float64 so that the differences are meaningful.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/str_cat.h"
#include "strata/keras/layer.h"
#include "strata/ops/math_ops.h"
#include "strata/testing/gradient_check.h"

namespace strata::keras::layers::testing_util {

inline strata::testing::GradientCheckResult check_weight_gradients(Layer& layer, const Tensor& x,
                                                                   bool training = false,
                                                                   double delta = 1e-6,
                                                                   double tolerance = 1e-5) {
  if (!layer.built()) layer(x, training);  // build first so the weights exist
  const Tensor w = strata::testing::random_uniform(layer(x, training).shape(), -1, 1, /*seed=*/11);
  auto objective = [&]() { return strata::reduce_sum(strata::multiply(layer(x, training), w)); };

  const std::vector<Variable> vars = layer.trainable_variables();
  std::vector<Tensor> analytic;
  {
    GradientTape tape;
    const Tensor loss = objective();
    analytic = tape.gradient(loss, vars);
  }
  strata::testing::GradientCheckResult result;
  for (size_t v = 0; v < vars.size(); ++v) {
    const Tensor original = vars[v].value();
    std::vector<double> values = original.to_vector<double>();
    const std::vector<double> grad = analytic[v].defined()
                                         ? analytic[v].to_vector<double>()
                                         : std::vector<double>(values.size(), 0.0);
    for (size_t i = 0; i < values.size(); ++i) {
      const double saved = values[i];
      values[i] = saved + delta;
      vars[v].assign(strata::constant(values, original.shape()));
      const double plus = objective().item<double>();
      values[i] = saved - delta;
      vars[v].assign(strata::constant(values, original.shape()));
      const double minus = objective().item<double>();
      values[i] = saved;
      const double numeric = (plus - minus) / (2 * delta);
      const double error = std::abs(grad[i] - numeric) / std::max(1.0, std::abs(numeric));
      result.max_error = std::max(result.max_error, error);
      if (error > tolerance) {
        result.ok = false;
        if (result.message.size() < 2000) {
          result.message += str_cat(vars[v].name(), " element ", i, ": analytic ", grad[i],
                                    ", numeric ", numeric, "\n");
        }
      }
    }
    vars[v].assign(original);
  }
  return result;
}

// Elementwise |a - b| <= tol, with a readable message.
inline ::testing::AssertionResult all_close(const std::vector<double>& actual,
                                            const std::vector<double>& expected,
                                            double tol = 1e-5) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << " != " << expected.size();
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    if (!(std::abs(actual[i] - expected[i]) <= tol)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << actual[i] << " != " << expected[i];
    }
  }
  return ::testing::AssertionSuccess();
}

inline std::vector<double> as_doubles(const Tensor& t) {
  return strata::cast(t, DType::float64).to_vector<double>();
}

}  // namespace strata::keras::layers::testing_util
