#include "strata/keras/internal/compile_utils.h"

#include <utility>

#include "strata/base/errors.h"
#include "strata/keras/losses.h"
#include "strata/keras/model.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"

namespace strata::keras::internal {
namespace {

Tensor scalar_f32(double v) { return strata::constant(static_cast<float>(v)); }

// Keras's divide_no_nan for the Mean-style results: 0 before any update.
Tensor safe_ratio(const Variable& total, const Variable& count) {
  const double c = count.value().scalar_as_double();
  const double t = total.value().scalar_as_double();
  return scalar_f32(c == 0.0 ? 0.0 : t / c);
}

// Keras squeezes a trailing 1 off sparse labels whose rank equals the predictions'.
Tensor squeeze_sparse_labels(const Tensor& y_true, const Tensor& y_pred) {
  if (y_true.rank() == y_pred.rank() && y_true.rank() > 0 && y_true.shape()[-1] == 1) {
    return strata::squeeze(y_true, {-1});
  }
  return y_true;
}

}  // namespace

LossTracker::LossTracker() : metrics::Metric("loss") {
  total_ = add_weight("total");
  count_ = add_weight("count");
}

void LossTracker::update(double value, double weight) {
  total_.assign_add(scalar_f32(value * weight));
  count_.assign_add(scalar_f32(weight));
}

Tensor LossTracker::result() const { return safe_ratio(total_, count_); }

void LossTracker::update_state_impl(const Tensor& y_true, const Tensor&, const Tensor& sample_weight) {
  Tensor values = strata::cast(y_true, DType::float32);
  if (sample_weight.defined()) {
    Tensor w = strata::broadcast_to(strata::cast(sample_weight, DType::float32), values.shape());
    total_.assign_add(strata::reduce_sum(strata::multiply(values, w)));
    count_.assign_add(strata::reduce_sum(w));
  } else {
    total_.assign_add(strata::reduce_sum(values));
    count_.assign_add(scalar_f32(double(values.num_elements())));
  }
}

MeanMetricWrapper::MeanMetricWrapper(std::string name, PerExampleFn fn)
    : metrics::Metric(std::move(name)), fn_(std::move(fn)) {
  total_ = add_weight("total");
  count_ = add_weight("count");
}

Tensor MeanMetricWrapper::result() const { return safe_ratio(total_, count_); }

void MeanMetricWrapper::update_state_impl(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  Tensor values = strata::cast(fn_(y_true, y_pred), DType::float32);
  if (sample_weight.defined()) {
    Tensor w = strata::cast(sample_weight, DType::float32);
    // Keras squeezes or expands the weights to the values' rank before broadcasting.
    if (w.rank() == values.rank() + 1 && w.shape()[-1] == 1) w = strata::squeeze(w, {-1});
    w = strata::broadcast_to(w, values.shape());
    total_.assign_add(strata::reduce_sum(strata::multiply(values, w)));
    count_.assign_add(strata::reduce_sum(w));
  } else {
    total_.assign_add(strata::reduce_sum(values));
    count_.assign_add(scalar_f32(double(values.num_elements())));
  }
}

Tensor sparse_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  Tensor labels = squeeze_sparse_labels(y_true, y_pred);
  Tensor predicted = strata::argmax(y_pred, -1);
  return strata::cast(strata::equal(strata::cast(labels, DType::int64), predicted), DType::float32);
}

Tensor categorical_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  return strata::cast(strata::equal(strata::argmax(y_true, -1), strata::argmax(y_pred, -1)), DType::float32);
}

Tensor binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold) {
  Tensor predicted = strata::cast(strata::greater(y_pred, strata::cast(scalar_f32(threshold), y_pred.dtype())),
                                  y_pred.dtype());
  Tensor matches = strata::cast(strata::equal(strata::cast(y_true, y_pred.dtype()), predicted), DType::float32);
  return strata::reduce_mean(matches, {.axis = {-1}});
}

