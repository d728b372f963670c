#include "strata/keras/layers/dense.h"

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/keras/layers/internal/common.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"

namespace strata::keras::layers {

DenseLayer::DenseLayer(int64_t units, const DenseOptions& options)
    : Layer("Dense", "dense", internal::layer_args(options)),
      units_(units),
      options_(options),
      activation_(internal::activation_for(*this, options.activation)) {
  STRATA_CHECK_ARG(units > 0, "Dense '", name(), "': expected units > 0, got ", units);
  set_activity_regularizer(options.activity_regularizer);
}

void DenseLayer::check_input(const TensorShape& shape) const {
  internal::check_rank(*this, shape, 2, /*at_least=*/true);
  if (input_dim_ >= 0) internal::check_dim(*this, shape, -1, input_dim_, "the last dimension");
}

TensorShape DenseLayer::compute_output_shape(const TensorShape& input_shape) const {
  check_input(input_shape);
  return input_shape.with_dim(input_shape.rank() - 1, units_);
}

void DenseLayer::build_weights(const TensorShape& input_shape) {
  check_input(input_shape);
  const int64_t last = input_shape.dim(-1);
  // Keras: "The last dimension of the inputs to a Dense layer should be defined."
  STRATA_CHECK_ARG(last > 0, internal::describe(*this),
                   ": expected a defined last input dimension, got shape ", input_shape);
  kernel_ = add_weight(
      "kernel", TensorShape{last, units_},
      {.initializer = options_.kernel_initializer, .regularizer = options_.kernel_regularizer});
  if (options_.use_bias) {
    bias_ = add_weight(
        "bias", TensorShape{units_},
        {.initializer = options_.bias_initializer, .regularizer = options_.bias_regularizer});
  }
  input_dim_ = last;
}

Tensor DenseLayer::call(const Tensor& inputs, bool /*training*/) {
  check_input(inputs.shape());
  const Tensor x = internal::cast_to(inputs, dtype());
  Tensor y;
  if (x.rank() == 2) {
    y = strata::matmul(x, kernel_.value());
  } else {
    // tensordot over the last axis: fold the leading axes into rows and back.
    const TensorShape& s = x.shape();
    const int64_t rows = s.num_elements() / input_dim_;
    y = strata::matmul(strata::reshape(x, {rows, input_dim_}), kernel_.value());
    std::vector<int64_t> out = s.dims();
    out.back() = units_;
    y = strata::reshape(y, out);
  }
  if (options_.use_bias) y = strata::nn::bias_add(y, bias_.value());
  return activation_(y);
}

nlohmann::json DenseLayer::get_config() const {
  nlohmann::json config = base_config();
  config["units"] = units_;
  config["activation"] = internal::activation_config(*this, options_.activation);
  config["use_bias"] = options_.use_bias;
  internal::add_regularizer_config(config, options_.kernel_regularizer, options_.bias_regularizer,
                                   options_.activity_regularizer);
  return config;
}

std::shared_ptr<DenseLayer> Dense(int64_t units, const DenseOptions& options) {
  return std::make_shared<DenseLayer>(units, options);
}

}  // namespace strata::keras::layers
