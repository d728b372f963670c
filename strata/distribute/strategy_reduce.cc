// Strategy::reduce: TensorFlow's cross-replica reduction semantics (spec §3.2).
#include <numeric>

#include "strata/base/errors.h"
#include "strata/distribute/strategy.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"

namespace strata::distribute {

namespace {

int64_t checked_axis(const Tensor& v, int64_t axis) {
  const int64_t rank = v.rank();
  STRATA_CHECK_ARG(axis >= -rank && axis < rank, "reduce: `axis` = ", axis,
                   " out of range for `value` with rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

// SUM of the partial results of every local replica, on the current device.
Tensor sum_components(const std::vector<Tensor>& parts) {
  if (parts.size() == 1) return identity(parts[0]);
  for (const Tensor& p : parts) {
    STRATA_CHECK_ARG(p.shape() == parts[0].shape() && p.dtype() == parts[0].dtype(),
                     "reduce: expected every replica's value to have shape ", parts[0].shape(),
                     " and dtype ", dtype_name(parts[0].dtype()), ", got ", p.shape(), " ",
                     dtype_name(p.dtype()), " (use axis to reduce batches of different sizes)");
  }
  return add_n(parts);
}

}  // namespace

Tensor Strategy::reduce(ReduceOp op, const PerReplica<Tensor>& value, std::optional<int64_t> axis) {
  check_cross_replica("reduce");
  const std::vector<Tensor>& components = value.values();
  if (!axis) {
    Tensor total = sum_across_workers(sum_components(components));
    if (op == ReduceOp::SUM) return total;
    const Tensor n = cast(constant(static_cast<int64_t>(num_replicas_in_sync())), total.dtype());
    return divide(total, n);
  }
  std::vector<Tensor> partial;
  int64_t count = 0;
  for (const Tensor& c : components) {
    const int64_t k = checked_axis(c, *axis);
    partial.push_back(reduce_sum(c, {.axis = {k}}));
    count += c.shape().dim(static_cast<int>(k));
  }
  Tensor numerator = sum_across_workers(sum_components(partial));
  if (op == ReduceOp::SUM) return numerator;
  Tensor denominator = sum_across_workers(constant(count));
  // True division: integer numerators give float64, as TF's truediv.
  return divide(numerator, cast(denominator, numerator.dtype()));
}

Tensor Strategy::reduce(ReduceOp op, const Tensor& value, std::optional<int64_t> axis) {
  check_cross_replica("reduce");
  if (op == ReduceOp::SUM && num_replicas_in_sync() > 1) {
    throw InvalidArgumentError(
        str_cat(name(), ".reduce: a non-DistributedValues value of shape ", value.shape(),
                " cannot be reduced with the given reduce op ReduceOp.SUM across ",
                num_replicas_in_sync(), " replicas"));
  }
  if (!axis) return value;
  const int64_t k = checked_axis(value, *axis);
  return op == ReduceOp::SUM ? reduce_sum(value, {.axis = {k}}) : reduce_mean(value, {.axis = {k}});
}

}  // namespace strata::distribute
