#include "strata/keras/layers/conv.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/keras/layers/internal/common.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/nn_ops.h"

namespace strata::keras::layers {
namespace {

// Grouped convolution: group g sees input channels [g*C/G, (g+1)*C/G) and
// produces filters [g*F/G, (g+1)*F/G), Keras's channel layout.
Tensor grouped_conv2d(const Tensor& x, const Tensor& kernel, const nn::Conv2DOptions& conv,
                      int64_t groups) {
  if (groups == 1) return nn::conv2d(x, kernel, conv);
  const std::vector<Tensor> xs = strata::split(x, groups, /*axis=*/3);
  const std::vector<Tensor> ks = strata::split(kernel, groups, /*axis=*/3);
  std::vector<Tensor> ys;
  for (size_t g = 0; g < xs.size(); ++g) ys.push_back(nn::conv2d(xs[g], ks[g], conv));
  return strata::concat(ys, /*axis=*/3);
}

}  // namespace

Conv2DLayer::Conv2DLayer(int64_t filters, const std::vector<int64_t>& kernel_size,
                         const Conv2DOptions& options)
    : Layer("Conv2D", "conv2d", internal::layer_args(options)),
      filters_(filters),
      options_(options),
      activation_(internal::activation_for(*this, options.activation)) {
  const std::string who = internal::describe(*this);
  set_activity_regularizer(options.activity_regularizer);
  STRATA_CHECK_ARG(filters > 0, who, ": expected filters > 0, got ", filters);
  kernel_size_ = internal::normalize_pair(kernel_size, who, "kernel_size");
  strides_ = internal::normalize_pair(options.strides, who, "strides");
  dilation_ = internal::normalize_pair(options.dilation_rate, who, "dilation_rate");
  padding_ = internal::normalize_padding(options.padding, who);
  internal::check_channels_last(options.data_format, who);
  // tf.nn.convolution refuses the combination; tf.keras inherits the refusal.
  STRATA_CHECK_ARG((strides_.first == 1 && strides_.second == 1) ||
                       (dilation_.first == 1 && dilation_.second == 1),
                   who, ": expected strides == 1 when dilation_rate > 1, got strides ",
                   options.strides, " and dilation_rate ", options.dilation_rate);
  STRATA_CHECK_ARG(options.groups > 0 && filters % options.groups == 0, who,
                   ": expected groups > 0 dividing filters = ", filters,
                   ", got groups = ", options.groups);
}

void Conv2DLayer::check_input(const TensorShape& shape) const {
  internal::check_rank(*this, shape, 4);
  if (input_channels_ >= 0)
    internal::check_dim(*this, shape, 3, input_channels_, "the channel dimension");
}

TensorShape Conv2DLayer::compute_output_shape(const TensorShape& input_shape) const {
  check_input(input_shape);
  const int64_t h = internal::conv_output_length(input_shape.dim(1), kernel_size_.first, padding_,
                                                 strides_.first, dilation_.first);
  const int64_t w = internal::conv_output_length(input_shape.dim(2), kernel_size_.second, padding_,
                                                 strides_.second, dilation_.second);
  STRATA_CHECK_ARG(h != 0 && w != 0, internal::describe(*this),
                   ": expected an input at least as large as the (dilated) kernel, got shape ",
                   input_shape, " for kernel_size [", kernel_size_.first, ", ", kernel_size_.second,
                   "]");
  return TensorShape{input_shape.dim(0), h, w, filters_};
}

void Conv2DLayer::build_weights(const TensorShape& input_shape) {
  check_input(input_shape);
  const int64_t channels = input_shape.dim(3);
  STRATA_CHECK_ARG(channels > 0, internal::describe(*this),
                   ": expected a defined channel dimension, got shape ", input_shape);
  STRATA_CHECK_ARG(channels % options_.groups == 0, internal::describe(*this),
                   ": expected input channels (", channels,
                   ") divisible by groups = ", options_.groups, ", got shape ", input_shape);
  kernel_ = add_weight(
      "kernel",
      TensorShape{kernel_size_.first, kernel_size_.second, channels / options_.groups, filters_},
      {.initializer = options_.kernel_initializer, .regularizer = options_.kernel_regularizer});
  if (options_.use_bias) {
    bias_ = add_weight(
        "bias", TensorShape{filters_},
        {.initializer = options_.bias_initializer, .regularizer = options_.bias_regularizer});
  }
  input_channels_ = channels;
}

Tensor Conv2DLayer::call(const Tensor& inputs, bool /*training*/) {
  compute_output_shape(inputs.shape());  // validates rank, channels and size
  const Tensor x = internal::cast_to(inputs, dtype());
  const nn::Conv2DOptions conv{.strides = {strides_.first, strides_.second},
                               .padding = padding_ == "same" ? "SAME" : "VALID",
                               .dilations = {dilation_.first, dilation_.second}};
  Tensor y = grouped_conv2d(x, kernel_.value(), conv, options_.groups);
  if (options_.use_bias) y = nn::bias_add(y, bias_.value());
  return activation_(y);
}

nlohmann::json Conv2DLayer::get_config() const {
  nlohmann::json config = base_config();
  config["filters"] = filters_;
  config["kernel_size"] = {kernel_size_.first, kernel_size_.second};
  config["strides"] = {strides_.first, strides_.second};
  config["padding"] = padding_;
  config["data_format"] = "channels_last";
  config["dilation_rate"] = {dilation_.first, dilation_.second};
  config["groups"] = options_.groups;
  config["activation"] = internal::activation_config(*this, options_.activation);
  config["use_bias"] = options_.use_bias;
  internal::add_regularizer_config(config, options_.kernel_regularizer, options_.bias_regularizer,
                                   options_.activity_regularizer);
  return config;
}

std::shared_ptr<Conv2DLayer> Conv2D(int64_t filters, const std::vector<int64_t>& kernel_size,
                                    const Conv2DOptions& options) {
  return std::make_shared<Conv2DLayer>(filters, kernel_size, options);
}

std::shared_ptr<Conv2DLayer> Conv2D(int64_t filters, int64_t kernel_size,
                                    const Conv2DOptions& options) {
  return std::make_shared<Conv2DLayer>(filters, std::vector<int64_t>{kernel_size}, options);
}

Conv1DLayer::Conv1DLayer(int64_t filters, int64_t kernel_size, const Conv1DOptions& options)
    : Layer("Conv1D", "conv1d", internal::layer_args(options)),
      filters_(filters),
      kernel_size_(kernel_size),
      options_(options),
      activation_(internal::activation_for(*this, options.activation)) {
  const std::string who = internal::describe(*this);
  STRATA_CHECK_ARG(filters > 0, who, ": expected filters > 0, got ", filters);
  STRATA_CHECK_ARG(kernel_size > 0, who, ": expected kernel_size > 0, got ", kernel_size);
  STRATA_CHECK_ARG(options.strides > 0, who, ": expected strides > 0, got ", options.strides);
  STRATA_CHECK_ARG(options.dilation_rate > 0, who, ": expected dilation_rate > 0, got ",
                   options.dilation_rate);
  padding_ = internal::normalize_padding(options.padding, who, /*allow_causal=*/true);
  internal::check_channels_last(options.data_format, who);
  STRATA_CHECK_ARG(options.strides == 1 || options.dilation_rate == 1, who,
                   ": expected strides == 1 when dilation_rate > 1, got strides ", options.strides,
                   " and dilation_rate ", options.dilation_rate);
  STRATA_CHECK_ARG(options.groups > 0 && filters % options.groups == 0, who,
                   ": expected groups > 0 dividing filters = ", filters,
                   ", got groups = ", options.groups);
}

void Conv1DLayer::check_input(const TensorShape& shape) const {
  internal::check_rank(*this, shape, 3);
  if (input_channels_ >= 0)
    internal::check_dim(*this, shape, 2, input_channels_, "the channel dimension");
}

TensorShape Conv1DLayer::compute_output_shape(const TensorShape& input_shape) const {
  check_input(input_shape);
  // Keras's conv_output_length treats "causal" like "same" (out = ceil(in / stride)).
  const int64_t steps = internal::conv_output_length(input_shape.dim(1), kernel_size_,
                                                     padding_ == "valid" ? "valid" : "same",
                                                     options_.strides, options_.dilation_rate);
  STRATA_CHECK_ARG(steps != 0, internal::describe(*this),
                   ": expected an input at least as long as the (dilated) kernel, got shape ",
                   input_shape, " for kernel_size ", kernel_size_);
  return TensorShape{input_shape.dim(0), steps, filters_};
}

void Conv1DLayer::build_weights(const TensorShape& input_shape) {
  check_input(input_shape);
  const int64_t channels = input_shape.dim(2);
  STRATA_CHECK_ARG(channels > 0, internal::describe(*this),
                   ": expected a defined channel dimension, got shape ", input_shape);
  STRATA_CHECK_ARG(channels % options_.groups == 0, internal::describe(*this),
                   ": expected input channels (", channels,
                   ") divisible by groups = ", options_.groups, ", got shape ", input_shape);
  kernel_ = add_weight("kernel", TensorShape{kernel_size_, channels / options_.groups, filters_},
                       {.initializer = options_.kernel_initializer});
  if (options_.use_bias) {
    bias_ = add_weight("bias", TensorShape{filters_}, {.initializer = options_.bias_initializer});
  }
  input_channels_ = channels;
}

Tensor Conv1DLayer::call(const Tensor& inputs, bool /*training*/) {
  compute_output_shape(inputs.shape());
  Tensor x = internal::cast_to(inputs, dtype());
  std::string padding = padding_ == "same" ? "SAME" : "VALID";
  if (padding_ == "causal") {
    x = strata::pad(x, {{0, 0}, {(kernel_size_ - 1) * options_.dilation_rate, 0}, {0, 0}});
  }
  // [b, steps, c] -> [b, 1, steps, c] and kernel [k, c, f] -> [1, k, c, f].
  const nn::Conv2DOptions conv{.strides = {1, options_.strides},
                               .padding = padding,
                               .dilations = {1, options_.dilation_rate}};
  Tensor y = grouped_conv2d(strata::expand_dims(x, 1), strata::expand_dims(kernel_.value(), 0),
                            conv, options_.groups);
  y = strata::squeeze(y, {1});
  if (options_.use_bias) y = nn::bias_add(y, bias_.value());
  return activation_(y);
}

std::shared_ptr<Conv1DLayer> Conv1D(int64_t filters, int64_t kernel_size,
                                    const Conv1DOptions& options) {
  return std::make_shared<Conv1DLayer>(filters, kernel_size, options);
}

Conv2DTransposeLayer::Conv2DTransposeLayer(int64_t filters, const std::vector<int64_t>& kernel_size,
                                           const Conv2DTransposeOptions& options)
    : Layer("Conv2DTranspose", "conv2d_transpose", internal::layer_args(options)),
      filters_(filters),
      options_(options),
      activation_(internal::activation_for(*this, options.activation)) {
  const std::string who = internal::describe(*this);
  STRATA_CHECK_ARG(filters > 0, who, ": expected filters > 0, got ", filters);
  kernel_size_ = internal::normalize_pair(kernel_size, who, "kernel_size");
  strides_ = internal::normalize_pair(options.strides, who, "strides");
  dilation_ = internal::normalize_pair(options.dilation_rate, who, "dilation_rate");
  padding_ = internal::normalize_padding(options.padding, who);
  internal::check_channels_last(options.data_format, who);
  STRATA_CHECK_ARG((strides_.first == 1 && strides_.second == 1) ||
                       (dilation_.first == 1 && dilation_.second == 1),
                   who, ": expected strides == 1 when dilation_rate > 1, got strides ",
                   options.strides, " and dilation_rate ", options.dilation_rate);
  if (!options.output_padding.empty()) {
    STRATA_CHECK_ARG(options.output_padding.size() <= 2, who,
                     ": expected output_padding to have 1 or 2 values, got ",
                     options.output_padding);
    const int64_t ph = options.output_padding[0];
    const int64_t pw = options.output_padding.size() == 2 ? options.output_padding[1] : ph;
    // Keras: "Strides must be greater than output padding."
    STRATA_CHECK_ARG(ph >= 0 && pw >= 0 && ph < strides_.first && pw < strides_.second, who,
                     ": expected 0 <= output_padding < strides, got output_padding ",
                     options.output_padding, " and strides ", options.strides);
    output_padding_ = std::pair<int64_t, int64_t>{ph, pw};
  }
}

void Conv2DTransposeLayer::check_input(const TensorShape& shape) const {
  internal::check_rank(*this, shape, 4);
  if (input_channels_ >= 0)
    internal::check_dim(*this, shape, 3, input_channels_, "the channel dimension");
}

int64_t Conv2DTransposeLayer::output_length(int64_t in, int axis) const {
  if (in < 0) return -1;
  const int64_t k = axis == 0 ? kernel_size_.first : kernel_size_.second;
  const int64_t s = axis == 0 ? strides_.first : strides_.second;
  const int64_t d = axis == 0 ? dilation_.first : dilation_.second;
  const int64_t dk = (k - 1) * d + 1;
  if (!output_padding_) {
    return padding_ == "valid" ? in * s + std::max<int64_t>(dk - s, 0) : in * s;
  }
  const int64_t pad = padding_ == "same" ? dk / 2 : 0;
  const int64_t extra = axis == 0 ? output_padding_->first : output_padding_->second;
  return (in - 1) * s + dk - 2 * pad + extra;
}

TensorShape Conv2DTransposeLayer::compute_output_shape(const TensorShape& input_shape) const {
  check_input(input_shape);
  return TensorShape{input_shape.dim(0), output_length(input_shape.dim(1), 0),
                     output_length(input_shape.dim(2), 1), filters_};
}

void Conv2DTransposeLayer::build_weights(const TensorShape& input_shape) {
  check_input(input_shape);
  const int64_t channels = input_shape.dim(3);
  STRATA_CHECK_ARG(channels > 0, internal::describe(*this),
                   ": expected a defined channel dimension, got shape ", input_shape);
  kernel_ =
      add_weight("kernel", TensorShape{kernel_size_.first, kernel_size_.second, filters_, channels},
                 {.initializer = options_.kernel_initializer});
  if (options_.use_bias) {
    bias_ = add_weight("bias", TensorShape{filters_}, {.initializer = options_.bias_initializer});
  }
  input_channels_ = channels;
}

Tensor Conv2DTransposeLayer::call(const Tensor& inputs, bool /*training*/) {
  const TensorShape out = compute_output_shape(inputs.shape());
  const Tensor x = internal::cast_to(inputs, dtype());
  // tf.nn.conv2d_transpose is the gradient of conv2d with respect to its input.
  Tensor y = nn::conv2d_backprop_input(out, kernel_.value(), x,
                                       {.strides = {strides_.first, strides_.second},
                                        .padding = padding_ == "same" ? "SAME" : "VALID",
                                        .dilations = {dilation_.first, dilation_.second}});
  if (options_.use_bias) y = nn::bias_add(y, bias_.value());
  return activation_(y);
}

std::shared_ptr<Conv2DTransposeLayer> Conv2DTranspose(int64_t filters,
                                                      const std::vector<int64_t>& kernel_size,
                                                      const Conv2DTransposeOptions& options) {
  return std::make_shared<Conv2DTransposeLayer>(filters, kernel_size, options);
}

}  // namespace strata::keras::layers
