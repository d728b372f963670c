#pragma once
// In-place optimizer kernels over raw buffers (TF's training_ops: the fused
// ResourceApplyAdam): one pass reads the gradient and the variable's state and
// rewrites the state where it lies, with no temporary of the variable's size.
// The ops layer (strata/ops/training_ops.h) checks shapes and dtypes and hands
// in the variables' buffers.
//
//   kernels::apply_adam(DType::float32, n, w, m, v, /*vhat=*/nullptr, g,
//                       {.one_minus_beta_1 = 0.1, .one_minus_beta_2 = 0.001,
//                        .alpha = alpha, .epsilon = 1e-7});
//
// Element i of the result depends only on element i of the inputs, so the
// result is the same for any number of threads. Thread-safe for disjoint
// buffers.

#include <cstdint>

#include "strata/core/dtype.h"

namespace strata::kernels {

// The step's scalars, converted to the variable's dtype by the kernel.
struct AdamCoefficients {
  double one_minus_beta_1 = 0.1;
  double one_minus_beta_2 = 0.001;
  double alpha = 0.001;  // learning_rate * sqrt(1 - beta_2^t) / (1 - beta_1^t)
  double epsilon = 1e-7;
};

// Keras's Adam update of `n` elements of `dtype` (float32 or float64, else
// InvalidArgumentError), in Keras's order and rounding, all in place:
//   m += (g - m) * (1 - beta_1)
//   v += (g^2 - v) * (1 - beta_2)
//   vhat = max(vhat, v)                     (only when vhat != nullptr: amsgrad)
//   var -= m * alpha / (sqrt(vhat or v) + epsilon)
// Split over the current device's thread pool. The buffers must not overlap.
void apply_adam(DType dtype, int64_t n, void* var, void* m, void* v, void* vhat, const void* grad,
                const AdamCoefficients& c);

}  // namespace strata::kernels
