#include "strata/ops/collective_ops.h"

#include "strata/base/errors.h"
#include "strata/ops/recorder.h"

namespace strata {
namespace {
thread_local ReplicaCollectives* t_collectives = nullptr;

int64_t checked_gather_axis(const Tensor& v, int64_t axis) {
  const int64_t rank = v.rank();
  STRATA_CHECK_ARG(rank >= 1, "all_gather: expected a value of rank >= 1, got shape ", v.shape());
  STRATA_CHECK_ARG(axis >= -rank && axis < rank, "all_gather: `axis` = ", axis,
                   " out of range for a value of rank ", rank);
  return axis < 0 ? axis + rank : axis;
}
}  // namespace

ReplicaCollectives* current_replica_collectives() noexcept { return t_collectives; }

ReplicaCollectivesScope::ReplicaCollectivesScope(ReplicaCollectives& c) : previous_(t_collectives) {
  t_collectives = &c;
}
ReplicaCollectivesScope::~ReplicaCollectivesScope() { t_collectives = previous_; }

void record_collective_reduce(const std::vector<Tensor>& values, const std::vector<Tensor>& results,
                              bool mean) {
  STRATA_INTERNAL_CHECK(values.size() == results.size());
  if (!any_recorder_active()) return;
  OpAttrs attrs;
  attrs.mean = mean;
  for (size_t i = 0; i < values.size(); ++i)
    record_op(OpKind::CollectiveReduce, {values[i]}, {results[i]}, attrs);
}

void record_collective_gather(const std::vector<Tensor>& values, const std::vector<Tensor>& results,
                              int64_t axis) {
  STRATA_INTERNAL_CHECK(values.size() == results.size());
  if (!any_recorder_active()) return;
  for (size_t i = 0; i < values.size(); ++i) {
    OpAttrs attrs;
    attrs.axis = checked_gather_axis(values[i], axis);
    record_op(OpKind::CollectiveGather, {values[i]}, {results[i]}, attrs);
  }
}

std::vector<Tensor> collective_all_reduce(const std::vector<Tensor>& values, bool mean) {
  std::vector<Tensor> results;
  if (t_collectives != nullptr) {
    results = t_collectives->all_reduce(mean, values);
  } else {
    for (const Tensor& v : values) results.push_back(v.reshaped(v.shape()));
  }
  record_collective_reduce(values, results, mean);
  return results;
}

std::vector<Tensor> collective_all_gather(const std::vector<Tensor>& values, int64_t axis) {
  for (const Tensor& v : values) checked_gather_axis(v, axis);
  std::vector<Tensor> results;
  if (t_collectives != nullptr) {
    results = t_collectives->all_gather(values, axis);
  } else {
    for (const Tensor& v : values) results.push_back(v.reshaped(v.shape()));
  }
  record_collective_gather(values, results, axis);
  return results;
}

}  // namespace strata
