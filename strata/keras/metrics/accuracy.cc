#include "strata/keras/metrics/accuracy.h"

#include <cmath>
#include <vector>

#include "strata/base/errors.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras::metrics {
namespace {

Tensor as_float32(const Tensor& bools) { return strata::cast(bools, DType::float32); }

// Keras's metrics_utils.sparse_categorical_matches.
Tensor sparse_categorical_matches(const Tensor& y_true_in, const Tensor& y_pred) {
  STRATA_CHECK_ARG(y_pred.rank() >= 1,
                   "sparse_categorical_accuracy: expected y_pred of rank >= 1, got shape ",
                   y_pred.shape());
  Tensor y_true = y_true_in;
  bool reshape_matches = false;
  // y_true [b, 1] against y_pred [b, classes]: compare on [b], report [b, 1].
  if (y_true.rank() == y_pred.rank()) {
    STRATA_CHECK_ARG(y_true.shape()[-1] == 1,
                     "sparse_categorical_accuracy: expected y_true of shape ",
                     y_pred.shape().removed(-1), " or with a trailing 1, got ", y_true_in.shape());
    y_true = strata::squeeze(y_true, {-1});
    reshape_matches = true;
  }
  Tensor predicted = strata::argmax(y_pred, -1);
  // Keras casts the argmax to y_true's dtype when they differ.
  if (predicted.dtype() != y_true.dtype()) predicted = strata::cast(predicted, y_true.dtype());
  STRATA_CHECK_ARG(predicted.shape() == y_true.shape(),
                   "sparse_categorical_accuracy: y_true of shape ", y_true_in.shape(),
                   " does not match y_pred of shape ", y_pred.shape());
  Tensor matches = as_float32(strata::equal(y_true, predicted));
  return reshape_matches ? strata::reshape(matches, y_true_in.shape().dims()) : matches;
}

}  // namespace

Tensor accuracy(const Tensor& y_true, const Tensor& y_pred) {
  STRATA_CHECK_ARG(y_true.shape() == y_pred.shape(), "accuracy: y_true of shape ", y_true.shape(),
                   " is not compatible with y_pred of shape ", y_pred.shape());
  Tensor p = y_pred.dtype() == y_true.dtype() ? y_pred : strata::cast(y_pred, y_true.dtype());
  return as_float32(strata::equal(y_true, p));
}

Tensor binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold) {
  STRATA_CHECK_ARG(y_pred.rank() >= 1, "binary_accuracy: expected y_pred of rank >= 1, got shape ",
                   y_pred.shape());
  Tensor thresholded = strata::cast(y_pred > threshold, y_pred.dtype());
  Tensor t = strata::cast(y_true, y_pred.dtype());
  return strata::reduce_mean(as_float32(strata::equal(t, thresholded)), {.axis = {-1}});
}

Tensor categorical_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  STRATA_CHECK_ARG(y_true.rank() >= 1,
                   "categorical_accuracy: expected y_true of rank >= 1, got shape ",
                   y_true.shape());
  return sparse_categorical_matches(strata::argmax(y_true, -1), y_pred);
}

Tensor sparse_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  return sparse_categorical_matches(y_true, y_pred);
}

Tensor sparse_top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, int64_t k) {
  STRATA_CHECK_ARG(y_pred.rank() >= 1,
                   "sparse_top_k_categorical_accuracy: expected y_pred of rank >= 1, got shape ",
                   y_pred.shape());
  const int64_t classes = y_pred.shape()[-1];
  const int64_t rows = classes == 0 ? 0 : y_pred.num_elements() / classes;
  STRATA_CHECK_ARG(y_true.num_elements() == rows, "sparse_top_k_categorical_accuracy: expected ",
                   rows, " labels for y_pred of shape ", y_pred.shape(), ", got y_true of shape ",
                   y_true.shape());
  const std::vector<double> scores = strata::cast(y_pred, DType::float64).to_vector<double>();
  // Keras casts the labels to int32 (truncating float labels).
  const std::vector<int32_t> labels = strata::cast(y_true, DType::int32).to_vector<int32_t>();
  std::vector<float> matches(static_cast<size_t>(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = scores.data() + r * classes;
    const int64_t label = labels[static_cast<size_t>(r)];
    if (label < 0 || label >= classes) continue;
    bool finite = true;
    int64_t larger = 0;
    for (int64_t c = 0; c < classes; ++c) {
      if (!std::isfinite(row[c])) finite = false;
      if (row[c] > row[label]) ++larger;
    }
    matches[static_cast<size_t>(r)] = finite && larger < k ? 1.0f : 0.0f;
  }
  // The matches have y_true's shape.
  return strata::constant(matches, y_true.shape());
}

AccuracyMetric::AccuracyMetric(const AccuracyOptions& o)
    : MeanMetricWrapper(accuracy, o.name, o.dtype) {}

std::shared_ptr<AccuracyMetric> Accuracy(const AccuracyOptions& options) {
  return std::make_shared<AccuracyMetric>(options);
}

BinaryAccuracyMetric::BinaryAccuracyMetric(const BinaryAccuracyOptions& o)
    : MeanMetricWrapper(
          [t = o.threshold](const Tensor& y, const Tensor& p) { return binary_accuracy(y, p, t); },
          o.name, o.dtype),
      threshold_(o.threshold) {}

std::shared_ptr<BinaryAccuracyMetric> BinaryAccuracy(const BinaryAccuracyOptions& options) {
  return std::make_shared<BinaryAccuracyMetric>(options);
}

CategoricalAccuracyMetric::CategoricalAccuracyMetric(const CategoricalAccuracyOptions& o)
    : MeanMetricWrapper(categorical_accuracy, o.name, o.dtype) {}

std::shared_ptr<CategoricalAccuracyMetric> CategoricalAccuracy(
    const CategoricalAccuracyOptions& options) {
  return std::make_shared<CategoricalAccuracyMetric>(options);
}

SparseCategoricalAccuracyMetric::SparseCategoricalAccuracyMetric(
    const SparseCategoricalAccuracyOptions& o)
    : MeanMetricWrapper(sparse_categorical_accuracy, o.name, o.dtype) {}

std::shared_ptr<SparseCategoricalAccuracyMetric> SparseCategoricalAccuracy(
    const SparseCategoricalAccuracyOptions& options) {
  return std::make_shared<SparseCategoricalAccuracyMetric>(options);
}

SparseTopKCategoricalAccuracyMetric::SparseTopKCategoricalAccuracyMetric(
    const SparseTopKCategoricalAccuracyOptions& o)
    : MeanMetricWrapper(
          [k = o.k](const Tensor& y, const Tensor& p) {
            return sparse_top_k_categorical_accuracy(y, p, k);
          },
          o.name, o.dtype),
      k_(o.k) {
  STRATA_CHECK_ARG(o.k >= 1, "SparseTopKCategoricalAccuracyOptions.k must be >= 1, got ", o.k);
}

std::shared_ptr<SparseTopKCategoricalAccuracyMetric> SparseTopKCategoricalAccuracy(
    const SparseTopKCategoricalAccuracyOptions& options) {
  return std::make_shared<SparseTopKCategoricalAccuracyMetric>(options);
}

}  // namespace strata::keras::metrics
