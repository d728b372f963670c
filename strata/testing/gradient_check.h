#pragma once
// A numerical gradient checker: compares GradientTape's gradients with
// central differences computed in float64.
//
//   auto f = [](const std::vector<strata::Tensor>& x) { return strata::exp(x[0]) * x[1]; };
//   strata::testing::GradientCheckResult r = strata::testing::check_gradients(
//       f, {strata::testing::random_uniform({2, 3}, -1, 1, /*seed=*/1),
//           strata::testing::random_uniform({3}, -1, 1, /*seed=*/2)});
//   EXPECT_TRUE(r.ok) << r.message;
//
// The function is evaluated on float64 inputs; the scalar objective is
// sum(f(x) * w) with fixed pseudo-random weights w (so every output element
// and its position matter). For each input element the numerical derivative
// is (F(x + h) - F(x - h)) / 2h. The analytic gradient comes from a
// GradientTape watching every input. Not thread-safe across calls that share
// `f`'s state; otherwise pure.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::testing {

struct GradientCheckOptions {
  double delta = 1e-6;      // central-difference step
  double tolerance = 1e-5;  // on |analytic - numeric| / max(1, |numeric|)
  uint64_t weight_seed = 7;
};

struct GradientCheckResult {
  bool ok = true;
  double max_error = 0.0;
  std::string message;  // the first mismatches, "input i element j: analytic a, numeric n"
};

using TensorFunction = std::function<Tensor(const std::vector<Tensor>&)>;

// Inputs are converted to float64 first. Every input is checked.
GradientCheckResult check_gradients(const TensorFunction& f, const std::vector<Tensor>& inputs,
                                    const GradientCheckOptions& options = {});

// A float64 tensor of `shape` with values uniform in [lo, hi) from a fixed
// seed (a simple counter-based generator, independent of strata's random ops).
Tensor random_uniform(const TensorShape& shape, double lo, double hi, uint64_t seed);

}  // namespace strata::testing
