#include "strata/testing/gradient_check.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"

namespace strata::testing {

namespace {

// splitmix64: a counter-based generator, so values depend only on (seed, index).
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

Tensor to_f64(const Tensor& t) {
  if (t.dtype() == DType::float64) return t;
  std::vector<double> v(t.num_elements());
  dispatch_numeric(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(p[i]);
  });
  return constant(v, t.shape());
}

// sum(y * w) computed in plain C++ (no ops), for the numerical side.
double objective(const Tensor& y, const std::vector<double>& w) {
  const Tensor y64 = to_f64(y);
  const double* p = y64.data<double>();
  double s = 0.0;
  for (int64_t i = 0; i < y64.num_elements(); ++i) s += p[i] * w[i];
  return s;
}

}  // namespace

Tensor random_uniform(const TensorShape& shape, double lo, double hi, uint64_t seed) {
  std::vector<double> v(shape.num_elements());
  for (size_t i = 0; i < v.size(); ++i) {
    const double u = static_cast<double>(mix(seed * 0x100000001B3ull + i) >> 11) * 0x1.0p-53;
    v[i] = lo + (hi - lo) * u;
  }
  return constant(v, shape);
}

GradientCheckResult check_gradients(const TensorFunction& f, const std::vector<Tensor>& inputs,
                                    const GradientCheckOptions& options) {
  std::vector<Tensor> x;
  x.reserve(inputs.size());
  for (const Tensor& t : inputs) x.push_back(to_f64(t));

  // Analytic side.
  std::vector<Tensor> analytic;
  std::vector<double> w;
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = f(x);
    STRATA_CHECK_ARG(y.defined(),
                     "check_gradients: expected f to return a tensor, got an empty handle");
    const Tensor wt = random_uniform(y.shape(), 0.5, 1.5, options.weight_seed);
    w = wt.to_vector<double>();
    const Tensor target = reduce_sum(multiply(to_f64(y), wt));
    analytic = tape.gradient(target, x, {.unconnected_gradients = UnconnectedGradients::ZERO});
  }

  GradientCheckResult result;
  std::ostringstream msg;
  int reported = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const std::vector<double> base = x[i].to_vector<double>();
    const Tensor a = to_f64(analytic[i]);
    for (size_t j = 0; j < base.size(); ++j) {
      auto eval = [&](double d) {
        std::vector<double> v = base;
        v[j] += d;
        std::vector<Tensor> xs = x;
        xs[i] = constant(v, x[i].shape());
        return objective(f(xs), w);
      };
      const double numeric = (eval(options.delta) - eval(-options.delta)) / (2 * options.delta);
      const double got = a.data<double>()[j];
      const double err = std::abs(got - numeric) / std::max(1.0, std::abs(numeric));
      result.max_error = std::max(result.max_error, std::isnan(err) ? INFINITY : err);
      if (!(err <= options.tolerance)) {
        result.ok = false;
        if (reported++ < 5) {
          msg << "input " << i << " element " << j << ": analytic " << got << ", numeric "
              << numeric << "\n";
        }
      }
    }
  }
  result.message = msg.str();
  return result;
}

}  // namespace strata::testing
