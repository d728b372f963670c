#pragma once
// keras.Sequential: a linear stack of layers.
//
//   auto model = keras::Sequential({
//       keras::layers::Flatten({.input_shape = {28, 28}}),
//       keras::layers::Dense(128, {.activation = "relu"}),
//       keras::layers::Dense(10)});              // std::shared_ptr<SequentialModel>
//   model->add(keras::layers::Dropout(0.2));
//   Tensor logits = (*model)(images, /*training=*/true);
//
// When the first layer declares an input_shape the model is built at once
// (every layer's weights exist, summary() works before any call), as Keras
// builds a Sequential from its Input; otherwise it builds on the first call
// from the batch's shape. add() after building builds the new layer from the
// previous output shape. A layer whose output shape does not suit the next
// raises InvalidArgumentError naming both. An InputLayer first
// (`Sequential({layers::InputLayer({.input_shape = {5}}), ...})`) gives the
// input shape and is not itself a layer of the model, as in Keras.
//
// Config (Keras 2's Sequential.get_config): {"name": "sequential", "layers":
// [{"class_name": "InputLayer", "config": {...}}, {"class_name": "Dense",
// "config": {...}}, ...]}: an InputLayer named "<first layer>_input" leads
// when the input shape is known from the first layer's input_shape;
// "build_input_shape" is added when the model was built from a call instead.
//
// Thread-safety: as Model (building is not thread-safe).

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "strata/keras/model.h"

namespace strata::keras {

struct SequentialOptions {
  std::string name = "";  // "" = "sequential", "sequential_1", ...
};

class SequentialModel : public Model {
 public:
  explicit SequentialModel(const std::vector<LayerPtr>& layers = {},
                           const SequentialOptions& options = {});

  // Appends a layer (Keras's Sequential.add). InvalidArgumentError for nullptr.
  void add(const LayerPtr& layer);

  TensorShape compute_output_shape(const TensorShape& input_shape) const override;
  // The output shape of each layer, batch dimension -1 (after building).
  std::vector<TensorShape> layer_output_shapes() const;

  nlohmann::json get_config() const override;
  // Keras's Sequential.from_config: the layers remade from their configs (new weights).
  // custom_objects: as layers::deserialize (saving/object_registration.h).
  static std::shared_ptr<SequentialModel> from_config(
      const nlohmann::json& config, const saving::CustomObjects& custom_objects = {});

 protected:
  void build_weights(const TensorShape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  std::vector<LayerPtr> stack_;
  std::optional<TensorShape> input_shape_;
  // Set when the input shape came from an InputLayer or the first layer's
  // input_shape (Keras then has an Input), not from a call.
  std::optional<std::string> input_name_;
};

std::shared_ptr<SequentialModel> Sequential(const std::vector<LayerPtr>& layers = {},
                                            const SequentialOptions& options = {});

}  // namespace strata::keras
