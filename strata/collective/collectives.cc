#include "strata/collective/collectives.h"

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

Tensor Collectives::all_reduce(int rank, const Tensor& tensor, ReduceOp op) {
  std::vector<Tensor> out = all_reduce(rank, std::vector<Tensor>{tensor}, op);
  return std::move(out.front());
}

}  // namespace strata::collective
