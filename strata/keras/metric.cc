#include "strata/keras/metric.h"

#include <utility>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/ops/array_ops.h"

namespace strata::keras::metrics {

Metric::Metric(std::string name, DType dtype) : name_(std::move(name)), dtype_(dtype) {
  STRATA_CHECK_ARG(is_floating(dtype), "metric '", name_, "': expected a floating dtype, got ",
                   dtype_name(dtype));
}

void Metric::reset_state() {
  for (const Variable& v : variables_) v.assign(strata::zeros(v.shape(), v.dtype()));
}

Variable Metric::add_weight(const std::string& name, const TensorShape& shape,
                            std::optional<DType> dtype) {
  // ON_READ + SUM: under a strategy each replica accumulates into its own copy
  // and a cross-replica read sums them (Keras's metric variables).
  Variable v(strata::zeros(shape, dtype.value_or(dtype_)),
             {.name = str_cat(name_, "/", name),
              .trainable = false,
              .synchronization = VariableSynchronization::ON_READ,
              .aggregation = VariableAggregation::SUM});
  variables_.push_back(v);
  return v;
}

}  // namespace strata::keras::metrics
