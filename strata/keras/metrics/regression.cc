#include "strata/keras/metrics/regression.h"

#include "strata/keras/losses.h"

namespace strata::keras::metrics {

MeanSquaredErrorMetric::MeanSquaredErrorMetric(const MeanSquaredErrorOptions& o)
    : MeanMetricWrapper(losses::mean_squared_error, o.name, o.dtype) {}

std::shared_ptr<MeanSquaredErrorMetric> MeanSquaredError(const MeanSquaredErrorOptions& options) {
  return std::make_shared<MeanSquaredErrorMetric>(options);
}

MeanAbsoluteErrorMetric::MeanAbsoluteErrorMetric(const MeanAbsoluteErrorOptions& o)
    : MeanMetricWrapper(losses::mean_absolute_error, o.name, o.dtype) {}

std::shared_ptr<MeanAbsoluteErrorMetric> MeanAbsoluteError(
    const MeanAbsoluteErrorOptions& options) {
  return std::make_shared<MeanAbsoluteErrorMetric>(options);
}

}  // namespace strata::keras::metrics
