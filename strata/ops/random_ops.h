#pragma once
// Random tensors (tf.random), from the counter-based generator of
// strata/core/random.h: for a given seed the values never depend on the
// number of threads.
//
//   Tensor u = strata::random::uniform({2, 5}, {.seed = 1});            // [0, 1) float32
//   Tensor i = strata::random::uniform_int({2, 1}, 0, 2, {.seed = 1});   // int64 in [0, 2)
//   Tensor n = strata::random::normal({3}, {.mean = 0, .stddev = 1, .seed = 7});

#include <cstdint>
#include <optional>

#include "strata/core/tensor.h"

namespace strata::random {

struct UniformOptions {
  double minval = 0.0;
  double maxval = 1.0;
  DType dtype = DType::float32;
  std::optional<uint64_t> seed = std::nullopt;
};
Tensor uniform(const TensorShape& shape, const UniformOptions& options = {});

struct UniformIntOptions {
  DType dtype = DType::int64;
  std::optional<uint64_t> seed = std::nullopt;
};
// Integers in [minval, maxval).
Tensor uniform_int(const TensorShape& shape, int64_t minval, int64_t maxval,
                   const UniformIntOptions& options = {});

struct NormalOptions {
  double mean = 0.0;
  double stddev = 1.0;
  DType dtype = DType::float32;
  std::optional<uint64_t> seed = std::nullopt;
};
Tensor normal(const TensorShape& shape, const NormalOptions& options = {});
// Normal values redrawn until within two standard deviations (tf.random.truncated_normal).
Tensor truncated_normal(const TensorShape& shape, const NormalOptions& options = {});
// A random permutation of the first dimension (tf.random.shuffle).
Tensor shuffle(const Tensor& x, std::optional<uint64_t> seed = std::nullopt);

}  // namespace strata::random
