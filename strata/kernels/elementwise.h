#pragma once
// Element-wise and reduction kernels (Eigen inside, split over the current
// device's thread pool). Kernels check what only they can see (integer
// division by zero, dtype support) and trust the ops layer for the rest:
// dtype promotion, axis normalisation and gradient recording live in strata/ops.
//
//   Tensor c = kernels::binary(kernels::BinaryOp::Add, a, b, "add");   // a, b same dtype
//   Tensor s = kernels::reduce(kernels::ReduceOp::Sum, x, {0}, false);
//
// Results never depend on the number of threads: reductions sum fixed-size
// blocks in a fixed order. Thread-safe (pure functions of their inputs).

#include <cstdint>
#include <span>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::kernels {

// The opcodes of kernels::binary, kernels::unary and kernels::reduce are the
// ops of strata/ops/ops.def whose kernel column is Binary, Unary or Reduce:
// same names, same order, and kNum* counts them. The ops layer static_asserts
// the agreement (strata/ops/internal/kernel_opcode.h), so an op added to one
// list and not the other does not build.
enum class BinaryOp : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  FloorDiv,
  FloorMod,
  SquaredDifference,
  Equal,
  NotEqual,
  Less,
  LessEqual,
  Greater,
  GreaterEqual,
  LogicalAnd,
  LogicalOr,
};
inline constexpr int kNumBinaryOps = static_cast<int>(BinaryOp::LogicalOr) + 1;

// NumPy broadcast of two shapes; InvalidArgumentError naming `who` and both shapes.
TensorShape broadcast_shape(const TensorShape& a, const TensorShape& b, const char* who);

// `a` and `b` must have the same dtype; the result has it too, except that
// comparisons and logic give bool. Div on integers is C++ truncating division
// (the ops layer casts integers to float64 first, as TF's truediv).
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const char* who);

enum class UnaryOp : uint8_t {
  LogicalNot,
  Neg,
  Abs,
  Sign,
  Exp,
  Log,
  Log1p,
  Sqrt,
  Rsqrt,
  Square,
  Reciprocal,
  Sin,
  Cos,
  Floor,
  Ceil,
  Round,
  Relu,
  Relu6,
  LeakyRelu,
  Elu,
  Sigmoid,
  Tanh,
  Softplus,
};
inline constexpr int kNumUnaryOps = static_cast<int>(UnaryOp::Softplus) + 1;
// `alpha` is LeakyRelu's slope / Elu's alpha.
Tensor unary(UnaryOp op, const Tensor& x, double alpha, const char* who);

// Element conversion: float -> int truncates toward zero, number -> bool is != 0.
Tensor cast(const Tensor& x, DType dtype);
// A tensor of `shape` whose every element is `value` converted to `dtype`.
Tensor fill(DType dtype, const TensorShape& shape, double value);
// out = cond ? x : y, all three broadcast together; x and y have the same dtype.
Tensor select(const Tensor& cond, const Tensor& x, const Tensor& y);
// Sum of equally shaped, equally typed tensors.
Tensor add_n(const std::vector<Tensor>& inputs);

enum class ReduceOp : uint8_t { Sum, Mean, Max, Min, Prod };
inline constexpr int kNumReduceOps = static_cast<int>(ReduceOp::Prod) + 1;
// `axes`: sorted, unique, non-negative. Empty tensors reduce to the identity
// (0, NaN for a float mean, lowest/highest for max/min, 1).
Tensor reduce(ReduceOp op, const Tensor& x, std::span<const int64_t> axes, bool keepdims);
// Index (int64) of the first max/min along `axis` (non-negative).
Tensor arg_reduce(bool is_max, const Tensor& x, int axis);

}  // namespace strata::kernels
