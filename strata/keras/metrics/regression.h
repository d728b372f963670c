#pragma once
// keras.metrics.MeanSquaredError and MeanAbsoluteError: the running
// (sample-weighted) mean of the per-example mean squared / absolute error
// over the last axis (keras::losses::mean_squared_error / mean_absolute_error).
//
//   auto mse = keras::metrics::MeanSquaredError();
//   mse->update_state(y_true, y_pred);      // y_* [batch, d]
//   mse->result().item<float>();
//
// Thread-safety: see Metric.

#include <memory>
#include <optional>
#include <string>

#include "strata/keras/metrics/mean.h"

namespace strata::keras::metrics {

struct MeanSquaredErrorOptions {
  std::string name = "mean_squared_error";
  std::optional<DType> dtype = std::nullopt;
};
class MeanSquaredErrorMetric : public MeanMetricWrapper {
 public:
  explicit MeanSquaredErrorMetric(const MeanSquaredErrorOptions& options = {});
};
std::shared_ptr<MeanSquaredErrorMetric> MeanSquaredError(
    const MeanSquaredErrorOptions& options = {});

struct MeanAbsoluteErrorOptions {
  std::string name = "mean_absolute_error";
  std::optional<DType> dtype = std::nullopt;
};
class MeanAbsoluteErrorMetric : public MeanMetricWrapper {
 public:
  explicit MeanAbsoluteErrorMetric(const MeanAbsoluteErrorOptions& options = {});
};
std::shared_ptr<MeanAbsoluteErrorMetric> MeanAbsoluteError(
    const MeanAbsoluteErrorOptions& options = {});

}  // namespace strata::keras::metrics
