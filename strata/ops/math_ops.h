#pragma once
// Element-wise math, comparisons, reductions and matmul (tf.math).
//
//   Tensor c = strata::add(a, b);                       // NumPy broadcasting
//   Tensor s = strata::reduce_sum(x, {.axis = {0}, .keepdims = true});
//   Tensor y = strata::matmul(x, w, {.transpose_b = true});
//   Tensor m = strata::maximum(x, strata::constant(0.f));
//
// Broadcasting follows NumPy: shapes are aligned at the trailing dimension and
// each pair must be equal or contain 1. Binary ops promote dtypes with
// strata::promote_types (dtype.h) — unlike TF, which requires equal dtypes —
// so int32 + float32 is float32. Comparisons return bool. Integer division by
// zero raises InvalidArgumentError. Every op runs on the current device
// (strata::device), split over its threads, and reports itself to active
// GradientTapes. Shape or dtype errors raise InvalidArgumentError naming the op
// and the shapes.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "strata/core/tensor.h"

namespace strata {

// --- element-wise binary ---
Tensor add(const Tensor& a, const Tensor& b);
Tensor subtract(const Tensor& a, const Tensor& b);
Tensor multiply(const Tensor& a, const Tensor& b);
// True division. Integers divide as TF's truediv: uint8 as float32, int32 and
// int64 as float64.
Tensor divide(const Tensor& a, const Tensor& b);
Tensor floordiv(const Tensor& a, const Tensor& b);
Tensor floormod(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor squared_difference(const Tensor& a, const Tensor& b);
Tensor add_n(const std::vector<Tensor>& inputs);  // equal shapes and dtypes

// --- comparisons and logic (bool results) ---
Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);

// --- element-wise unary ---
Tensor identity(const Tensor& x);
Tensor negative(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);  // half to even, as TF
Tensor relu(const Tensor& x);
Tensor relu6(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double alpha = 0.2);  // TF's default alpha
Tensor elu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor softplus(const Tensor& x);
Tensor cast(const Tensor& x, DType dtype);
// where(cond, x, y): element-wise select with broadcasting of all three.
Tensor where(const Tensor& condition, const Tensor& x, const Tensor& y);
// Blocks gradients: the result is treated as a constant by every tape.
Tensor stop_gradient(const Tensor& x);

// --- reductions ---
struct ReduceOptions {
  std::vector<int64_t> axis = {};  // empty = reduce over all axes (TF's axis=None)
  bool keepdims = false;
};
Tensor reduce_sum(const Tensor& x, const ReduceOptions& options = {});
Tensor reduce_mean(const Tensor& x, const ReduceOptions& options = {});
Tensor reduce_max(const Tensor& x, const ReduceOptions& options = {});
Tensor reduce_min(const Tensor& x, const ReduceOptions& options = {});
Tensor reduce_prod(const Tensor& x, const ReduceOptions& options = {});
// Index of the max/min along `axis` (int64, like TF's default output_type).
Tensor argmax(const Tensor& x, int64_t axis = 0);
Tensor argmin(const Tensor& x, int64_t axis = 0);

// --- linear algebra ---
struct MatMulOptions {
  bool transpose_a = false;
  bool transpose_b = false;
};
// [..., M, K] x [..., K, N] -> [..., M, N]; leading (batch) dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b, const MatMulOptions& options = {});

namespace internal {
// reduce_sum over axes the caller already holds, with no ReduceOptions to
// fill (the gradients reduce over axes they compute, on every step).
Tensor reduce_sum_over(const Tensor& x, std::span<const int64_t> axes, bool keepdims);
}  // namespace internal

}  // namespace strata
