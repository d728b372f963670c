#include "strata/keras/metrics/metrics.h"

#include "strata/base/errors.h"

namespace strata::keras::metrics {

MetricPtr get(const std::string& name) {
  if (name == "accuracy" || name == "acc") return Accuracy({.name = name});
  if (name == "Accuracy") return Accuracy();
  if (name == "binary_accuracy") return BinaryAccuracy({.name = name});
  if (name == "BinaryAccuracy") return BinaryAccuracy();
  if (name == "categorical_accuracy") return CategoricalAccuracy({.name = name});
  if (name == "CategoricalAccuracy") return CategoricalAccuracy();
  if (name == "sparse_categorical_accuracy") return SparseCategoricalAccuracy({.name = name});
  if (name == "SparseCategoricalAccuracy") return SparseCategoricalAccuracy();
  if (name == "sparse_top_k_categorical_accuracy") return SparseTopKCategoricalAccuracy({.name = name});
  if (name == "SparseTopKCategoricalAccuracy") return SparseTopKCategoricalAccuracy();
  if (name == "mean_squared_error" || name == "mse" || name == "MSE") return MeanSquaredError({.name = name});
  if (name == "MeanSquaredError") return MeanSquaredError();
  if (name == "mean_absolute_error" || name == "mae" || name == "MAE") return MeanAbsoluteError({.name = name});
  if (name == "MeanAbsoluteError") return MeanAbsoluteError();
  STRATA_CHECK_ARG(false, "keras::metrics::get: unknown metric function: '", name, "'");
  return nullptr;
}

}  // namespace strata::keras::metrics