namespace {

// Keras's metrics.get for the names compile accepts, with "accuracy"/"acc"
// resolved from the shapes as compile_utils.MetricsContainer does.
metrics::MetricPtr resolve_metric(const std::string& name, const TensorShape& y_true, const TensorShape& y_pred) {
  if (name == "accuracy" || name == "acc") {
    const bool is_binary = y_pred.rank() > 0 && y_pred.dim(-1) == 1;
    const bool is_sparse = y_true.rank() < y_pred.rank() ||
                           (y_true.rank() > 0 && y_true.dim(-1) == 1 && y_pred.rank() > 0 && y_pred.dim(-1) > 1);
    if (is_binary) {
      return std::make_shared<MeanMetricWrapper>(name, [](const Tensor& t, const Tensor& p) {
        return binary_accuracy(t, p);
      });
    }
    if (is_sparse) return std::make_shared<MeanMetricWrapper>(name, sparse_categorical_accuracy);
    return std::make_shared<MeanMetricWrapper>(name, categorical_accuracy);
  }
  if (name == "sparse_categorical_accuracy") {
    return std::make_shared<MeanMetricWrapper>(name, sparse_categorical_accuracy);
  }
  if (name == "categorical_accuracy") return std::make_shared<MeanMetricWrapper>(name, categorical_accuracy);
  if (name == "binary_accuracy") {
    return std::make_shared<MeanMetricWrapper>(name, [](const Tensor& t, const Tensor& p) {
      return binary_accuracy(t, p);
    });
  }
  if (name == "mse" || name == "mean_squared_error") {
    return std::make_shared<MeanMetricWrapper>(name, losses::mean_squared_error);
  }
  if (name == "mae" || name == "mean_absolute_error") {
    return std::make_shared<MeanMetricWrapper>(name, losses::mean_absolute_error);
  }
  if (name == "sparse_categorical_crossentropy") {
    return std::make_shared<MeanMetricWrapper>(name, [](const Tensor& t, const Tensor& p) {
      return losses::sparse_categorical_crossentropy(t, p);
    });
  }
  STRATA_CHECK_ARG(false, "compile: unknown metric '", name,
                   "' (known: accuracy, acc, sparse_categorical_accuracy, categorical_accuracy, "
                   "binary_accuracy, mse, mean_squared_error, mae, mean_absolute_error, "
                   "sparse_categorical_crossentropy; or pass a metric object)");
  return nullptr;
}

}  // namespace

CompiledMetrics::CompiledMetrics(const std::vector<MetricSpec>& metrics,
                                 const std::vector<MetricSpec>& weighted_metrics) {
  auto add = [&](const MetricSpec& spec, bool weighted) {
    if (spec.metric() != nullptr) {
      entries_.push_back({"", spec.metric(), weighted});
    } else {
      STRATA_CHECK_ARG(!spec.name().empty(), "compile: a metric name is empty");
      entries_.push_back({spec.name(), nullptr, weighted});
    }
  };
  for (const MetricSpec& m : metrics) add(m, false);
  for (const MetricSpec& m : weighted_metrics) add(m, true);
}

void CompiledMetrics::build(const TensorShape& y_true, const TensorShape& y_pred) {
  std::lock_guard<std::mutex> lock(mu_);
  if (built_) return;
  std::vector<metrics::MetricPtr> resolved;
  for (const Entry& e : entries_) resolved.push_back(e.metric ? e.metric : resolve_metric(e.name, y_true, y_pred));
  for (size_t i = 0; i < entries_.size(); ++i) entries_[i].metric = resolved[i];
  built_ = true;
}

bool CompiledMetrics::built() const {
  std::lock_guard<std::mutex> lock(mu_);
  return built_;
}

void CompiledMetrics::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  build(y_true.shape(), y_pred.shape());
  for (const Entry& e : entries_) {
    // Keras: `metrics` ignore sample weights, `weighted_metrics` use them.
    e.metric->update_state(y_true, y_pred, e.weighted ? sample_weight : Tensor());
  }
}

std::vector<metrics::MetricPtr> CompiledMetrics::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<metrics::MetricPtr> out;
  for (const Entry& e : entries_) {
    if (e.metric) out.push_back(e.metric);
  }
  return out;
}

void CompiledMetrics::reset_state() {
  for (const metrics::MetricPtr& m : metrics()) m->reset_state();
}

}  // namespace strata::keras::internal
