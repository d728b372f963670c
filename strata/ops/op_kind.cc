#include "strata/ops/op_kind.h"

namespace strata {

namespace {
struct OpInfo {
  std::string_view name;
  int arity;
  bool differentiable;
};
constexpr OpInfo kOpInfo[] = {
#define STRATA_OP(name, arity, differentiable) {#name, arity, differentiable},
#include "strata/ops/ops.def"
#undef STRATA_OP
};
static_assert(sizeof(kOpInfo) / sizeof(kOpInfo[0]) == kNumOpKinds);
}  // namespace

std::string_view op_name(OpKind kind) noexcept { return kOpInfo[static_cast<int>(kind)].name; }
int op_arity(OpKind kind) noexcept { return kOpInfo[static_cast<int>(kind)].arity; }
bool op_is_differentiable(OpKind kind) noexcept {
  return kOpInfo[static_cast<int>(kind)].differentiable;
}

}  // namespace strata
