#pragma once
// The activation layers of keras.layers (tf.keras 2.x's advanced_activations):
// ReLU, LeakyReLU, ELU, Softmax and PReLU, whose parameters are arguments or
// (PReLU) trainable weights.
//
//   auto leaky = keras::layers::LeakyReLU();              // alpha 0.3 (tf.keras's default)
//   auto capped = keras::layers::ReLU({.max_value = 6.0});
//   auto soft = keras::layers::Softmax({.axis = 1});
//   auto prelu = keras::layers::PReLU({.shared_axes = {1, 2}});   // one alpha per channel
//   Tensor y = (*prelu)(images);                          // alpha: [1, 1, channels]
//
// All are element-wise (Softmax: along `axis`) and keep the input's shape.
// Thread-safety: as Layer.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/keras/initializers.h"
#include "strata/keras/layer.h"

namespace strata::keras::layers {

// tf.keras.layers.ReLU's arguments.
struct ReLUOptions {
  std::optional<double> max_value = std::nullopt;  // >= 0 when given
  double negative_slope = 0.0;                     // >= 0
  double threshold = 0.0;
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// keras::activations::relu with these options.
class ReLULayer : public Layer {
 public:
  explicit ReLULayer(const ReLUOptions& options = {});
  TensorShape compute_output_shape(const TensorShape& s) const override { return s; }

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  ReLUOptions options_;
};
std::shared_ptr<ReLULayer> ReLU(const ReLUOptions& options = {});

// tf.keras.layers.LeakyReLU / ELU's argument.
struct AlphaOptions {
  std::optional<double> alpha = std::nullopt;  // default: 0.3 for LeakyReLU, 1.0 for ELU (tf.keras)
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// x for x >= 0, alpha * x otherwise. InvalidArgumentError if alpha < 0.
class LeakyReLULayer : public Layer {
 public:
  explicit LeakyReLULayer(const AlphaOptions& options = {});
  double alpha() const noexcept { return alpha_; }
  TensorShape compute_output_shape(const TensorShape& s) const override { return s; }

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  double alpha_;
};
std::shared_ptr<LeakyReLULayer> LeakyReLU(const AlphaOptions& options = {});

// x for x > 0, alpha * (exp(x) - 1) otherwise.
class ELULayer : public Layer {
 public:
  explicit ELULayer(const AlphaOptions& options = {});
  double alpha() const noexcept { return alpha_; }
  TensorShape compute_output_shape(const TensorShape& s) const override { return s; }

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  double alpha_;
};
std::shared_ptr<ELULayer> ELU(const AlphaOptions& options = {});

// tf.keras.layers.Softmax's argument.
struct SoftmaxOptions {
  int64_t axis = -1;
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// Softmax along `axis` (InvalidArgumentError naming the layer if out of range).
class SoftmaxLayer : public Layer {
 public:
  explicit SoftmaxLayer(const SoftmaxOptions& options = {});
  TensorShape compute_output_shape(const TensorShape& s) const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  int64_t axis_;
};
std::shared_ptr<SoftmaxLayer> Softmax(const SoftmaxOptions& options = {});

// tf.keras.layers.PReLU's arguments (regularizer and constraint unsupported).
struct PReLUOptions {
  Initializer alpha_initializer = initializers::zeros();
  // Axes (1-based, batch excluded) along which one alpha is shared, e.g. {1, 2}
  // for one alpha per channel of an image. {} = one alpha per input element.
  std::vector<int64_t> shared_axes = {};
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// max(x, 0) + alpha * min(x, 0) with a trainable "alpha" of shape
// input_shape[1:] (shared axes set to 1).
class PReLULayer : public Layer {
 public:
  explicit PReLULayer(const PReLUOptions& options = {});
  const Variable& alpha() const { return alpha_; }
  TensorShape compute_output_shape(const TensorShape& s) const override;

 protected:
  void build_weights(const TensorShape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  PReLUOptions options_;
  TensorShape alpha_shape_;
  Variable alpha_;
};
std::shared_ptr<PReLULayer> PReLU(const PReLUOptions& options = {});

}  // namespace strata::keras::layers
