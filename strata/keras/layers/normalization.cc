#include "strata/keras/layers/normalization.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/keras/layers/internal/common.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/collective_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras::layers {

BatchNormalizationLayer::BatchNormalizationLayer(const BatchNormalizationOptions& options)
    : Layer("BatchNormalization", "batch_normalization", internal::layer_args(options)),
      options_(options) {
  const std::string who = internal::describe(*this);
  STRATA_CHECK_ARG(options.momentum >= 0.0 && options.momentum <= 1.0, who,
                   ": expected momentum in [0, 1], got ", options.momentum);
  STRATA_CHECK_ARG(options.epsilon >= 0.0, who, ": expected epsilon >= 0, got ", options.epsilon);
}

nlohmann::json BatchNormalizationLayer::get_config() const {
  nlohmann::json config = base_config();
  config["axis"] = options_.axis;
  config["momentum"] = options_.momentum;
  config["epsilon"] = options_.epsilon;
  config["center"] = options_.center;
  config["scale"] = options_.scale;
  config["synchronized"] = options_.synchronized;
  return config;
}

void BatchNormalizationLayer::check_input(const TensorShape& shape) const {
  internal::check_rank(*this, shape, 2, /*at_least=*/true);
  if (rank_ >= 0) {
    internal::check_rank(*this, shape, rank_);
    internal::check_dim(*this, shape, axis_, features_, "the normalised axis");
    return;
  }
  STRATA_CHECK_ARG(options_.axis >= -shape.rank() && options_.axis < shape.rank(),
                   internal::describe(*this), ": expected axis in [", -shape.rank(), ", ",
                   shape.rank(), ") for input shape ", shape, ", got ", options_.axis);
}

TensorShape BatchNormalizationLayer::compute_output_shape(const TensorShape& input_shape) const {
  check_input(input_shape);
  return input_shape;
}

void BatchNormalizationLayer::build_weights(const TensorShape& input_shape) {
  check_input(input_shape);
  const int axis = input_shape.canonical_axis(options_.axis, "BatchNormalization");
  const int64_t c = input_shape.dim(axis);
  STRATA_CHECK_ARG(c > 0, internal::describe(*this), ": expected axis ", options_.axis,
                   " of the input to have a defined dimension, got shape ", input_shape);
  const TensorShape shape{c};
  // Keras's order: gamma, beta, moving_mean, moving_variance.
  if (options_.scale)
    gamma_ = add_weight("gamma", shape, {.initializer = options_.gamma_initializer});
  if (options_.center)
    beta_ = add_weight("beta", shape, {.initializer = options_.beta_initializer});
  const WeightOptions moving{.initializer = nullptr,
                             .trainable = false,
                             .synchronization = VariableSynchronization::ON_READ,
                             .aggregation = VariableAggregation::MEAN};
  WeightOptions mean_options = moving;
  mean_options.initializer = options_.moving_mean_initializer;
  WeightOptions variance_options = moving;
  variance_options.initializer = options_.moving_variance_initializer;
  moving_mean_ = add_weight("moving_mean", shape, mean_options);
  moving_variance_ = add_weight("moving_variance", shape, variance_options);
  axis_ = axis;
  rank_ = input_shape.rank();
  features_ = c;
}

Tensor BatchNormalizationLayer::call(const Tensor& inputs, bool training) {
  check_input(inputs.shape());
  const Tensor x = internal::cast_to(inputs, dtype());
  std::vector<int64_t> broadcast(rank_, 1);
  broadcast[axis_] = features_;
  std::vector<int64_t> reduction;
  for (int i = 0; i < rank_; ++i) {
    if (i != axis_) reduction.push_back(i);
  }
  auto as_broadcast = [&](const Tensor& per_feature) {
    return strata::reshape(per_feature, broadcast);
  };

  Tensor mean, variance;
  // Keras: a frozen BatchNormalization runs in inference mode even when training.
  if (training && trainable()) {
    const ReduceOptions over{.axis = reduction, .keepdims = true};
    if (options_.synchronized) {
      // Keras's synchronized moments: SUM all-reduce of the local sum, sum of
      // squares and example count; variance = E[x^2] - E[x]^2 of the global
      // batch. Every replica makes this call in the same order.
      int64_t count = 1;
      for (int64_t i : reduction) count *= x.shape()[i];
      const Tensor local_count = strata::cast(strata::constant(float(count)), x.dtype());
      const std::vector<Tensor> global = collective_all_reduce(
          {strata::reduce_sum(x, over), strata::reduce_sum(strata::square(x), over), local_count},
          /*mean=*/false);
      mean = global[0] / global[2];
      variance = global[1] / global[2] - strata::square(mean);
    } else {
      mean = strata::reduce_mean(x, over);
      // tf.nn.moments: the variance around a constant mean (its gradient
      // through the mean is zero anyway, since sum(x - mean) = 0).
      variance =
          strata::reduce_mean(strata::squared_difference(x, strata::stop_gradient(mean)), over);
    }
    // TF's assign_moving_average: moving -= (moving - batch) * (1 - momentum).
    const double decay = 1.0 - options_.momentum;
    auto update = [&](const Variable& moving, const Tensor& batch) {
      const Tensor value = strata::reshape(strata::stop_gradient(batch), {features_});
      moving.assign_sub((moving.value() - value) * decay);
    };
    update(moving_mean_, mean);
    update(moving_variance_, variance);
  } else {
    mean = as_broadcast(moving_mean_.value());
    variance = as_broadcast(moving_variance_.value());
  }
  // tf.nn.batch_normalization's arrangement: x * inv + (beta - mean * inv).
  Tensor inv = strata::rsqrt(variance + options_.epsilon);
  if (options_.scale) inv = inv * as_broadcast(gamma_.value());
  const Tensor shift = options_.center ? as_broadcast(beta_.value()) - mean * inv : -(mean * inv);
  return x * inv + shift;
}

