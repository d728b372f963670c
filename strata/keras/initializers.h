#pragma once
// Keras weight initializers (tf.keras.initializers) with Keras's math.
//
//   keras::Initializer init = keras::initializers::glorot_uniform({.seed = 1});
//   Tensor kernel = init(TensorShape{784, 512}, DType::float32);
//   auto [fan_in, fan_out] = keras::initializers::compute_fans(TensorShape{3, 3, 1, 32});
//   // fan_in = 3*3*1 = 9, fan_out = 3*3*32 = 288 (receptive field times channels, as Keras)
//
// An Initializer is a value (a std::function): calling it returns a fresh
// tensor. With a seed the values are a pure function of (seed, shape); without
// one every call draws new values. Thread-safe (the functions hold only their
// parameters). Non-floating dtypes raise InvalidArgumentError, as Keras.

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "strata/core/tensor.h"

namespace strata::keras {

using Initializer = std::function<Tensor(const TensorShape& shape, DType dtype)>;

namespace initializers {

// Keras's _compute_fans: rank 0 -> (1, 1); rank 1 -> (n, n); rank 2 -> (rows, cols);
// rank > 2 (conv kernels, channels last) -> receptive field * input / output channels.
std::pair<double, double> compute_fans(const TensorShape& shape);

struct SeedOptions {
  std::optional<uint64_t> seed = std::nullopt;
};

// uniform(-limit, limit), limit = sqrt(6 / (fan_in + fan_out)). Keras's default kernel initializer.
Initializer glorot_uniform(const SeedOptions& options = {});
// truncated normal, stddev = sqrt(2 / (fan_in + fan_out)) / 0.87962566103423978.
Initializer glorot_normal(const SeedOptions& options = {});
// truncated normal, stddev = sqrt(2 / fan_in) / 0.87962566103423978.
Initializer he_normal(const SeedOptions& options = {});
// uniform(-limit, limit), limit = sqrt(6 / fan_in).
Initializer he_uniform(const SeedOptions& options = {});

struct RandomNormalOptions {
  double mean = 0.0;     // Keras default
  double stddev = 0.05;  // Keras default
  std::optional<uint64_t> seed = std::nullopt;
};
Initializer random_normal(const RandomNormalOptions& options = {});
// Normal values redrawn until within two standard deviations of the mean.
Initializer truncated_normal(const RandomNormalOptions& options = {});

struct RandomUniformOptions {
  double minval = -0.05;  // Keras default
  double maxval = 0.05;   // Keras default
  std::optional<uint64_t> seed = std::nullopt;
};
Initializer random_uniform(const RandomUniformOptions& options = {});

Initializer zeros();  // Keras's default bias initializer
Initializer ones();
Initializer constant(double value = 0.0);

}  // namespace initializers
}  // namespace strata::keras
