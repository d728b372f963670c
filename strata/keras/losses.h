#pragma once
// Keras loss functions (tf.keras.losses): per-example losses and the reductions
// that turn them into a scalar.
//
//   Tensor per_example = keras::losses::mean_squared_error(y_true, y_pred);   // [batch]
//   Tensor loss = keras::losses::reduce(per_example, keras::losses::Reduction::SUM_OVER_BATCH_SIZE);
//   Tensor xent = keras::losses::sparse_categorical_crossentropy(labels, logits, /*from_logits=*/true);
//
// Per-example functions reduce over the last axis as Keras does (mean for
// MSE/MAE). Under a strategy, the loss-scaling seam is reduce(): Keras divides
// the per-replica SUM by the *global* batch size there (nn::compute_average_loss);
// TODO(#6) the distributed path passes the global batch size. Pure functions; thread-safe.

#include "strata/core/tensor.h"

namespace strata::keras::losses {

// tf.keras.losses.Reduction.
enum class Reduction { NONE, SUM, SUM_OVER_BATCH_SIZE };

// NONE: unchanged; SUM: sum of all elements; SUM_OVER_BATCH_SIZE: sum / number of elements.
Tensor reduce(const Tensor& per_example_loss, Reduction reduction);

// mean((y_true - y_pred)^2, axis=-1)
Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred);
// mean(|y_true - y_pred|, axis=-1)
Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred);
// Integer labels [batch], predictions [batch, classes]. Not from logits: probabilities are
// clipped to [1e-7, 1 - 1e-7] and -log(p[label]) is taken, as Keras.
Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                       bool from_logits = false);

}  // namespace strata::keras::losses
