#pragma once
// keras.metrics.Mean and Sum, and MeanMetricWrapper (the base of every
// metric that averages a per-example function of y_true and y_pred).
//
//   auto m = keras::metrics::Mean();
//   m->update_state(strata::constant({1.f, 3.f, 5.f, 7.f}));    // total 16, count 4
//   m->update_state(strata::constant({2.f}), strata::constant({3.f}));  // weighted: +6, +3
//   m->result().item<float>();                                 // 22 / 7
//   auto s = keras::metrics::Sum();
//
// Sample weights follow Keras's Reduce.update_state: values and weights are
// cast to the metric's dtype; a weight of rank one less (more) than the
// values is expanded (squeezed) on its last axis; it is then broadcast to the
// values (a scalar, or per dimension 1 or equal); if it cannot be, the values
// are first averaged (Sum: summed) over their axes beyond the weight's rank.
// Mean: total += sum(values * w), count += sum(w broadcast) (the number of
// values without weights); result = total / count (0 when count is 0). Sum:
// total only. State: variables "total" and "count" (ON_READ + SUM, see metric.h).
// Thread-safety: see Metric.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "strata/keras/metric.h"

namespace strata::keras::metrics {

// Keras's metrics.Reduce: the shared total/count state of Mean, Sum and the
// MeanMetricWrapper metrics.
class ReduceMetric : public Metric {
 public:
  enum class Kind { SUM, WEIGHTED_MEAN };
  ReduceMetric(Kind kind, std::string name, std::optional<DType> dtype);
  Tensor result() const override;

 protected:
  // Accumulates `values` (any shape) weighted by `sample_weight` (undefined = 1).
  void update_values(const Tensor& values, const Tensor& sample_weight);

 private:
  Kind kind_;
  Variable total_;
  Variable count_;  // undefined for SUM
};

struct MeanOptions {
  std::string name = "mean";
  std::optional<DType> dtype = std::nullopt;  // default float32
};

class MeanMetric : public ReduceMetric {
 public:
  explicit MeanMetric(const MeanOptions& options = {});
  void update_state(const Tensor& values, const Tensor& sample_weight = Tensor()) {
    update_values(values, sample_weight);
  }
  // Keras's `m(values)`: update_state(values, sample_weight), then result().
  Tensor operator()(const Tensor& values, const Tensor& sample_weight = Tensor()) {
    update_values(values, sample_weight);
    return result();
  }

 protected:
  // The (y_true, y_pred) form does not apply: InvalidArgumentError.
  void update_state_impl(const Tensor& y_true, const Tensor& y_pred,
                         const Tensor& sample_weight) override;
};

std::shared_ptr<MeanMetric> Mean(const MeanOptions& options = {});

struct SumOptions {
  std::string name = "sum";
  std::optional<DType> dtype = std::nullopt;
};

class SumMetric : public ReduceMetric {
 public:
  explicit SumMetric(const SumOptions& options = {});
  void update_state(const Tensor& values, const Tensor& sample_weight = Tensor()) {
    update_values(values, sample_weight);
  }
  // Keras's `m(values)`: update_state(values, sample_weight), then result().
  Tensor operator()(const Tensor& values, const Tensor& sample_weight = Tensor()) {
    update_values(values, sample_weight);
    return result();
  }

 protected:
  void update_state_impl(const Tensor& y_true, const Tensor& y_pred,
                         const Tensor& sample_weight) override;
};

std::shared_ptr<SumMetric> Sum(const SumOptions& options = {});

using MetricFunction = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;

// keras.metrics.MeanMetricWrapper: the weighted mean of fn(y_true, y_pred).
// As Keras, y_true and y_pred are first cast to the metric's dtype and, when
// their ranks differ by one, a trailing 1 is squeezed from the larger one
// (unless y_pred has exactly one more dimension, of size > 1: class scores).
class MeanMetricWrapper : public ReduceMetric {
 public:
  MeanMetricWrapper(MetricFunction fn, std::string name, std::optional<DType> dtype = std::nullopt);

 protected:
  void update_state_impl(const Tensor& y_true, const Tensor& y_pred,
                         const Tensor& sample_weight) override;

 private:
  MetricFunction fn_;
};

}  // namespace strata::keras::metrics
