#include "strata/keras/losses.h"

#include "strata/base/errors.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"

namespace strata::keras::losses {
namespace {
// Keras's backend.epsilon().
constexpr double kEpsilon = 1e-7;

Tensor scalar_like(double v, const Tensor& like) {
  return strata::cast(strata::constant(v), like.dtype());
}
}  // namespace

Tensor reduce(const Tensor& per_example_loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::NONE:
      return per_example_loss;
    case Reduction::SUM:
      return strata::reduce_sum(per_example_loss);
    case Reduction::SUM_OVER_BATCH_SIZE: {
      // TODO(#6): under a strategy the divisor becomes the global batch size.
      const double n = double(per_example_loss.shape().num_elements());
      return strata::divide(strata::reduce_sum(per_example_loss),
                            scalar_like(n > 0 ? n : 1.0, per_example_loss));
    }
  }
  STRATA_INTERNAL_CHECK(false, "unknown Reduction");
  return per_example_loss;
}

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred) {
  Tensor t = strata::cast(y_true, y_pred.dtype());
  return strata::reduce_mean(strata::squared_difference(y_pred, t), {.axis = {-1}});
}

Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred) {
  Tensor t = strata::cast(y_true, y_pred.dtype());
  return strata::reduce_mean(strata::abs(strata::subtract(y_pred, t)), {.axis = {-1}});
}

Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                       bool from_logits) {
  STRATA_CHECK_ARG(y_pred.rank() >= 1, "sparse_categorical_crossentropy: expected y_pred of rank >= 1, got shape ",
                   y_pred.shape());
  Tensor labels = strata::cast(y_true, DType::int64);
  if (y_pred.rank() == labels.rank() && labels.rank() > 0 && labels.shape()[-1] == 1) {
    labels = strata::squeeze(labels, {-1});
  }
  if (from_logits) return strata::nn::sparse_softmax_cross_entropy_with_logits(labels, y_pred);
  Tensor p = strata::minimum(strata::maximum(y_pred, scalar_like(kEpsilon, y_pred)),
                             scalar_like(1.0 - kEpsilon, y_pred));
  // Keras (not from logits) takes log of the clipped probabilities, then the softmax
  // cross-entropy of log-probabilities with the labels: -log p[label].
  Tensor onehot = strata::one_hot(labels, y_pred.shape()[-1]);
  return strata::negative(strata::reduce_sum(
      strata::multiply(strata::cast(onehot, y_pred.dtype()), strata::log(p)), {.axis = {-1}}));
}

}  // namespace strata::keras::losses
