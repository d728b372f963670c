#pragma once
// OpKind: the primitive ops of strata/ops/ops.def, with everything that table
// says about them. Every function here is constexpr and reads one row of a
// table generated from ops.def, so no per-op fact is kept anywhere else.
//
//   strata::OpKind k = strata::OpKind::MatMul;
//   strata::op_name(k);                    // "MatMul"
//   strata::op_arity(k);                   // 2 (-1 = variadic)
//   strata::op_is_differentiable(k);       // true
//   strata::op_gradient_needs_inputs(k);   // true: a tape keeps a and b
//   strata::op_gradient_needs_outputs(k);  // false: the product is not kept
//   strata::op_is_elementwise(k);          // false: sharded by its own rule
//   static_assert(strata::op_kernel(strata::OpKind::Exp) == strata::OpKernel::Unary);

#include <cstdint>
#include <string_view>

namespace strata {

enum class OpKind : uint16_t {
#define STRATA_OP(name, arity, kernel, differentiable, grad_needs, sharding) name,
#include "strata/ops/ops.def"
#undef STRATA_OP
};

inline constexpr int kNumOpKinds = 0
#define STRATA_OP(name, arity, kernel, differentiable, grad_needs, sharding) +1
#include "strata/ops/ops.def"
#undef STRATA_OP
    ;

// ops.def's `kernel` column: which kernel entry point computes the op.
enum class OpKernel : uint8_t { Unary, Binary, Reduce, Own };
// ops.def's `grad_needs` column: the values a recorded op keeps for its gradient.
enum class GradNeeds : uint8_t { None, Inputs, Outputs, Both };
// ops.def's `sharding` column.
enum class OpSharding : uint8_t { General, Elementwise };

namespace internal {
struct OpInfo {
  std::string_view name;
  int arity;
  OpKernel kernel;
  bool differentiable;
  GradNeeds grad_needs;
  OpSharding sharding;
};
inline constexpr OpInfo kOpInfo[] = {
#define STRATA_OP(name, arity, kernel, differentiable, grad_needs, sharding) \
  {#name, arity, OpKernel::kernel, differentiable, GradNeeds::grad_needs, OpSharding::sharding},
#include "strata/ops/ops.def"
#undef STRATA_OP
};
static_assert(sizeof(kOpInfo) / sizeof(kOpInfo[0]) == kNumOpKinds);
constexpr const OpInfo& op_info(OpKind kind) noexcept { return kOpInfo[static_cast<int>(kind)]; }

// Rows that cannot be right: a gradient that is never computed needs nothing
// kept; the element-wise kernels are element-wise and have fixed arities.
constexpr bool op_table_is_consistent() noexcept {
  for (const OpInfo& info : kOpInfo) {
    if (!info.differentiable && info.grad_needs != GradNeeds::None) return false;
    if (info.arity < -1 || info.arity == 0) return false;
    const bool elementwise_kernel =
        info.kernel == OpKernel::Unary || info.kernel == OpKernel::Binary;
    if (elementwise_kernel && info.sharding != OpSharding::Elementwise) return false;
    if (info.kernel == OpKernel::Binary && info.arity != 2) return false;
    if ((info.kernel == OpKernel::Unary || info.kernel == OpKernel::Reduce) && info.arity != 1) {
      return false;
    }
  }
  return true;
}
static_assert(op_table_is_consistent(),
              "ops.def: a non-differentiable op declares grad_needs, an arity is not positive "
              "or -1, or a Unary/Binary/Reduce row has the wrong arity or is not Elementwise "
              "(Unary/Binary)");
}  // namespace internal

constexpr std::string_view op_name(OpKind kind) noexcept { return internal::op_info(kind).name; }
// Number of tensor inputs; -1 = variadic.
constexpr int op_arity(OpKind kind) noexcept { return internal::op_info(kind).arity; }
constexpr OpKernel op_kernel(OpKind kind) noexcept { return internal::op_info(kind).kernel; }
constexpr bool op_is_differentiable(OpKind kind) noexcept {
  return internal::op_info(kind).differentiable;
}
constexpr GradNeeds op_gradient_needs(OpKind kind) noexcept {
  return internal::op_info(kind).grad_needs;
}
// True if the gradient reads the op's input values (a tape keeps them).
constexpr bool op_gradient_needs_inputs(OpKind kind) noexcept {
  const GradNeeds n = op_gradient_needs(kind);
  return n == GradNeeds::Inputs || n == GradNeeds::Both;
}
// True if the gradient reads the op's output values (a tape keeps them).
constexpr bool op_gradient_needs_outputs(OpKind kind) noexcept {
  const GradNeeds n = op_gradient_needs(kind);
  return n == GradNeeds::Outputs || n == GradNeeds::Both;
}
// True if each output element depends only on the same element of every
// (broadcast) input: equally tiled inputs can run shard by shard.
constexpr bool op_is_elementwise(OpKind kind) noexcept {
  return internal::op_info(kind).sharding == OpSharding::Elementwise;
}

}  // namespace strata
