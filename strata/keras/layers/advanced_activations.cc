#include "strata/keras/layers/advanced_activations.h"

#include "strata/base/errors.h"
#include "strata/keras/activations.h"
#include "strata/keras/layers/internal/common.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras::layers {

ReLULayer::ReLULayer(const ReLUOptions& options)
    : Layer("ReLU", "re_lu", internal::layer_args(options)), options_(options) {
  const std::string who = internal::describe(*this);
  STRATA_CHECK_ARG(!options.max_value || *options.max_value >= 0, who,
                   ": expected max_value >= 0, got ", options.max_value.value_or(0));
  STRATA_CHECK_ARG(options.negative_slope >= 0, who, ": expected negative_slope >= 0, got ",
                   options.negative_slope);
}

Tensor ReLULayer::call(const Tensor& inputs, bool /*training*/) {
  return activations::relu(inputs, {.alpha = options_.negative_slope,
                                    .max_value = options_.max_value,
                                    .threshold = options_.threshold});
}

std::shared_ptr<ReLULayer> ReLU(const ReLUOptions& options) {
  return std::make_shared<ReLULayer>(options);
}

LeakyReLULayer::LeakyReLULayer(const AlphaOptions& options)
    : Layer("LeakyReLU", "leaky_re_lu", internal::layer_args(options)),
      alpha_(options.alpha.value_or(0.3)) {
  STRATA_CHECK_ARG(alpha_ >= 0, internal::describe(*this), ": expected alpha >= 0, got ", alpha_);
}

Tensor LeakyReLULayer::call(const Tensor& inputs, bool /*training*/) {
  return strata::leaky_relu(inputs, alpha_);
}

std::shared_ptr<LeakyReLULayer> LeakyReLU(const AlphaOptions& options) {
  return std::make_shared<LeakyReLULayer>(options);
}

ELULayer::ELULayer(const AlphaOptions& options)
    : Layer("ELU", "elu", internal::layer_args(options)), alpha_(options.alpha.value_or(1.0)) {}

Tensor ELULayer::call(const Tensor& inputs, bool /*training*/) {
  return activations::elu(inputs, alpha_);
}

std::shared_ptr<ELULayer> ELU(const AlphaOptions& options) {
  return std::make_shared<ELULayer>(options);
}

SoftmaxLayer::SoftmaxLayer(const SoftmaxOptions& options)
    : Layer("Softmax", "softmax", internal::layer_args(options)), axis_(options.axis) {}

TensorShape SoftmaxLayer::compute_output_shape(const TensorShape& s) const {
  STRATA_CHECK_ARG(s.has_known_rank() && axis_ >= -s.rank() && axis_ < s.rank(),
                   internal::describe(*this), ": expected axis ", axis_,
                   " to be within the input's rank, got shape ", s);
  return s;
}

Tensor SoftmaxLayer::call(const Tensor& inputs, bool /*training*/) {
  compute_output_shape(inputs.shape());
  return strata::softmax(inputs, axis_);
}

std::shared_ptr<SoftmaxLayer> Softmax(const SoftmaxOptions& options) {
  return std::make_shared<SoftmaxLayer>(options);
}

PReLULayer::PReLULayer(const PReLUOptions& options)
    : Layer("PReLU", "p_re_lu", internal::layer_args(options)), options_(options) {}

TensorShape PReLULayer::compute_output_shape(const TensorShape& s) const {
  internal::check_rank(*this, s, 2, /*at_least=*/true);
  if (alpha_.defined()) {
    internal::check_rank(*this, s, alpha_shape_.rank() + 1);
    for (int i = 0; i < alpha_shape_.rank(); ++i) {
      if (alpha_shape_.dim(i) != 1) {
        internal::check_dim(*this, s, i + 1, alpha_shape_.dim(i), "a dimension with its own alpha");
      }
    }
  }
  return s;
}

void PReLULayer::build_weights(const TensorShape& input_shape) {
  compute_output_shape(input_shape);
  std::vector<int64_t> shape(input_shape.dims().begin() + 1, input_shape.dims().end());
  for (int64_t a : options_.shared_axes) {
    STRATA_CHECK_ARG(a >= 1 && a < input_shape.rank(), internal::describe(*this),
                     ": expected shared_axes in [1, ", input_shape.rank(), "), got ",
                     options_.shared_axes);
    shape[a - 1] = 1;
  }
  for (int64_t d : shape) {
    STRATA_CHECK_ARG(d > 0, internal::describe(*this),
                     ": expected defined dimensions outside shared_axes, got shape ", input_shape);
  }
  alpha_shape_ = TensorShape(shape);
  alpha_ = add_weight("alpha", alpha_shape_, {.initializer = options_.alpha_initializer});
}

Tensor PReLULayer::call(const Tensor& inputs, bool /*training*/) {
  compute_output_shape(inputs.shape());
  const Tensor x = internal::cast_to(inputs, dtype());
  // Keras: relu(x) - alpha * relu(-x).
  return strata::relu(x) - alpha_.value() * strata::relu(-x);
}

std::shared_ptr<PReLULayer> PReLU(const PReLUOptions& options) {
  return std::make_shared<PReLULayer>(options);
}

}  // namespace strata::keras::layers
