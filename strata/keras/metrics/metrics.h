#pragma once
// keras.metrics: every metric, and get() for the strings compile() accepts.
//
//   #include "strata/keras/metrics/metrics.h"
//   namespace keras = strata::keras;
//   auto acc = keras::metrics::SparseCategoricalAccuracy();
//   acc->update_state(labels, logits);
//   acc->result().item<float>();
//   acc->reset_state();
//   auto loss_mean = keras::metrics::Mean({.name = "loss"});
//   loss_mean->update_state(loss);
//   keras::metrics::MetricPtr m = keras::metrics::get("mse");   // MeanSquaredError named "mse"
//
// The base class is in strata/keras/metric.h.

#include <string>

#include "strata/keras/metric.h"
#include "strata/keras/metrics/accuracy.h"
#include "strata/keras/metrics/mean.h"
#include "strata/keras/metrics/regression.h"

namespace strata::keras::metrics {

// A fresh metric for a compile() string, named by that string (as Keras names
// compiled metrics by the identifier given): "accuracy" / "acc",
// "binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy",
// "sparse_top_k_categorical_accuracy", "mean_squared_error" / "mse",
// "mean_absolute_error" / "mae"; the class names ("SparseCategoricalAccuracy",
// ...) give the metric with its default name.
//
// Also "binary_crossentropy", "categorical_crossentropy" and
// "sparse_categorical_crossentropy" (the mean of the loss function, from
// probabilities, as Keras's metrics of those names).
//
// "accuracy" / "acc" give the exact-match Accuracy metric here. Keras's
// compile() instead picks the accuracy from the shapes of y_true / y_pred:
// that is the overload below, which Model::compile uses once it has seen a
// batch. InvalidArgumentError naming an unknown identifier.
MetricPtr get(const std::string& name);

// keras compile_utils.get_metric: for "accuracy" / "acc" (and "crossentropy"
// / "ce"), binary when y_pred's last dimension is 1, else sparse categorical
// when y_true has a lower rank than y_pred or a last dimension of 1 (y_pred's
// > 1), else categorical; named by the identifier. Other names: get(name).
MetricPtr get(const std::string& name, const TensorShape& y_true_shape,
              const TensorShape& y_pred_shape);

}  // namespace strata::keras::metrics
