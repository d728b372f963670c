#pragma once
// Operator overloads on Tensor, as Python's: a + b, a * 2.f, -a, a < b ...
// Comparison operators return bool tensors; == and != compare element-wise
// (tf.math.equal), not identity.
//
// Type promotion with a C++ scalar, as TensorFlow treats a Python scalar: the
// scalar becomes a tensor of the other operand's dtype (a "weak" scalar), so
// the result keeps the tensor's dtype, whatever the scalar's C++ type:
//   float32_t * 2.0        -> float32 (never a silent float64)
//   int32_t + 1            -> int32
//   uint8_images / 255.f   -> float32: 255 converts to uint8, and true division
//                             of uint8 is float32 (TF's truediv table; int32 and
//                             int64 divide as float64, as TF's)
// A scalar the tensor's integer dtype cannot hold (a fraction, or out of its
// range: int32_t * 0.5f, uint8_t + 300) is InvalidArgumentError, where
// TensorFlow raises a TypeError; cast the tensor first
// (strata::cast(x, DType::float32) * 0.5f).
//
// Compound assignment, as Python's `loss += x` and `image /= 255`: a Tensor is
// a value handle whose buffer is shared and never written, so `a += b` rebinds
// `a` to the new tensor `a + b` (as Python rebinds the name); other handles to
// the old value, and the buffer they share, keep the old value. The scalar
// forms follow the rules above (`uint8_image /= 255` makes `image` float32).

#include <type_traits>

#include "strata/ops/math_ops.h"

namespace strata {

namespace internal {
// A scalar of `like`'s dtype holding `value`.
Tensor scalar_like(const Tensor& like, double value);
// scalar_like for an operator's C++ scalar operand: InvalidArgumentError, naming
// `op`, when `like` has an integer dtype that cannot hold `value` exactly.
Tensor scalar_operand(const Tensor& like, double value, const char* op);
}  // namespace internal

#define STRATA_BINARY_OPERATOR(op, fn)                                             \
  inline Tensor operator op(const Tensor& a, const Tensor& b) { return fn(a, b); } \
  template <typename S, typename = std::enable_if_t<std::is_arithmetic_v<S>>>      \
  Tensor operator op(const Tensor& a, S s) {                                       \
    return fn(a, internal::scalar_operand(a, static_cast<double>(s), #op));        \
  }                                                                                \
  template <typename S, typename = std::enable_if_t<std::is_arithmetic_v<S>>>      \
  Tensor operator op(S s, const Tensor& b) {                                       \
    return fn(internal::scalar_operand(b, static_cast<double>(s), #op), b);        \
  }

STRATA_BINARY_OPERATOR(+, add)
STRATA_BINARY_OPERATOR(-, subtract)
STRATA_BINARY_OPERATOR(*, multiply)
STRATA_BINARY_OPERATOR(/, divide)
STRATA_BINARY_OPERATOR(<, less)
STRATA_BINARY_OPERATOR(<=, less_equal)
STRATA_BINARY_OPERATOR(>, greater)
STRATA_BINARY_OPERATOR(>=, greater_equal)
STRATA_BINARY_OPERATOR(==, equal)
STRATA_BINARY_OPERATOR(!=, not_equal)
#undef STRATA_BINARY_OPERATOR

#define STRATA_COMPOUND_ASSIGNMENT(op, binary_op)                                      \
  inline Tensor& operator op(Tensor& a, const Tensor& b) { return a = a binary_op b; } \
  template <typename S, typename = std::enable_if_t<std::is_arithmetic_v<S>>>          \
  Tensor& operator op(Tensor& a, S s) {                                                \
    return a = a binary_op s;                                                          \
  }

STRATA_COMPOUND_ASSIGNMENT(+=, +)
STRATA_COMPOUND_ASSIGNMENT(-=, -)
STRATA_COMPOUND_ASSIGNMENT(*=, *)
STRATA_COMPOUND_ASSIGNMENT(/=, /)
#undef STRATA_COMPOUND_ASSIGNMENT

inline Tensor operator-(const Tensor& a) { return negative(a); }
inline Tensor operator!(const Tensor& a) { return logical_not(a); }

}  // namespace strata
