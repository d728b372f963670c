#pragma once
// OpKind: the primitive ops of strata/ops/ops.def, with their names and metadata.
//
//   strata::OpKind k = strata::OpKind::MatMul;
//   strata::op_name(k);              // "MatMul"
//   strata::op_is_differentiable(k); // true
//   strata::op_arity(k);             // 2 (-1 = variadic)

#include <cstdint>
#include <string_view>

namespace strata {

enum class OpKind : uint16_t {
#define STRATA_OP(name, arity, differentiable) name,
#include "strata/ops/ops.def"
#undef STRATA_OP
};

inline constexpr int kNumOpKinds = 0
#define STRATA_OP(name, arity, differentiable) +1
#include "strata/ops/ops.def"
#undef STRATA_OP
    ;

std::string_view op_name(OpKind kind) noexcept;
int op_arity(OpKind kind) noexcept;
bool op_is_differentiable(OpKind kind) noexcept;

}  // namespace strata
