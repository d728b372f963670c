#include "strata/distribute/reduce_op.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "strata/base/errors.h"
#include "strata/collective/collectives.h"

namespace strata::distribute {

std::string_view reduce_op_name(ReduceOp op) noexcept {
  return op == ReduceOp::SUM ? "SUM" : "MEAN";
}

ReduceOp reduce_op_from_string(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  if (upper == "SUM") return ReduceOp::SUM;
  if (upper == "MEAN") return ReduceOp::MEAN;
  throw InvalidArgumentError(
      str_cat("ReduceOp: expected 'SUM' or 'MEAN' (any case), got '", name, "'"));
}

std::ostream& operator<<(std::ostream& os, ReduceOp op) {
  return os << "ReduceOp." << reduce_op_name(op);
}

collective::ReduceOp to_collective(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::SUM: return collective::ReduceOp::SUM;
    case ReduceOp::MEAN: return collective::ReduceOp::MEAN;
  }
  return collective::ReduceOp::SUM;  // unreachable: the switch covers every enumerator
}

}  // namespace strata::distribute
