#pragma once
// Private to the keras layer: the piece of Keras's compile_utils.py that
// compile() builds for metrics — resolving metric names ("accuracy" from the
// shapes of the first batch) and updating them each step.
//
// Thread-safety: updates to a metric from several replica threads are safe
// (each state update is one assign_add on a variable); building happens once,
// under a mutex.

#include <cstdint>
#include <string>
#include <vector>

#include "strata/base/mutex.h"
#include "strata/core/tensor.h"
#include "strata/keras/metric.h"

namespace strata::keras {
class MetricSpec;
}

namespace strata::keras::internal {

// The compiled metrics of a model: resolved from the specs on the first batch
// (the shapes decide what "accuracy" means), then updated every step.
class CompiledMetrics {
 public:
  CompiledMetrics(const std::vector<MetricSpec>& metrics,
                  const std::vector<MetricSpec>& weighted_metrics);
  // Resolves names for these shapes (no-op once built).
  void build(const TensorShape& y_true, const TensorShape& y_pred);
  bool built() const;
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight);
  // The metric objects (after build; before it, the objects given directly).
  std::vector<metrics::MetricPtr> metrics() const;
  // Calls fn on each metric, in metrics()' order, without building the list
  // (the model reads its metrics on every step).
  template <typename Fn>
  void for_each_metric(Fn&& fn) const {
    MutexLock lock(mu_);
    for (const Entry& e : entries_) {
      if (e.metric) fn(e.metric);
    }
  }
  void reset_state();

 private:
  struct Entry {
    std::string name;  // a name to resolve ("" when `metric` was given)
    metrics::MetricPtr metric;
    bool weighted;
  };
  mutable Mutex mu_;
  // Written by the constructor and (the metrics) by build() under mu_; read
  // without it once built.
  std::vector<Entry> entries_;
  bool built_ STRATA_GUARDED_BY(mu_) = false;
};

}  // namespace strata::keras::internal
