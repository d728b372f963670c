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
// "accuracy" / "acc" give the exact-match Accuracy metric here. Keras's
// compile() instead chooses binary, categorical or sparse categorical accuracy
// from the loss and the shapes of y_true / y_pred; that resolution belongs to
// Model::compile, which should not pass those two strings to get().
// InvalidArgumentError naming an unknown identifier.
MetricPtr get(const std::string& name);

}  // namespace strata::keras::metrics
