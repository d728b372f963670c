#pragma once
// Private to the keras layer: the pieces of Keras's compile_utils.py that
// compile() builds — the loss tracker, metrics wrapping per-example
// functions (MeanMetricWrapper), and the resolution of metric names.
//
// Thread-safety: updates to a metric from several replica threads are safe
// (each state update is one assign_add on a variable); building happens once,
// under a mutex.

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/keras/metric.h"

namespace strata::keras {
class MetricSpec;
}

namespace strata::keras::internal {

// Keras's loss tracker (a Mean named "loss"): the mean of the values given,
// weighted by `weight` (the batch size).
class LossTracker : public metrics::Metric {
 public:
  LossTracker();
  void update(double value, double weight);
  Tensor result() const override;

 protected:
  // The Metric form: values in y_true, weights in sample_weight (Mean's semantics).
  void update_state_impl(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;

 private:
  Variable total_, count_;
};

using PerExampleFn = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;

// keras.metrics.MeanMetricWrapper: the (sample-weighted) mean over all
// examples of fn(y_true, y_pred).
class MeanMetricWrapper : public metrics::Metric {
 public:
  MeanMetricWrapper(std::string name, PerExampleFn fn);
  Tensor result() const override;

 protected:
  void update_state_impl(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;

 private:
  PerExampleFn fn_;
  Variable total_, count_;
};

// Per-example metric functions with Keras 2's definitions.
Tensor sparse_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred);
Tensor categorical_accuracy(const Tensor& y_true, const Tensor& y_pred);
Tensor binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold = 0.5);

// The compiled metrics of a model: resolved from the specs on the first batch
// (the shapes decide what "accuracy" means), then updated every step.
class CompiledMetrics {
 public:
  CompiledMetrics(const std::vector<MetricSpec>& metrics, const std::vector<MetricSpec>& weighted_metrics);
  // Resolves names for these shapes (no-op once built).
  void build(const TensorShape& y_true, const TensorShape& y_pred);
  bool built() const;
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight);
  // The metric objects (after build; before it, the objects given directly).
  std::vector<metrics::MetricPtr> metrics() const;
  void reset_state();

 private:
  struct Entry {
    std::string name;          // a name to resolve ("" when `metric` was given)
    metrics::MetricPtr metric;
    bool weighted;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  bool built_ = false;
};

}  // namespace strata::keras::internal
