#pragma once
// keras.Input and keras.layers.InputLayer: the entry points of a functional model.
//
//   KerasTensor inputs = keras::Input({784}, {.name = "digits"});   // shape (None, 784)
//   KerasTensor x = (*keras::layers::Dense(64, {.activation = "relu"}))(inputs);
//   auto model = keras::models::Model(inputs, (*keras::layers::Dense(10))(x));
//
//   auto layer = keras::layers::InputLayer({.input_shape = {28, 28}});
//   layer->output();                                                 // its KerasTensor
//
// An InputLayer holds no weights; called on a tensor it returns the tensor.
// Unnamed inputs are "input_1", "input_2", ... (Keras counts them from 1).
// Thread-safety: as Layer.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/keras/keras_tensor.h"
#include "strata/keras/layer.h"

namespace strata::keras {

// tf.keras.Input's arguments after `shape`, in Keras's order (sparse, tensor,
// ragged and type_spec are not supported and have no fields).
struct InputOptions {
  std::optional<int64_t> batch_size = std::nullopt;  // None: any batch size
  std::string name = "";                             // "" = "input_1", "input_2", ...
  DType dtype = DType::float32;                      // Keras's floatx()
};

namespace layers {

// tf.keras.layers.InputLayer's arguments, in Keras's order.
struct InputLayerOptions {
  OptionalShape input_shape = std::nullopt;  // required: the shape of one example
  std::optional<int64_t> batch_size = std::nullopt;
  DType dtype = DType::float32;
  std::string name = "";
};

class InputLayerLayer : public Layer {
 public:
  // InvalidArgumentError without an input_shape or with a batch_size <= 0.
  explicit InputLayerLayer(const InputLayerOptions& options);

  // The batch shape: {batch_size or -1, input_shape...}.
  const TensorShape& batch_input_shape() const noexcept { return batch_input_shape_; }
  // The KerasTensor this layer produces: every call returns the same node
  // while any KerasTensor of it is alive (made anew after that).
  KerasTensor output();

  TensorShape compute_output_shape(const TensorShape& input_shape) const override {
    return input_shape;
  }
  // {"batch_input_shape": [null, 784], "dtype": "float32", "sparse": false,
  //  "ragged": false, "name": "input_1"}, as Keras 2 writes it.
  nlohmann::json get_config() const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  TensorShape batch_input_shape_;
  // Weak: the node holds this layer, so a strong reference back would keep
  // both alive for ever.
  std::weak_ptr<const Node> output_node_;
};

std::shared_ptr<InputLayerLayer> InputLayer(const InputLayerOptions& options);

}  // namespace layers

// tf.keras.Input(shape): the KerasTensor of a new InputLayer. `shape` is one
// example's shape (no batch dimension); -1 marks an unknown dimension.
KerasTensor Input(const std::vector<int64_t>& shape, const InputOptions& options = {});

}  // namespace strata::keras
