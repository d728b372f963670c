#include "strata/keras/initializers.h"

#include <cmath>
#include <string>

#include "strata/base/errors.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/random_ops.h"

namespace strata::keras::initializers {
namespace {

// Keras scales a truncated normal by this constant so that the variance of the
// truncated distribution (cut at two standard deviations) equals the target.
constexpr double kTruncatedNormalStddevCorrection = 0.87962566103423978;

void check_floating(const char* who, DType dtype) {
  STRATA_CHECK_ARG(is_floating(dtype), "initializers::", who, ": expected a floating dtype, got ",
                   dtype_name(dtype));
}

Initializer uniform_with_limit(const char* who, std::optional<uint64_t> seed, bool use_fan_out) {
  return [who, seed, use_fan_out](const TensorShape& shape, DType dtype) {
    check_floating(who, dtype);
    auto [fan_in, fan_out] = compute_fans(shape);
    const double denom = use_fan_out ? fan_in + fan_out : fan_in;
    const double limit = std::sqrt(6.0 / std::max(1.0, denom));
    return random::uniform(shape,
                           {.minval = -limit, .maxval = limit, .dtype = dtype, .seed = seed});
  };
}

Initializer truncated_with_scale(const char* who, std::optional<uint64_t> seed, bool use_fan_out) {
  return [who, seed, use_fan_out](const TensorShape& shape, DType dtype) {
    check_floating(who, dtype);
    auto [fan_in, fan_out] = compute_fans(shape);
    const double scale =
        use_fan_out ? 1.0 / std::max(1.0, (fan_in + fan_out) / 2.0) : 2.0 / std::max(1.0, fan_in);
    const double stddev = std::sqrt(scale) / kTruncatedNormalStddevCorrection;
    return random::truncated_normal(shape,
                                    {.mean = 0.0, .stddev = stddev, .dtype = dtype, .seed = seed});
  };
}

}  // namespace

std::pair<double, double> compute_fans(const TensorShape& shape) {
  const int rank = shape.rank();
  if (rank == 0) return {1.0, 1.0};
  if (rank == 1) return {double(shape[0]), double(shape[0])};
  if (rank == 2) return {double(shape[0]), double(shape[1])};
  double receptive_field = 1.0;
  for (int i = 0; i < rank - 2; ++i) receptive_field *= double(shape[i]);
  return {double(shape[rank - 2]) * receptive_field, double(shape[rank - 1]) * receptive_field};
}

Initializer glorot_uniform(const SeedOptions& options) {
  return uniform_with_limit("glorot_uniform", options.seed, /*use_fan_out=*/true);
}
Initializer glorot_normal(const SeedOptions& options) {
  return truncated_with_scale("glorot_normal", options.seed, /*use_fan_out=*/true);
}
Initializer he_normal(const SeedOptions& options) {
  return truncated_with_scale("he_normal", options.seed, /*use_fan_out=*/false);
}
Initializer he_uniform(const SeedOptions& options) {
  return uniform_with_limit("he_uniform", options.seed, /*use_fan_out=*/false);
}

Initializer random_normal(const RandomNormalOptions& o) {
  return [o](const TensorShape& shape, DType dtype) {
    check_floating("random_normal", dtype);
    return random::normal(shape,
                          {.mean = o.mean, .stddev = o.stddev, .dtype = dtype, .seed = o.seed});
  };
}
Initializer truncated_normal(const RandomNormalOptions& o) {
  return [o](const TensorShape& shape, DType dtype) {
    check_floating("truncated_normal", dtype);
    return random::truncated_normal(
        shape, {.mean = o.mean, .stddev = o.stddev, .dtype = dtype, .seed = o.seed});
  };
}
Initializer random_uniform(const RandomUniformOptions& o) {
  STRATA_CHECK_ARG(o.minval < o.maxval, "RandomUniformOptions: expected minval < maxval, got ",
                   o.minval, " and ", o.maxval);
  return [o](const TensorShape& shape, DType dtype) {
    check_floating("random_uniform", dtype);
    return random::uniform(
        shape, {.minval = o.minval, .maxval = o.maxval, .dtype = dtype, .seed = o.seed});
  };
}

Initializer zeros() {
  return [](const TensorShape& shape, DType dtype) { return strata::zeros(shape, dtype); };
}
Initializer ones() {
  return [](const TensorShape& shape, DType dtype) { return strata::ones(shape, dtype); };
}
Initializer constant(double value) {
  return [value](const TensorShape& shape, DType dtype) {
    return strata::fill(shape, strata::cast(strata::constant(value), dtype));
  };
}

}  // namespace strata::keras::initializers
