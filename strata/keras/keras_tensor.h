#pragma once
// KerasTensor: a symbolic tensor of Keras's functional API.
//
//   KerasTensor inputs = keras::Input({784});                    // shape (None, 784)
//   KerasTensor x = (*keras::layers::Dense(64, {.activation = "relu"}))(inputs);
//   x.shape();                                                    // [-1, 64]
//   x.node()->layer->name();                                      // "dense"
//
// A KerasTensor holds no values: it is the shape and dtype a layer call would
// produce, and the Node (the layer call) that produced it. Calling a layer on
// KerasTensors builds the layer from their shapes and records a new Node;
// keras::models::Model(inputs, outputs) (functional.h) then runs that graph of
// layer calls on real tensors. The batch dimension is -1 (Keras's None).
//
// Values: copies share the node. Immutable, so thread-safe.

#include <memory>
#include <utility>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::keras {

class Layer;
struct Node;

class KerasTensor {
 public:
  KerasTensor() = default;
  KerasTensor(TensorShape shape, DType dtype, std::shared_ptr<const Node> node)
      : shape_(std::move(shape)), dtype_(dtype), node_(std::move(node)) {}

  bool defined() const noexcept { return node_ != nullptr; }
  // Batch dimension first, -1 where unknown.
  const TensorShape& shape() const noexcept { return shape_; }
  DType dtype() const noexcept { return dtype_; }
  // The layer call that produced this tensor.
  const std::shared_ptr<const Node>& node() const noexcept { return node_; }

 private:
  TensorShape shape_;
  DType dtype_ = DType::float32;
  std::shared_ptr<const Node> node_;
};

// One call of a layer on KerasTensors (Keras's Node): its inputs, in call
// order, and whether they were passed as a list (`Add()([a, b])`, a merge
// layer) or as one tensor. An InputLayer's node has no inputs.
struct Node {
  std::shared_ptr<Layer> layer;
  std::vector<KerasTensor> inputs;
  bool list_input = false;
  // Which call of `layer` this is (0 for its first): Keras's index into
  // layer._inbound_nodes, which a functional config's node references use.
  int call_index = 0;
  bool is_input() const noexcept { return inputs.empty(); }
};

}  // namespace strata::keras
