#include "strata/keras/sequential.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/keras/layers/input_layer.h"
#include "strata/keras/layers/serialization.h"

namespace strata::keras {
namespace {

LayerArgs sequential_args(const SequentialOptions& options) {
  LayerArgs args;
  args.name = options.name;
  return args;
}

TensorShape with_batch(const std::vector<int64_t>& example_shape) {
  std::vector<int64_t> dims{-1};
  dims.insert(dims.end(), example_shape.begin(), example_shape.end());
  return TensorShape(dims);
}

}  // namespace

SequentialModel::SequentialModel(const std::vector<LayerPtr>& layers,
                                 const SequentialOptions& options)
    : Model("Sequential", "sequential", sequential_args(options)) {
  for (const LayerPtr& layer : layers) add(layer);
}

std::shared_ptr<SequentialModel> Sequential(const std::vector<LayerPtr>& layers,
                                            const SequentialOptions& options) {
  return std::make_shared<SequentialModel>(layers, options);
}

void SequentialModel::add(const LayerPtr& layer) {
  STRATA_CHECK_ARG(layer != nullptr, "Sequential '", name(),
                   "': add() expected a layer, got nullptr");
  for (const LayerPtr& l : stack_) {
    STRATA_CHECK_ARG(l != layer, "Sequential '", name(), "': layer '", layer->name(),
                     "' is already in the model");
  }
  if (auto* input = dynamic_cast<layers::InputLayerLayer*>(layer.get())) {
    STRATA_CHECK_ARG(stack_.empty() && !built(), "Sequential '", name(), "': an InputLayer ('",
                     layer->name(), "') can only be the first layer");
    input_name_ = layer->name();
    build(input->batch_input_shape());
    return;
  }
  if (stack_.empty() && !built() && layer->declared_input_shape()) {
    stack_.push_back(track_layer(layer));
    input_name_ = layer->name() + "_input";
    build(with_batch(*layer->declared_input_shape()));
    return;
  }
  if (built()) {
    // Keras rebuilds the stack from its input: the new layer gets the previous output shape.
    TensorShape shape = stack_.empty() ? *input_shape_ : layer_output_shapes().back();
    layer->build(shape);
  }
  stack_.push_back(track_layer(layer));
}

void SequentialModel::build_weights(const TensorShape& input_shape) {
  input_shape_ = input_shape;
  TensorShape shape = input_shape;
  for (const LayerPtr& layer : stack_) {
    layer->build(shape);
    shape = layer->compute_output_shape(shape);
  }
}

TensorShape SequentialModel::compute_output_shape(const TensorShape& input_shape) const {
  TensorShape shape = input_shape;
  for (const LayerPtr& layer : stack_) shape = layer->compute_output_shape(shape);
  return shape;
}

std::vector<TensorShape> SequentialModel::layer_output_shapes() const {
  std::vector<TensorShape> out;
  if (!input_shape_) return out;
  std::vector<int64_t> dims = input_shape_->dims();
  if (!dims.empty()) dims[0] = -1;
  TensorShape shape(dims);
  for (const LayerPtr& layer : stack_) {
    shape = layer->compute_output_shape(shape);
    out.push_back(shape);
  }
  return out;
}

nlohmann::json SequentialModel::get_config() const {
  nlohmann::json layer_configs = nlohmann::json::array();
  if (input_name_ && input_shape_) {
    nlohmann::json shape = layers::config_shape(input_shape_->dims());
    layer_configs.push_back(
        {{"class_name", "InputLayer"},
         {"config",
          {{"batch_input_shape", shape},
           {"dtype", std::string(dtype_name(stack_.empty() ? dtype() : stack_[0]->dtype()))},
           {"sparse", false},
           {"ragged", false},
           {"name", *input_name_}}}});
  }
  for (const LayerPtr& layer : stack_) layer_configs.push_back(layers::serialize(*layer));
  nlohmann::json config = {{"name", name()}, {"layers", layer_configs}};
  if (!input_name_ && input_shape_) {
    nlohmann::json shape = layers::config_shape(input_shape_->dims());
    config["build_input_shape"] = shape;
  }
  return config;
}

std::shared_ptr<SequentialModel> SequentialModel::from_config(
    const nlohmann::json& config, const saving::CustomObjects& custom_objects) {
  STRATA_CHECK_ARG(config.is_object() && config.contains("layers") && config["layers"].is_array(),
                   "Sequential.from_config: expected {\"name\": ..., \"layers\": [...]}, got ",
                   config.dump());
  auto model = Sequential({}, {.name = config.value("name", std::string())});
  for (const nlohmann::json& entry : config["layers"])
    model->add(layers::deserialize(entry, custom_objects));
  if (!model->built() && config.contains("build_input_shape") &&
      config["build_input_shape"].is_array()) {
    std::vector<int64_t> dims;
    for (const nlohmann::json& d : config["build_input_shape"])
      dims.push_back(d.is_null() ? -1 : d.get<int64_t>());
    model->build(TensorShape(dims));
  }
  return model;
}

Tensor SequentialModel::call(const Tensor& inputs, bool training) {
  STRATA_CHECK_ARG(!stack_.empty(), "Sequential '", name(), "': the model has no layers");
  Tensor x = inputs;
  for (const LayerPtr& layer : stack_) x = (*layer)(x, training);
  return x;
}

}  // namespace strata::keras
