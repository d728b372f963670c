#include "strata/ops/random_ops.h"

#include <cmath>
#include <numbers>

#include "strata/core/random.h"
#include "strata/ops/array_ops.h"

namespace strata::random {
namespace {

// Element i draws from Philox block i (all four words), so values depend only
// on the seed and i, never on threads. Attempt k of truncated_normal uses
// counter i + k * 2^40.
constexpr uint64_t kAttemptStride = uint64_t{1} << 40;

double unit_double(const Philox::Block& b, int half) {
  return uint64_to_unit_double(b[2 * half], b[2 * half + 1]);
}

double normal_at(const Philox& gen, uint64_t counter) {
  const Philox::Block b = gen(counter);
  const double u1 = 1.0 - unit_double(b, 0);  // (0, 1]: log is finite
  const double u2 = unit_double(b, 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

template <typename Fn>
Tensor generate(const TensorShape& shape, DType dtype, Fn&& value_at, const char* who) {
  STRATA_CHECK_ARG(shape.is_fully_defined(), who, ": expected a fully defined shape, got ", shape);
  Tensor out = Tensor::allocate(dtype, shape);
  const int64_t n = shape.num_elements();
  if (dtype == DType::float32) {
    float* p = out.mutable_data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(value_at(static_cast<uint64_t>(i)));
  } else if (dtype == DType::float64) {
    double* p = out.mutable_data<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = value_at(static_cast<uint64_t>(i));
  } else {
    throw InvalidArgumentError(str_cat(who, ": expected dtype float32 or float64, got ", dtype));
  }
  return out;
}

}  // namespace

Tensor uniform(const TensorShape& shape, const UniformOptions& o) {
  STRATA_CHECK_ARG(o.minval <= o.maxval, "random::uniform: expected minval <= maxval, got ",
                   o.minval, " and ", o.maxval);
  const auto [seed, stream] = resolve_seed(o.seed);
  const Philox gen(seed, stream);
  return generate(
      shape, o.dtype,
      [&](uint64_t i) {
        const double u = unit_double(gen(i), 0);
        const double v = o.minval + u * (o.maxval - o.minval);
        // float32 rounding may reach maxval; keep the interval half-open.
        if (o.dtype == DType::float32 && static_cast<float>(v) >= static_cast<float>(o.maxval) &&
            o.maxval > o.minval)
          return static_cast<double>(std::nextafter(static_cast<float>(o.maxval), -INFINITY));
        return v;
      },
      "random::uniform");
}

Tensor uniform_int(const TensorShape& shape, int64_t minval, int64_t maxval,
                   const UniformIntOptions& o) {
  STRATA_CHECK_ARG(minval < maxval, "random::uniform_int: expected minval < maxval, got ", minval,
                   " and ", maxval);
  STRATA_CHECK_ARG(o.dtype == DType::int32 || o.dtype == DType::int64,
                   "random::uniform_int: expected dtype int32 or int64, got ", o.dtype);
  const auto [seed, stream] = resolve_seed(o.seed);
  const Philox gen(seed, stream);
  const uint64_t range = static_cast<uint64_t>(maxval - minval);
  Tensor out = Tensor::allocate(o.dtype, shape);
  const int64_t n = shape.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const Philox::Block b = gen(static_cast<uint64_t>(i));
    const uint64_t r = (uint64_t{b[0]} << 32 | b[1]) % range;
    const int64_t v = minval + static_cast<int64_t>(r);
    if (o.dtype == DType::int32)
      out.mutable_data<int32_t>()[i] = static_cast<int32_t>(v);
    else
      out.mutable_data<int64_t>()[i] = v;
  }
  return out;
}

Tensor normal(const TensorShape& shape, const NormalOptions& o) {
  const auto [seed, stream] = resolve_seed(o.seed);
  const Philox gen(seed, stream);
  return generate(
      shape, o.dtype, [&](uint64_t i) { return o.mean + o.stddev * normal_at(gen, i); },
      "random::normal");
}

Tensor truncated_normal(const TensorShape& shape, const NormalOptions& o) {
  const auto [seed, stream] = resolve_seed(o.seed);
  const Philox gen(seed, stream);
  return generate(
      shape, o.dtype,
      [&](uint64_t i) {
        for (uint64_t k = 0;; ++k) {
          const double z = normal_at(gen, i + k * kAttemptStride);
          if (std::abs(z) <= 2.0) return o.mean + o.stddev * z;
        }
      },
      "random::truncated_normal");
}

Tensor shuffle(const Tensor& x, std::optional<uint64_t> seed) {
  STRATA_CHECK_ARG(x.rank() >= 1, "random::shuffle: expected rank >= 1, got a scalar");
  const auto [s, stream] = resolve_seed(seed);
  const Philox gen(s, stream);
  const int64_t n = x.shape()[0];
  std::vector<int64_t> perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    const Philox::Block b = gen(static_cast<uint64_t>(i));
    const int64_t j =
        static_cast<int64_t>((uint64_t{b[0]} << 32 | b[1]) % static_cast<uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return gather(x, constant(perm), 0);
}

}  // namespace strata::random
