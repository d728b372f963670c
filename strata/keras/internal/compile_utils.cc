#include "strata/keras/internal/compile_utils.h"

#include <utility>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/keras/metrics/metrics.h"
#include "strata/keras/model.h"

namespace strata::keras::internal {
namespace {

// Keras's compile_utils.get_metric: "accuracy"/"acc" (and "crossentropy"/"ce")
// from the first batch's shapes.
metrics::MetricPtr resolve_metric(const std::string& name, const TensorShape& y_true,
                                  const TensorShape& y_pred) {
  return metrics::get(name, y_true, y_pred);
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
      const bool deferred = spec.name() == "accuracy" || spec.name() == "acc" ||
                            spec.name() == "crossentropy" || spec.name() == "ce";
      entries_.push_back(
          {deferred ? spec.name() : "", deferred ? nullptr : metrics::get(spec.name()), weighted});
    }
  };
  for (const MetricSpec& m : metrics) add(m, false);
  for (const MetricSpec& m : weighted_metrics) add(m, true);
}

void CompiledMetrics::build(const TensorShape& y_true, const TensorShape& y_pred) {
  MutexLock lock(mu_);
  if (built_) return;
  std::vector<metrics::MetricPtr> resolved;
  for (const Entry& e : entries_)
    resolved.push_back(e.metric ? e.metric : resolve_metric(e.name, y_true, y_pred));
  for (size_t i = 0; i < entries_.size(); ++i) entries_[i].metric = resolved[i];
  built_ = true;
}

bool CompiledMetrics::built() const {
  MutexLock lock(mu_);
  return built_;
}

void CompiledMetrics::update_state(const Tensor& y_true, const Tensor& y_pred,
                                   const Tensor& sample_weight) {
  build(y_true.shape(), y_pred.shape());
  for (const Entry& e : entries_) {
    // Keras: `metrics` ignore sample weights, `weighted_metrics` use them.
    e.metric->update_state(y_true, y_pred, e.weighted ? sample_weight : Tensor());
  }
}

std::vector<metrics::MetricPtr> CompiledMetrics::metrics() const {
  MutexLock lock(mu_);
  std::vector<metrics::MetricPtr> out;
  for (const Entry& e : entries_) {
    if (e.metric) out.push_back(e.metric);
  }
  return out;
}

void CompiledMetrics::reset_state() {
  for_each_metric([](const metrics::MetricPtr& m) { m->reset_state(); });
}

}  // namespace strata::keras::internal
