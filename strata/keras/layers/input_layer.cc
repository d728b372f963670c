#include "strata/keras/layers/input_layer.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/keras/layers/internal/common.h"
#include "strata/keras/layers/serialization.h"

namespace strata::keras {
namespace layers {
namespace {

LayerArgs input_layer_args(const InputLayerOptions& options) {
  STRATA_CHECK_ARG(options.input_shape.has_value(),
                   "InputLayer: expected an input_shape (the shape of one example), got none");
  STRATA_CHECK_ARG(!options.batch_size || *options.batch_size > 0,
                   "InputLayer: batch_size must be positive, got ", options.batch_size.value_or(0));
  LayerArgs args;
  args.name =
      options.name.empty() ? unique_layer_name("input", /*zero_based=*/false) : options.name;
  args.dtype = options.dtype;
  args.input_shape = options.input_shape;
  return args;
}

TensorShape batch_shape(const InputLayerOptions& options) {
  std::vector<int64_t> dims{options.batch_size.value_or(-1)};
  dims.insert(dims.end(), options.input_shape->begin(), options.input_shape->end());
  return TensorShape(dims);
}

}  // namespace

InputLayerLayer::InputLayerLayer(const InputLayerOptions& options)
    : Layer("InputLayer", "input", input_layer_args(options)),
      batch_input_shape_(batch_shape(options)) {
  mark_built();
}

std::shared_ptr<InputLayerLayer> InputLayer(const InputLayerOptions& options) {
  return std::make_shared<InputLayerLayer>(options);
}

KerasTensor InputLayerLayer::output() {
  std::shared_ptr<const Node> node = output_node_.lock();
  if (node == nullptr) {
    auto self = std::static_pointer_cast<Layer>(shared_from_this());
    node = std::make_shared<Node>(Node{self, {}, false, 0});
    output_node_ = node;
  }
  return KerasTensor(batch_input_shape_, dtype(), std::move(node));
}

Tensor InputLayerLayer::call(const Tensor& inputs, bool) {
  STRATA_CHECK_ARG(inputs.shape().rank() == batch_input_shape_.rank() &&
                       TensorShape(inputs.shape()).is_compatible_with(batch_input_shape_),
                   internal::describe(*this), ": expected shape ", batch_input_shape_.to_string(),
                   ", got ", inputs.shape().to_string());
  return inputs;
}

nlohmann::json InputLayerLayer::get_config() const {
  nlohmann::json shape = layers::config_shape(batch_input_shape_.dims());
  return {{"batch_input_shape", shape},
          {"dtype", std::string(dtype_name(dtype()))},
          {"sparse", false},
          {"ragged", false},
          {"name", name()}};
}

}  // namespace layers

KerasTensor Input(const std::vector<int64_t>& shape, const InputOptions& options) {
  for (int64_t d : shape) {
    STRATA_CHECK_ARG(d > 0 || d == -1,
                     "Input: shape dimensions must be positive (or -1 for "
                     "unknown), got ",
                     shape);
  }
  return layers::InputLayer({.input_shape = shape,
                             .batch_size = options.batch_size,
                             .dtype = options.dtype,
                             .name = options.name})
      ->output();
}

}  // namespace strata::keras
