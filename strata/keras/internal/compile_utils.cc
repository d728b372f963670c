#include "strata/keras/internal/compile_utils.h"

#include <utility>

#include "strata/base/errors.h"
#include "strata/keras/metrics/accuracy.h"
#include "strata/keras/metrics/metrics.h"
#include "strata/keras/model.h"

namespace strata::keras::internal {
namespace {

// Keras's metrics.get for the names compile accepts, with "accuracy"/"acc"
// resolved from the shapes as compile_utils.MetricsContainer does.
metrics::MetricPtr resolve_metric(const std::string& name, const TensorShape& y_true, const TensorShape& y_pred) {
  if (name == "accuracy" || name == "acc") {
    const bool is_binary = y_pred.rank() > 0 && y_pred.dim(-1) == 1;
    const bool is_sparse = y_true.rank() < y_pred.rank() ||
                           (y_true.rank() > 0 && y_true.dim(-1) == 1 && y_pred.rank() > 0 && y_pred.dim(-1) > 1);
    if (is_binary) return metrics::BinaryAccuracy({.name = name});
    if (is_sparse) return metrics::SparseCategoricalAccuracy({.name = name});
    return metrics::CategoricalAccuracy({.name = name});
  }
  return metrics::get(name);
}

}  // namespace

CompiledMetrics::CompiledMetrics(const std::vector<MetricSpec>& metrics,
                                 const std::vector<MetricSpec>& weighted_metrics) {
  auto add = [&](const MetricSpec& spec, bool weighted) {
    if (spec.metric() != nullptr) {
      entries_.push_back({"", spec.metric(), weighted});
    } else {
      STRATA_CHECK_ARG(!spec.name().empty(), "compile: a metric name is empty");
      // Only "accuracy" waits for the first batch's shapes; other names
      // resolve now, so a typo fails in compile().
      const bool deferred = spec.name() == "accuracy" || spec.name() == "acc";
      entries_.push_back({deferred ? spec.name() : "", deferred ? nullptr : metrics::get(spec.name()), weighted});
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