std::shared_ptr<BatchNormalizationLayer> BatchNormalization(
    const BatchNormalizationOptions& options) {
  return std::make_shared<BatchNormalizationLayer>(options);
}

LayerNormalizationLayer::LayerNormalizationLayer(const LayerNormalizationOptions& options)
    : Layer("LayerNormalization", "layer_normalization", internal::layer_args(options)),
      options_(options) {
  const std::string who = internal::describe(*this);
  STRATA_CHECK_ARG(!options.axis.empty(), who,
                   ": expected at least one axis, got an empty axis list");
  STRATA_CHECK_ARG(options.epsilon >= 0.0, who, ": expected epsilon >= 0, got ", options.epsilon);
}

std::vector<int> LayerNormalizationLayer::axes_for(const TensorShape& shape) const {
  internal::check_rank(*this, shape, 2, /*at_least=*/true);
  std::vector<int> axes;
  for (int64_t a : options_.axis) {
    STRATA_CHECK_ARG(a >= -shape.rank() && a < shape.rank() && a != 0 && a != -shape.rank(),
                     internal::describe(*this), ": expected axes in [1, ", shape.rank(), ") or [",
                     -shape.rank() + 1, ", -1] for input shape ", shape, ", got axis ",
                     options_.axis);
    axes.push_back(a < 0 ? static_cast<int>(a + shape.rank()) : static_cast<int>(a));
  }
  std::vector<int> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  STRATA_CHECK_ARG(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
                   internal::describe(*this), ": expected distinct axes, got ", options_.axis);
  return sorted;
}

TensorShape LayerNormalizationLayer::compute_output_shape(const TensorShape& input_shape) const {
  axes_for(input_shape);
  if (built()) {
    internal::check_rank(*this, input_shape, built_shape_.rank());
    for (int a : axes_for(built_shape_))
      internal::check_dim(*this, input_shape, a, built_shape_.dim(a), "a normalised axis");
  }
  return input_shape;
}

void LayerNormalizationLayer::build_weights(const TensorShape& input_shape) {
  std::vector<int64_t> param;
  for (int a : axes_for(input_shape)) {
    STRATA_CHECK_ARG(input_shape.dim(a) > 0, internal::describe(*this),
                     ": expected normalised axis ", a, " to have a defined dimension, got shape ",
                     input_shape);
    param.push_back(input_shape.dim(a));
  }
  const TensorShape shape(param);
  if (options_.scale)
    gamma_ = add_weight("gamma", shape, {.initializer = options_.gamma_initializer});
  if (options_.center)
    beta_ = add_weight("beta", shape, {.initializer = options_.beta_initializer});
  built_shape_ = input_shape;
}

Tensor LayerNormalizationLayer::call(const Tensor& inputs, bool /*training*/) {
  compute_output_shape(inputs.shape());
  const Tensor x = internal::cast_to(inputs, dtype());
  const std::vector<int> axes = axes_for(x.shape());
  std::vector<int64_t> broadcast(x.rank(), 1);
  std::vector<int64_t> reduction;
  for (int a : axes) {
    broadcast[a] = x.shape().dim(a);
    reduction.push_back(a);
  }
  const ReduceOptions over{.axis = reduction, .keepdims = true};
  const Tensor mean = strata::reduce_mean(x, over);
  const Tensor variance =
      strata::reduce_mean(strata::squared_difference(x, strata::stop_gradient(mean)), over);
  Tensor inv = strata::rsqrt(variance + options_.epsilon);
  if (options_.scale) inv = inv * strata::reshape(gamma_.value(), broadcast);
  const Tensor shift =
      options_.center ? strata::reshape(beta_.value(), broadcast) - mean * inv : -(mean * inv);
  return x * inv + shift;
}

std::shared_ptr<LayerNormalizationLayer> LayerNormalization(
    const LayerNormalizationOptions& options) {
  return std::make_shared<LayerNormalizationLayer>(options);
}

}  // namespace strata::keras::layers
