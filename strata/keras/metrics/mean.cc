#include "strata/keras/metrics/mean.h"

#include <utility>
#include <vector>

#include "strata/base/errors.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"

namespace strata::keras::metrics {
namespace {

// tf.__internal__.ops.broadcast_weights' static rule: a scalar, or the same
// rank with every dimension 1 or equal to the values'.
bool broadcastable(const TensorShape& weights, const TensorShape& values) {
  if (weights.rank() == 0) return true;
  if (weights.rank() != values.rank()) return false;
  for (int i = 0; i < weights.rank(); ++i) {
    if (weights[i] != 1 && weights[i] != values[i]) return false;
  }
  return true;
}

}  // namespace

ReduceMetric::ReduceMetric(Kind kind, std::string name, std::optional<DType> dtype)
    : Metric(std::move(name), dtype.value_or(DType::float32)), kind_(kind) {
  total_ = add_weight("total");
  if (kind_ == Kind::WEIGHTED_MEAN) count_ = add_weight("count");
}

void ReduceMetric::update_values(const Tensor& values_in, const Tensor& sample_weight) {
  STRATA_CHECK_ARG(values_in.defined(), "metric '", name(), "': update_state got undefined values");
  Tensor values = strata::cast(values_in, dtype());
  Tensor weights;
  if (sample_weight.defined()) {
    weights = strata::cast(sample_weight, dtype());
    // Keras's squeeze_or_expand_dimensions(values, None, weights).
    if (weights.rank() > 0) {
      if (values.rank() - weights.rank() == 1) {
        weights = strata::expand_dims(weights, -1);
      } else if (weights.rank() - values.rank() == 1 && weights.shape()[-1] == 1) {
        weights = strata::squeeze(weights, {-1});
      }
    }
    if (broadcastable(weights.shape(), values.shape())) {
      weights = strata::broadcast_to(weights, values.shape());
    } else {
      // Keras reduces the values to the weight's rank when they cannot be broadcast.
      STRATA_CHECK_ARG(weights.rank() < values.rank(), "metric '", name(),
                       "': sample_weight of shape ", sample_weight.shape(),
                       " cannot be broadcast to values of shape ", values_in.shape());
      std::vector<int64_t> axes;
      for (int64_t a = weights.rank(); a < values.rank(); ++a) axes.push_back(a);
      values = kind_ == Kind::SUM ? strata::reduce_sum(values, {.axis = axes})
                                  : strata::reduce_mean(values, {.axis = axes});
      STRATA_CHECK_ARG(broadcastable(weights.shape(), values.shape()), "metric '", name(),
                       "': sample_weight of shape ", sample_weight.shape(),
                       " cannot be broadcast to values of shape ", values_in.shape());
      weights = strata::broadcast_to(weights, values.shape());
    }
    values = strata::multiply(values, weights);
  }
  total_.assign_add(strata::reduce_sum(values));
  if (kind_ == Kind::SUM) return;
  Tensor num = weights.defined()
                   ? strata::reduce_sum(weights)
                   : strata::cast(strata::constant(double(values.num_elements())), dtype());
  count_.assign_add(num);
}

Tensor ReduceMetric::result() const {
  Tensor total = total_.value();
  if (kind_ == Kind::SUM) return strata::identity(total);
  // tf.math.divide_no_nan: 0 when nothing was counted.
  Tensor count = count_.value();
  if (count.scalar_as_double() == 0.0) return strata::zeros({}, dtype());
  return strata::divide(total, count);
}

MeanMetric::MeanMetric(const MeanOptions& o) : ReduceMetric(Kind::WEIGHTED_MEAN, o.name, o.dtype) {}

void MeanMetric::update_state_impl(const Tensor&, const Tensor&, const Tensor&) {
  STRATA_CHECK_ARG(
      false, "metric '", name(),
      "': Mean takes update_state(values, sample_weight), not (y_true, y_pred, sample_weight)");
}

std::shared_ptr<MeanMetric> Mean(const MeanOptions& options) {
  return std::make_shared<MeanMetric>(options);
}

SumMetric::SumMetric(const SumOptions& o) : ReduceMetric(Kind::SUM, o.name, o.dtype) {}

void SumMetric::update_state_impl(const Tensor&, const Tensor&, const Tensor&) {
  STRATA_CHECK_ARG(
      false, "metric '", name(),
      "': Sum takes update_state(values, sample_weight), not (y_true, y_pred, sample_weight)");
}

std::shared_ptr<SumMetric> Sum(const SumOptions& options) {
  return std::make_shared<SumMetric>(options);
}

MeanMetricWrapper::MeanMetricWrapper(MetricFunction fn, std::string name,
                                     std::optional<DType> dtype)
    : ReduceMetric(Kind::WEIGHTED_MEAN, std::move(name), dtype), fn_(std::move(fn)) {
  STRATA_CHECK_ARG(fn_ != nullptr, "MeanMetricWrapper '", this->name(), "': empty function");
}

void MeanMetricWrapper::update_state_impl(const Tensor& y_true_in, const Tensor& y_pred_in,
                                          const Tensor& sample_weight) {
  STRATA_CHECK_ARG(y_true_in.defined() && y_pred_in.defined(), "metric '", name(),
                   "': update_state got an undefined tensor");
  Tensor y_true = strata::cast(y_true_in, dtype());
  Tensor y_pred = strata::cast(y_pred_in, dtype());
  // Keras's squeeze_or_expand_dimensions(y_pred, y_true).
  const int diff = y_pred.rank() - y_true.rank();
  if (diff != 1 || y_pred.shape()[-1] == 1) {
    if (diff == 1 && y_pred.shape()[-1] == 1) {
      y_pred = strata::squeeze(y_pred, {-1});
    } else if (diff == -1 && y_true.shape()[-1] == 1) {
      y_true = strata::squeeze(y_true, {-1});
    }
  }
  update_values(fn_(y_true, y_pred), sample_weight);
}

}  // namespace strata::keras::metrics
