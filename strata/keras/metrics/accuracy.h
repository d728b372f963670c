#pragma once
// The accuracy metrics of keras.metrics, and their per-example functions.
//
//   auto acc = keras::metrics::SparseCategoricalAccuracy();
//   acc->update_state(strata::constant<int64_t>({2, 1}), logits);   // logits [2, classes]
//   acc->result().item<float>();                                    // fraction correct so far
//   auto top5 = keras::metrics::SparseTopKCategoricalAccuracy({.k = 5});
//   auto bin = keras::metrics::BinaryAccuracy({.threshold = 0.0});  // for logits
//
// Each is a MeanMetricWrapper (mean.h): y_true and y_pred are cast to the
// metric's dtype (float32 by default, so integer labels compare as floats, as
// Keras), the function gives 1 for a match and 0 otherwise per example, and
// the metric keeps their (sample-weighted) mean. Thread-safety: see Metric.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "strata/keras/metrics/mean.h"

namespace strata::keras::metrics {

// --- functions (per-example matches, float32) ----------------------------------

// y_true == y_pred element-wise (shapes must match; y_pred cast to y_true's dtype).
Tensor accuracy(const Tensor& y_true, const Tensor& y_pred);
// mean over the last axis of (y_true == (y_pred > threshold)).
Tensor binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold = 0.5);
// argmax(y_true, -1) == argmax(y_pred, -1).
Tensor categorical_accuracy(const Tensor& y_true, const Tensor& y_pred);
// y_true == argmax(y_pred, -1); y_true of shape [b] or [b, 1] (then the result is [b, 1]).
Tensor sparse_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred);
// Whether y_true is among the k highest scores of y_pred (tf.math.in_top_k:
// ties at the boundary count as in; a row with a non-finite score or a label
// out of range does not match). y_pred of rank > 2 is flattened to [-1, classes].
Tensor sparse_top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, int64_t k = 5);

// --- metrics ---------------------------------------------------------------------

struct AccuracyOptions {
  std::string name = "accuracy";
  std::optional<DType> dtype = std::nullopt;
};
class AccuracyMetric : public MeanMetricWrapper {
 public:
  explicit AccuracyMetric(const AccuracyOptions& options = {});
};
std::shared_ptr<AccuracyMetric> Accuracy(const AccuracyOptions& options = {});

// Keras's order: name, dtype, threshold.
struct BinaryAccuracyOptions {
  std::string name = "binary_accuracy";
  std::optional<DType> dtype = std::nullopt;
  double threshold = 0.5;
};
class BinaryAccuracyMetric : public MeanMetricWrapper {
 public:
  explicit BinaryAccuracyMetric(const BinaryAccuracyOptions& options = {});
  double threshold() const noexcept { return threshold_; }

 private:
  double threshold_;
};
std::shared_ptr<BinaryAccuracyMetric> BinaryAccuracy(const BinaryAccuracyOptions& options = {});

struct CategoricalAccuracyOptions {
  std::string name = "categorical_accuracy";
  std::optional<DType> dtype = std::nullopt;
};
class CategoricalAccuracyMetric : public MeanMetricWrapper {
 public:
  explicit CategoricalAccuracyMetric(const CategoricalAccuracyOptions& options = {});
};
std::shared_ptr<CategoricalAccuracyMetric> CategoricalAccuracy(
    const CategoricalAccuracyOptions& options = {});

struct SparseCategoricalAccuracyOptions {
  std::string name = "sparse_categorical_accuracy";
  std::optional<DType> dtype = std::nullopt;
};
class SparseCategoricalAccuracyMetric : public MeanMetricWrapper {
 public:
  explicit SparseCategoricalAccuracyMetric(const SparseCategoricalAccuracyOptions& options = {});
};
std::shared_ptr<SparseCategoricalAccuracyMetric> SparseCategoricalAccuracy(
    const SparseCategoricalAccuracyOptions& options = {});

// Keras's order: k, name, dtype.
struct SparseTopKCategoricalAccuracyOptions {
  int64_t k = 5;
  std::string name = "sparse_top_k_categorical_accuracy";
  std::optional<DType> dtype = std::nullopt;
};
class SparseTopKCategoricalAccuracyMetric : public MeanMetricWrapper {
 public:
  // InvalidArgumentError unless k >= 1.
  explicit SparseTopKCategoricalAccuracyMetric(
      const SparseTopKCategoricalAccuracyOptions& options = {});
  int64_t k() const noexcept { return k_; }

 private:
  int64_t k_;
};
std::shared_ptr<SparseTopKCategoricalAccuracyMetric> SparseTopKCategoricalAccuracy(
    const SparseTopKCategoricalAccuracyOptions& options = {});

}  // namespace strata::keras::metrics
