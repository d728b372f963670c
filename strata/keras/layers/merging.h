#pragma once
// keras.layers merge layers: Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate.
//
//   KerasTensor a = keras::Input({16}), b = keras::Input({16});
//   KerasTensor sum = (*keras::layers::Add())({a, b});                  // (None, 16)
//   KerasTensor both = (*keras::layers::Concatenate())({a, b});         // (None, 32)
//   Tensor t = (*keras::layers::Add())({x, y});                         // on tensors too
//
// A merge layer takes a list of at least two inputs (one tensor alone is
// InvalidArgumentError, Keras's "A merge layer should be called on a list of
// inputs"). The element-wise layers broadcast dimensions of 1 between inputs
// of the same rank, as Keras's _Merge; Concatenate needs every dimension but
// `axis` to agree. No weights. Thread-safety: as Layer.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/keras/layer.h"

namespace strata::keras::layers {

// The element-wise merge layers; `op` names the operation.
class MergeLayer : public Layer {
 public:
  enum class Op { kAdd, kSubtract, kMultiply, kAverage, kMaximum, kMinimum };
  MergeLayer(Op op, const LayerArgs& args);

  TensorShape compute_output_shape(const TensorShape& input_shape) const override;
  TensorShape compute_output_shape_list(
      const std::vector<TensorShape>& input_shapes) const override;
  nlohmann::json get_config() const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;
  void build_weights(const TensorShape& input_shape) override;
  void build_weights_list(const std::vector<TensorShape>& input_shapes) override;
  Tensor call_list(const std::vector<Tensor>& inputs, bool training) override;

 private:
  Op op_;
};

std::shared_ptr<MergeLayer> Add(const LayerArgs& args = {});
std::shared_ptr<MergeLayer> Subtract(const LayerArgs& args = {});  // exactly two inputs
std::shared_ptr<MergeLayer> Multiply(const LayerArgs& args = {});
std::shared_ptr<MergeLayer> Average(const LayerArgs& args = {});
std::shared_ptr<MergeLayer> Maximum(const LayerArgs& args = {});
std::shared_ptr<MergeLayer> Minimum(const LayerArgs& args = {});

// tf.keras.layers.Concatenate's arguments, in Keras's order, then LayerArgs.
struct ConcatenateOptions {
  int axis = -1;  // Keras default
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

class ConcatenateLayer : public Layer {
 public:
  explicit ConcatenateLayer(const ConcatenateOptions& options = {});
  int axis() const noexcept { return axis_; }

  TensorShape compute_output_shape(const TensorShape& input_shape) const override;
  TensorShape compute_output_shape_list(
      const std::vector<TensorShape>& input_shapes) const override;
  nlohmann::json get_config() const override;  // base keys and "axis"

 protected:
  Tensor call(const Tensor& inputs, bool training) override;
  void build_weights(const TensorShape& input_shape) override;
  void build_weights_list(const std::vector<TensorShape>& input_shapes) override;
  Tensor call_list(const std::vector<Tensor>& inputs, bool training) override;

 private:
  int axis_;
};

std::shared_ptr<ConcatenateLayer> Concatenate(const ConcatenateOptions& options = {});

}  // namespace strata::keras::layers
