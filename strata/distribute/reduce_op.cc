#include "strata/distribute/reduce_op.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "strata/base/errors.h"
#include "strata/collective/collectives.h"
#include "strata/ops/math_ops.h"

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

namespace {
Tensor pairwise_sum_range(std::span<const Tensor> values, size_t lo, size_t hi) {
  if (hi - lo == 1) return values[lo];
  const size_t mid = lo + (hi - lo) / 2;
  return strata::add(pairwise_sum_range(values, lo, mid), pairwise_sum_range(values, mid, hi));
}
}  // namespace

Tensor pairwise_sum(std::span<const Tensor> values) {
  STRATA_CHECK_ARG(!values.empty(), "pairwise_sum: expected at least one value, got none");
  const bool defined = values.front().defined();
  for (size_t i = 0; i < values.size(); ++i) {
    STRATA_CHECK_ARG(values[i].defined() == defined, "pairwise_sum: value ", i, " is ",
                     values[i].defined() ? "defined" : "undefined", " but value 0 is ",
                     defined ? "defined" : "undefined");
  }
  if (!defined) return Tensor();
  return pairwise_sum_range(values, 0, values.size());
}

}  // namespace strata::distribute
