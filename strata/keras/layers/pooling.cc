#include "strata/keras/layers/pooling.h"

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/keras/layers/internal/common.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"

namespace strata::keras::layers {
namespace {

// "MaxPooling2D", "GlobalAveragePooling1D", ... and Keras's snake_case default names.
std::string class_of(Pooling2DLayer::Kind kind, bool global, int dims) {
  return str_cat(global ? "Global" : "", kind == Pooling2DLayer::Kind::MAX ? "Max" : "Average",
                 "Pooling", dims, "D");
}

std::string prefix_of(Pooling2DLayer::Kind kind, bool global, int dims) {
  return str_cat(global ? "global_" : "", kind == Pooling2DLayer::Kind::MAX ? "max" : "average",
                 "_pooling", dims, "d");
}

}  // namespace

Pooling2DLayer::Pooling2DLayer(Kind kind, const std::vector<int64_t>& pool_size,
                               const Pooling2DOptions& options)
    : Layer(class_of(kind, false, 2), prefix_of(kind, false, 2), internal::layer_args(options)),
      kind_(kind) {
  const std::string who = internal::describe(*this);
  pool_size_ = internal::normalize_pair(pool_size, who, "pool_size");
  strides_ = options.strides.empty() ? pool_size_
                                     : internal::normalize_pair(options.strides, who, "strides");
  padding_ = internal::normalize_padding(options.padding, who);
  internal::check_channels_last(options.data_format, who);
}

TensorShape Pooling2DLayer::compute_output_shape(const TensorShape& input_shape) const {
  internal::check_rank(*this, input_shape, 4);
  const int64_t h =
      internal::conv_output_length(input_shape.dim(1), pool_size_.first, padding_, strides_.first);
  const int64_t w = internal::conv_output_length(input_shape.dim(2), pool_size_.second, padding_,
                                                 strides_.second);
  STRATA_CHECK_ARG(h != 0 && w != 0, internal::describe(*this),
                   ": expected an input at least as large as pool_size [", pool_size_.first, ", ",
                   pool_size_.second, "], got shape ", input_shape);
  return TensorShape{input_shape.dim(0), h, w, input_shape.dim(3)};
}

Tensor Pooling2DLayer::call(const Tensor& inputs, bool /*training*/) {
  compute_output_shape(inputs.shape());
  const std::vector<int64_t> k{pool_size_.first, pool_size_.second};
  const std::vector<int64_t> s{strides_.first, strides_.second};
  const std::string p = padding_ == "same" ? "SAME" : "VALID";
  return kind_ == Kind::MAX ? nn::max_pool2d(inputs, k, s, p) : nn::avg_pool2d(inputs, k, s, p);
}

nlohmann::json Pooling2DLayer::get_config() const {
  nlohmann::json config = base_config();
  config["pool_size"] = {pool_size_.first, pool_size_.second};
  config["padding"] = padding_;
  config["strides"] = {strides_.first, strides_.second};
  config["data_format"] = "channels_last";
  return config;
}

std::shared_ptr<Pooling2DLayer> MaxPooling2D(const std::vector<int64_t>& pool_size,
                                             const Pooling2DOptions& options) {
  return std::make_shared<Pooling2DLayer>(Pooling2DLayer::Kind::MAX, pool_size, options);
}

std::shared_ptr<Pooling2DLayer> AveragePooling2D(const std::vector<int64_t>& pool_size,
                                                 const Pooling2DOptions& options) {
  return std::make_shared<Pooling2DLayer>(Pooling2DLayer::Kind::AVERAGE, pool_size, options);
}

GlobalPooling2DLayer::GlobalPooling2DLayer(Kind kind, const GlobalPooling2DOptions& options)
    : Layer(class_of(kind, true, 2), prefix_of(kind, true, 2), internal::layer_args(options)),
      kind_(kind),
      keepdims_(options.keepdims) {
  internal::check_channels_last(options.data_format, internal::describe(*this));
}

TensorShape GlobalPooling2DLayer::compute_output_shape(const TensorShape& input_shape) const {
  internal::check_rank(*this, input_shape, 4);
  if (keepdims_) return TensorShape{input_shape.dim(0), 1, 1, input_shape.dim(3)};
  return TensorShape{input_shape.dim(0), input_shape.dim(3)};
}

Tensor GlobalPooling2DLayer::call(const Tensor& inputs, bool /*training*/) {
  compute_output_shape(inputs.shape());
  const ReduceOptions over_hw{.axis = {1, 2}, .keepdims = keepdims_};
  return kind_ == Kind::MAX ? strata::reduce_max(inputs, over_hw)
                            : strata::reduce_mean(inputs, over_hw);
}

std::shared_ptr<GlobalPooling2DLayer> GlobalMaxPooling2D(const GlobalPooling2DOptions& options) {
  return std::make_shared<GlobalPooling2DLayer>(GlobalPooling2DLayer::Kind::MAX, options);
}

std::shared_ptr<GlobalPooling2DLayer> GlobalAveragePooling2D(
    const GlobalPooling2DOptions& options) {
  return std::make_shared<GlobalPooling2DLayer>(GlobalPooling2DLayer::Kind::AVERAGE, options);
}

Pooling1DLayer::Pooling1DLayer(Kind kind, int64_t pool_size, const Pooling1DOptions& options)
    : Layer(class_of(kind, false, 1), prefix_of(kind, false, 1), internal::layer_args(options)),
      kind_(kind),
      pool_size_(pool_size),
      strides_(options.strides.value_or(pool_size)) {
  const std::string who = internal::describe(*this);
  STRATA_CHECK_ARG(pool_size > 0, who, ": expected pool_size > 0, got ", pool_size);
  STRATA_CHECK_ARG(strides_ > 0, who, ": expected strides > 0, got ", strides_);
  padding_ = internal::normalize_padding(options.padding, who);
  internal::check_channels_last(options.data_format, who);
}

TensorShape Pooling1DLayer::compute_output_shape(const TensorShape& input_shape) const {
  internal::check_rank(*this, input_shape, 3);
  const int64_t steps =
      internal::conv_output_length(input_shape.dim(1), pool_size_, padding_, strides_);
  STRATA_CHECK_ARG(steps != 0, internal::describe(*this),
                   ": expected an input at least as long as pool_size ", pool_size_, ", got shape ",
                   input_shape);
  return TensorShape{input_shape.dim(0), steps, input_shape.dim(2)};
}

Tensor Pooling1DLayer::call(const Tensor& inputs, bool /*training*/) {
  compute_output_shape(inputs.shape());
  const Tensor image = strata::expand_dims(inputs, 1);  // [b, 1, steps, c]
  const std::vector<int64_t> k{1, pool_size_}, s{1, strides_};
  const std::string p = padding_ == "same" ? "SAME" : "VALID";
  const Tensor y =
      kind_ == Kind::MAX ? nn::max_pool2d(image, k, s, p) : nn::avg_pool2d(image, k, s, p);
  return strata::squeeze(y, {1});
}

std::shared_ptr<Pooling1DLayer> MaxPooling1D(int64_t pool_size, const Pooling1DOptions& options) {
  return std::make_shared<Pooling1DLayer>(Pooling1DLayer::Kind::MAX, pool_size, options);
}

std::shared_ptr<Pooling1DLayer> AveragePooling1D(int64_t pool_size,
                                                 const Pooling1DOptions& options) {
  return std::make_shared<Pooling1DLayer>(Pooling1DLayer::Kind::AVERAGE, pool_size, options);
}

GlobalPooling1DLayer::GlobalPooling1DLayer(Kind kind, const GlobalPooling2DOptions& options)
    : Layer(class_of(kind, true, 1), prefix_of(kind, true, 1), internal::layer_args(options)),
      kind_(kind),
      keepdims_(options.keepdims) {
  internal::check_channels_last(options.data_format, internal::describe(*this));
}

TensorShape GlobalPooling1DLayer::compute_output_shape(const TensorShape& input_shape) const {
  internal::check_rank(*this, input_shape, 3);
  if (keepdims_) return TensorShape{input_shape.dim(0), 1, input_shape.dim(2)};
  return TensorShape{input_shape.dim(0), input_shape.dim(2)};
}

Tensor GlobalPooling1DLayer::call(const Tensor& inputs, bool /*training*/) {
  compute_output_shape(inputs.shape());
  const ReduceOptions over_steps{.axis = {1}, .keepdims = keepdims_};
  return kind_ == Kind::MAX ? strata::reduce_max(inputs, over_steps)
                            : strata::reduce_mean(inputs, over_steps);
}

std::shared_ptr<GlobalPooling1DLayer> GlobalMaxPooling1D(const GlobalPooling2DOptions& options) {
  return std::make_shared<GlobalPooling1DLayer>(GlobalPooling1DLayer::Kind::MAX, options);
}

std::shared_ptr<GlobalPooling1DLayer> GlobalAveragePooling1D(
    const GlobalPooling2DOptions& options) {
  return std::make_shared<GlobalPooling1DLayer>(GlobalPooling1DLayer::Kind::AVERAGE, options);
}

}  // namespace strata::keras::layers
