// Strategy::reduce: TensorFlow's cross-replica reduction semantics (spec §3.2).
#include <algorithm>
#include <numeric>
#include <utility>

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

// TF's mean_reduce_helper: the sum of `v` along `axes` and the number of
// elements it adds (the product of the dims along them).
std::pair<Tensor, int64_t> partial_sum(const Tensor& v, const std::vector<int64_t>& axes) {
  std::vector<int64_t> ks;
  int64_t count = 1;
  for (int64_t a : axes) {
    const int64_t k = checked_axis(v, a);
    STRATA_CHECK_ARG(std::find(ks.begin(), ks.end(), k) == ks.end(), "reduce: `axis` ", k,
                     " given twice");
    ks.push_back(k);
    count *= v.shape().dim(static_cast<int>(k));
  }
  if (ks.empty()) return {identity(v), 1};
  return {reduce_sum(v, {.axis = ks}), count};
}

}  // namespace

Tensor Strategy::reduce(ReduceOpArg op_arg, const PerReplica<Tensor>& value,
                        const ReduceAxis& axis) {
  check_cross_replica("reduce");
  const ReduceOp op = op_arg.op;
  const std::vector<Tensor>& components = value.values();
  if (!axis.axes()) {
    Tensor total = sum_across_workers(sum_components(components));
    if (op == ReduceOp::SUM) return total;
    const Tensor n = cast(constant(static_cast<int64_t>(num_replicas_in_sync())), total.dtype());
    return divide(total, n);
  }
  std::vector<Tensor> partial;
  int64_t count = 0;
  for (const Tensor& c : components) {
    auto [sum, n] = partial_sum(c, *axis.axes());
    partial.push_back(std::move(sum));
    count += n;
  }
  Tensor numerator = sum_across_workers(sum_components(partial));
  if (op == ReduceOp::SUM) return numerator;
  Tensor denominator = sum_across_workers(constant(count));
  // True division: integer numerators give float64, as TF's truediv.
  return divide(numerator, cast(denominator, numerator.dtype()));
}

Tensor Strategy::reduce(ReduceOpArg op, const Mirrored<Tensor>& value, const ReduceAxis& axis) {
  check_cross_replica("reduce");
  // TF's _reduce_to: a Mirrored value's MEAN is the value (its copies are equal).
  if (op.op == ReduceOp::MEAN && !axis.axes()) return identity(value.values().front());
  return reduce(op, PerReplica<Tensor>(value.values()), axis);
}

Tensor Strategy::reduce(ReduceOpArg op_arg, const Tensor& value, const ReduceAxis& axis) {
  check_cross_replica("reduce");
  const ReduceOp op = op_arg.op;
  if (extended().in_multi_worker_mode()) {
    // TF's collective reduce of a non-distributed value: one contribution per
    // worker, combined across every worker.
    auto [sum, n] =
        axis.axes() ? partial_sum(value, *axis.axes()) : std::pair{identity(value), int64_t{1}};
    Tensor numerator = sum_across_workers(sum);
    if (op == ReduceOp::SUM) return numerator;
    Tensor denominator = sum_across_workers(constant(n));
    return divide(numerator, cast(denominator, numerator.dtype()));
  }
  if (op == ReduceOp::SUM && num_replicas_in_sync() > 1) {
    throw InvalidArgumentError(
        str_cat(name(), ".reduce: a non-DistributedValues value of shape ", value.shape(),
                " cannot be reduced with the given reduce op ReduceOp.SUM across ",
                num_replicas_in_sync(), " replicas"));
  }
  if (!axis.axes()) return value;
  auto [sum, n] = partial_sum(value, *axis.axes());
  if (op == ReduceOp::SUM) return sum;
  return divide(sum, cast(constant(n), sum.dtype()));
}

}  // namespace strata::distribute

namespace strata::distribute {

Tensor Strategy::gather(const PerReplica<Tensor>& value, int64_t axis) {
  check_cross_replica("gather");
  const std::vector<Tensor>& parts = value.values();
  STRATA_CHECK_ARG(static_cast<int>(parts.size()) == num_local_replicas(), name(),
                   ".gather: expected a value with one component per local replica (",
                   num_local_replicas(), "), got ", parts.size());
  const Tensor& first = parts.front();
  STRATA_CHECK_ARG(first.rank() >= 1, name(), ".gather: expected values of rank >= 1, got shape ",
                   first.shape());
  const int64_t k = checked_axis(first, axis);
  for (const Tensor& p : parts) {
    bool same = p.rank() == first.rank() && p.dtype() == first.dtype();
    for (int d = 0; same && d < first.rank(); ++d)
      same = d == k || p.shape().dim(d) == first.shape().dim(d);
    STRATA_CHECK_ARG(same, name(), ".gather: expected every replica's value to match shape ",
                     first.shape(), " and dtype ", dtype_name(first.dtype()), " except along axis ",
                     k, ", got ", p.shape(), " ", dtype_name(p.dtype()));
  }
  Tensor local = parts.size() == 1 ? identity(first) : concat(parts, k);
  if (num_input_pipelines() == 1) return local;
  // Across workers: every worker learns every replica's size along the axis
  // (one SUM of a vector each worker fills at its replicas' slots), places its
  // rows at their offset in a zero tensor of the global shape, and the SUM of
  // those tensors is the gathered value on every worker.
  std::vector<int64_t> sizes(static_cast<size_t>(num_replicas_in_sync()), 0);
  for (int i = 0; i < num_local_replicas(); ++i)
    sizes[static_cast<size_t>(global_replica_id(i))] =
        parts[static_cast<size_t>(i)].shape().dim(static_cast<int>(k));
  const std::vector<int64_t> all = sum_across_workers(constant(sizes)).to_vector<int64_t>();
  const int64_t before =
      std::accumulate(all.begin(), all.begin() + global_replica_id(0), int64_t{0});
  const int64_t total = std::accumulate(all.begin(), all.end(), int64_t{0});
  std::vector<std::pair<int64_t, int64_t>> paddings(static_cast<size_t>(first.rank()), {0, 0});
  paddings[static_cast<size_t>(k)] = {before,
                                      total - before - local.shape().dim(static_cast<int>(k))};
  return sum_across_workers(pad(local, paddings));
}

Tensor Strategy::gather(const Tensor& value, int64_t axis) {
  check_cross_replica("gather");
  STRATA_CHECK_ARG(num_replicas_in_sync() == 1, name(),
                   ".gather: a non-DistributedValues value of shape ", value.shape(),
                   " cannot be gathered across ", num_replicas_in_sync(), " replicas");
  STRATA_CHECK_ARG(value.rank() >= 1, name(), ".gather: expected a value of rank >= 1, got shape ",
                   value.shape());
  checked_axis(value, axis);
  return value;
}

}  // namespace strata::distribute
