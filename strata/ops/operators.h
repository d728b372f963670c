#pragma once
// Operator overloads on Tensor, as Python's: a + b, a * 2.f, -a, a < b ...
// A C++ scalar operand becomes a scalar tensor of the other operand's dtype
// (TF's "weak" Python scalars). Comparison operators return bool tensors;
// == and != compare element-wise (tf.math.equal), not identity.

#include <type_traits>

#include "strata/ops/math_ops.h"

namespace strata {

namespace internal {
// A scalar of `like`'s dtype holding `value`.
Tensor scalar_like(const Tensor& like, double value);
}  // namespace internal

#define STRATA_BINARY_OPERATOR(op, fn)                                             \
  inline Tensor operator op(const Tensor& a, const Tensor& b) { return fn(a, b); } \
  template <typename S, typename = std::enable_if_t<std::is_arithmetic_v<S>>>      \
  Tensor operator op(const Tensor& a, S s) {                                       \
    return fn(a, internal::scalar_like(a, static_cast<double>(s)));                \
  }                                                                                \
  template <typename S, typename = std::enable_if_t<std::is_arithmetic_v<S>>>      \
  Tensor operator op(S s, const Tensor& b) {                                       \
    return fn(internal::scalar_like(b, static_cast<double>(s)), b);                \
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

inline Tensor operator-(const Tensor& a) { return negative(a); }
inline Tensor operator!(const Tensor& a) { return logical_not(a); }

}  // namespace strata
