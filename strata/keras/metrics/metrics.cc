#include "strata/keras/metrics/metrics.h"

#include <algorithm>
#include <cctype>
#include <memory>

#include "strata/base/errors.h"
#include "strata/keras/losses.h"

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
  if (name == "sparse_top_k_categorical_accuracy")
    return SparseTopKCategoricalAccuracy({.name = name});
  if (name == "SparseTopKCategoricalAccuracy") return SparseTopKCategoricalAccuracy();
  if (name == "mean_squared_error" || name == "mse" || name == "MSE")
    return MeanSquaredError({.name = name});
  if (name == "MeanSquaredError") return MeanSquaredError();
  if (name == "mean_absolute_error" || name == "mae" || name == "MAE")
    return MeanAbsoluteError({.name = name});
  if (name == "MeanAbsoluteError") return MeanAbsoluteError();
  if (name == "binary_crossentropy") {
    return std::make_shared<MeanMetricWrapper>(
        [](const Tensor& t, const Tensor& p) { return losses::binary_crossentropy(t, p); }, name);
  }
  if (name == "categorical_crossentropy") {
    return std::make_shared<MeanMetricWrapper>(
        [](const Tensor& t, const Tensor& p) { return losses::categorical_crossentropy(t, p); },
        name);
  }
  if (name == "sparse_categorical_crossentropy") {
    return std::make_shared<MeanMetricWrapper>(
        [](const Tensor& t, const Tensor& p) {
          return losses::sparse_categorical_crossentropy(t, p);
        },
        name);
  }
  STRATA_CHECK_ARG(false, "keras::metrics::get: unknown metric function: '", name, "'");
  return nullptr;
}

MetricPtr get(const std::string& name, const TensorShape& y_true_shape,
              const TensorShape& y_pred_shape) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  const bool is_accuracy = lower == "accuracy" || lower == "acc";
  const bool is_crossentropy = lower == "crossentropy" || lower == "ce";
  if (!is_accuracy && !is_crossentropy) return get(name);
  STRATA_CHECK_ARG(y_true_shape.rank() >= 1 && y_pred_shape.rank() >= 1, "keras::metrics::get('",
                   name, "'): expected y_true and y_pred of rank >= 1, got ", y_true_shape, " and ",
                   y_pred_shape);
  const int64_t t_last = y_true_shape[-1];
  const int64_t p_last = y_pred_shape[-1];
  const bool is_binary = p_last == 1;
  const bool is_sparse_categorical =
      y_true_shape.rank() < y_pred_shape.rank() || (t_last == 1 && p_last > 1);
  if (is_accuracy) {
    if (is_binary) return BinaryAccuracy({.name = name});
    if (is_sparse_categorical) return SparseCategoricalAccuracy({.name = name});
    return CategoricalAccuracy({.name = name});
  }
  return std::make_shared<MeanMetricWrapper>(
      [is_binary, is_sparse_categorical](const Tensor& t, const Tensor& p) {
        if (is_binary) return losses::binary_crossentropy(t, p);
        if (is_sparse_categorical) return losses::sparse_categorical_crossentropy(t, p);
        return losses::categorical_crossentropy(t, p);
      },
      name);
}

}  // namespace strata::keras::metrics
