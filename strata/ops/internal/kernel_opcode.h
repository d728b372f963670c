#pragma once
// The kernel opcode of every op whose ops.def kernel column is Unary, Binary
// or Reduce, derived from ops.def, with the compile-time proof that the
// kernels' opcode enums (strata/kernels/elementwise.h) are exactly those rows:
// each kernel enumerator is named as its op and sits at the op's position
// among the rows of its family, and each enum has as many enumerators as the
// family has rows. An op added to ops.def without its kernel opcode, or a
// kernel opcode without its row, fails here.
//
//   kernels::unary(unary_opcode(OpKind::Exp), x, 0.0, "exp");  // UnaryOp::Exp

#include "strata/kernels/elementwise.h"
#include "strata/ops/op_kind.h"

namespace strata::internal {

// Position of `kind` among the ops.def rows of its kernel family.
constexpr int kernel_family_index(OpKind kind) noexcept {
  int index = 0;
  for (int k = 0; k < static_cast<int>(kind); ++k) {
    if (kOpInfo[k].kernel == op_kernel(kind)) ++index;
  }
  return index;
}

// Number of ops.def rows of kernel family `family`.
constexpr int kernel_family_size(OpKernel family) noexcept {
  int n = 0;
  for (const OpInfo& info : kOpInfo) n += info.kernel == family ? 1 : 0;
  return n;
}

// The opcode of `kind`; `kind` must be of that family (an op of another
// family gives an opcode of no meaning: callers check op_kernel at compile time).
constexpr kernels::UnaryOp unary_opcode(OpKind kind) noexcept {
  return static_cast<kernels::UnaryOp>(kernel_family_index(kind));
}
constexpr kernels::BinaryOp binary_opcode(OpKind kind) noexcept {
  return static_cast<kernels::BinaryOp>(kernel_family_index(kind));
}
constexpr kernels::ReduceOp reduce_opcode(OpKind kind) noexcept {
  return static_cast<kernels::ReduceOp>(kernel_family_index(kind));
}

static_assert(kernel_family_size(OpKernel::Unary) == kernels::kNumUnaryOps,
              "kernels::UnaryOp and the Unary rows of ops.def differ in number");
static_assert(kernel_family_size(OpKernel::Binary) == kernels::kNumBinaryOps,
              "kernels::BinaryOp and the Binary rows of ops.def differ in number");
static_assert(kernel_family_size(OpKernel::Reduce) == kernels::kNumReduceOps,
              "kernels::ReduceOp and the Reduce rows of ops.def differ in number");

#define STRATA_KERNEL_OPCODE_CHECK(Enum, name)                                              \
  static_assert(                                                                            \
      kernels::Enum::name == static_cast<kernels::Enum>(kernel_family_index(OpKind::name)), \
      "kernels::" #Enum "::" #name " is not at the position of ops.def's row " #name);
#define STRATA_KERNEL_OPCODE_Unary(name) STRATA_KERNEL_OPCODE_CHECK(UnaryOp, name)
#define STRATA_KERNEL_OPCODE_Binary(name) STRATA_KERNEL_OPCODE_CHECK(BinaryOp, name)
#define STRATA_KERNEL_OPCODE_Reduce(name) STRATA_KERNEL_OPCODE_CHECK(ReduceOp, name)
#define STRATA_KERNEL_OPCODE_Own(name)
#define STRATA_OP(name, arity, kernel, differentiable, grad_needs, sharding) \
  STRATA_KERNEL_OPCODE_##kernel(name)
#include "strata/ops/ops.def"
#undef STRATA_OP
#undef STRATA_KERNEL_OPCODE_Own
#undef STRATA_KERNEL_OPCODE_Reduce
#undef STRATA_KERNEL_OPCODE_Binary
#undef STRATA_KERNEL_OPCODE_Unary
#undef STRATA_KERNEL_OPCODE_CHECK

}  // namespace strata::internal
