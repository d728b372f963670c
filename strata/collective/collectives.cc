#include "strata/collective/collectives.h"

#include "strata/base/errors.h"
#include "strata/collective/internal/reduce.h"

namespace strata::collective {

std::string_view reduce_op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::MEAN: return "MEAN";
    case ReduceOp::MAX: return "MAX";
    case ReduceOp::MIN: return "MIN";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, ReduceOp op) { return os << reduce_op_name(op); }

void reduce_buffers(DType dtype, ReduceOp op, void* out, std::span<const void* const> ins,
                    int64_t n) {
  STRATA_CHECK_ARG(!ins.empty(), "reduce_buffers: expected at least one input");
  STRATA_CHECK_ARG(internal::is_reducible(dtype),
                   "reduce_buffers: expected float32, float64, "
                   "int32 or int64, got ",
                   dtype_name(dtype));
  internal::reduce_n(dtype, op, out, ins, n, static_cast<int64_t>(ins.size()));
}

Tensor Collectives::all_reduce(int rank, const Tensor& tensor, ReduceOp op) {
  std::vector<Tensor> out = all_reduce(rank, std::vector<Tensor>{tensor}, op);
  return std::move(out.front());
}

}  // namespace strata::collective
