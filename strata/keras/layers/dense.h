#pragma once
// keras.layers.Dense: y = activation(x . kernel + bias).
//
//   auto hidden = keras::layers::Dense(128, {.activation = "relu"});
//   Tensor h = (*hidden)(x);                       // x [batch, 784] -> [batch, 128]
//   hidden->kernel().shape();                      // [784, 128]
//   hidden->count_params();                        // 784 * 128 + 128 = 100480
//   auto first = keras::layers::Dense(2, {.input_shape = {5}});
//
// Inputs of rank > 2 are contracted on their last axis (Keras's tensordot):
// [batch, t, d] -> [batch, t, units]. Inputs are cast to the layer's dtype, as
// Keras's Dense does. Weights: "kernel" [input_dim, units], then "bias"
// [units] when use_bias. Thread-safety: as Layer (a built layer may be called
// from several threads).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/keras/activations.h"
#include "strata/keras/initializers.h"
#include "strata/keras/layer.h"

namespace strata::keras::layers {

// tf.keras.layers.Dense's arguments after `units`, in Keras's order.
// (Constraints are not supported and have no fields.)
struct DenseOptions {
  ActivationSpec activation = {};  // a name or a function; {} = linear (Keras default None)
  bool use_bias = true;
  Initializer kernel_initializer = initializers::glorot_uniform();
  Initializer bias_initializer = initializers::zeros();
  // Penalties added to losses() (keras.regularizers); nullptr = none (Keras default).
  regularizers::RegularizerPtr kernel_regularizer = nullptr;
  regularizers::RegularizerPtr bias_regularizer = nullptr;
  regularizers::RegularizerPtr activity_regularizer = nullptr;
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

class DenseLayer : public Layer {
 public:
  // InvalidArgumentError if units <= 0 or the activation name is unknown.
  DenseLayer(int64_t units, const DenseOptions& options = {});

  int64_t units() const noexcept { return units_; }
  // Valid once built.
  const Variable& kernel() const { return kernel_; }
  const Variable& bias() const { return bias_; }  // undefined without use_bias

  TensorShape compute_output_shape(const TensorShape& input_shape) const override;
  // Base keys, "units", "activation", "use_bias", "kernel_regularizer",
  // "bias_regularizer", "activity_regularizer" (null or {"class_name", "config"}).
  nlohmann::json get_config() const override;

 protected:
  void build_weights(const TensorShape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  void check_input(const TensorShape& shape) const;

  int64_t units_;
  DenseOptions options_;
  ActivationFunction activation_;
  int64_t input_dim_ = -1;
  Variable kernel_;
  Variable bias_;
};

std::shared_ptr<DenseLayer> Dense(int64_t units, const DenseOptions& options = {});

}  // namespace strata::keras::layers
