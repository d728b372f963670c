#pragma once
// keras.layers.Conv2D: 2-D convolution over NHWC images, y = activation(conv(x, kernel) + bias);
// keras.layers.Conv1D: the same over [batch, steps, channels] sequences;
// keras.layers.Conv2DTranspose: the transposed (gradient-of-input) convolution.
//
//   auto conv = keras::layers::Conv2D(32, {3, 3}, {.activation = "relu"});
//   Tensor y = (*conv)(images);               // [batch, 28, 28, 1] -> [batch, 26, 26, 32]
//   conv->kernel().shape();                   // [3, 3, 1, 32] (HWIO, as Keras)
//   conv->count_params();                     // 3*3*1*32 + 32 = 320
//   auto same = keras::layers::Conv2D(8, 3, {.strides = {2, 2}, .padding = "same"});
//   same->compute_output_shape({-1, 28, 28, 1});   // [-1, 14, 14, 8]
//   auto causal = keras::layers::Conv1D(16, 3, {.padding = "causal"});   // kernel [3, in, 16]
//   auto up = keras::layers::Conv2DTranspose(8, {3, 3}, {.strides = {2, 2}, .padding = "same"});
//   up->compute_output_shape({-1, 7, 7, 16});       // [-1, 14, 14, 8]; kernel [3, 3, 8, 16]
//
// Only data_format "channels_last" exists (UnimplementedError otherwise).
// padding is "valid" or "same" (case-insensitive, as Keras); dilation_rate > 1
// with strides > 1 is refused, as tf.keras does. groups > 1 splits the input
// channels into that many independent convolutions (kernel [kh, kw, in / groups,
// filters]). Inputs are cast to the layer's dtype. Thread-safety: as Layer.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/keras/activations.h"
#include "strata/keras/initializers.h"
#include "strata/keras/layer.h"

namespace strata::keras::layers {

// tf.keras.layers.Conv2D's arguments after `filters, kernel_size`, in Keras's
// order. 2-tuples are {h, w}; a single value {n} means {n, n} (Keras's int form).
struct Conv2DOptions {
  std::vector<int64_t> strides = {1, 1};
  std::string padding = "valid";
  std::string data_format = "";  // "" (Keras's None: channels_last) or "channels_last"
  std::vector<int64_t> dilation_rate = {1, 1};
  int64_t groups = 1;
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

class Conv2DLayer : public Layer {
 public:
  // InvalidArgumentError for filters <= 0, bad kernel_size / strides /
  // dilation_rate / groups / padding / activation.
  Conv2DLayer(int64_t filters, const std::vector<int64_t>& kernel_size,
              const Conv2DOptions& options = {});

  int64_t filters() const noexcept { return filters_; }
  const Variable& kernel() const { return kernel_; }
  const Variable& bias() const { return bias_; }  // undefined without use_bias

  // [batch, out_h, out_w, filters]; InvalidArgumentError if the input is not
  // rank 4 or an output dimension would be <= 0.
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;
  // Base keys, "filters", "kernel_size", "strides", "padding", "data_format",
  // "dilation_rate", "groups", "activation", "use_bias" and the three
  // regularizers (Keras's keys).
  nlohmann::json get_config() const override;

 protected:
  void build_weights(const TensorShape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  void check_input(const TensorShape& shape) const;

  int64_t filters_;
  std::pair<int64_t, int64_t> kernel_size_;
  std::pair<int64_t, int64_t> strides_;
  std::pair<int64_t, int64_t> dilation_;
  std::string padding_;
  Conv2DOptions options_;
  ActivationFunction activation_;
  int64_t input_channels_ = -1;
  Variable kernel_;
  Variable bias_;
};

std::shared_ptr<Conv2DLayer> Conv2D(int64_t filters, const std::vector<int64_t>& kernel_size,
                                    const Conv2DOptions& options = {});
// kernel_size n means {n, n}.
std::shared_ptr<Conv2DLayer> Conv2D(int64_t filters, int64_t kernel_size,
                                    const Conv2DOptions& options = {});

// tf.keras.layers.Conv1D's arguments after `filters, kernel_size`, in Keras's order.
struct Conv1DOptions {
  int64_t strides = 1;
  std::string padding = "valid";  // "valid", "same" or "causal" (left padding only)
  std::string data_format = "";   // "" / "channels_last" (Keras's default)
  int64_t dilation_rate = 1;
  int64_t groups = 1;
  ActivationSpec activation = {};  // a name or a function; {} = linear (Keras default None)
  bool use_bias = true;
  Initializer kernel_initializer = initializers::glorot_uniform();
  Initializer bias_initializer = initializers::zeros();
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// Kernel [kernel_size, in / groups, filters] (Keras's layout); computed as a
// Conv2D over a height-1 image. "causal" pads (kernel_size - 1) * dilation
// steps before the sequence, so output t sees inputs <= t.
class Conv1DLayer : public Layer {
 public:
  Conv1DLayer(int64_t filters, int64_t kernel_size, const Conv1DOptions& options = {});

  int64_t filters() const noexcept { return filters_; }
  const Variable& kernel() const { return kernel_; }
  const Variable& bias() const { return bias_; }

  // [batch, out_steps, filters].
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

 protected:
  void build_weights(const TensorShape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  void check_input(const TensorShape& shape) const;

  int64_t filters_;
  int64_t kernel_size_;
  std::string padding_;
  Conv1DOptions options_;
  ActivationFunction activation_;
  int64_t input_channels_ = -1;
  Variable kernel_;
  Variable bias_;
};

std::shared_ptr<Conv1DLayer> Conv1D(int64_t filters, int64_t kernel_size,
                                    const Conv1DOptions& options = {});

// tf.keras.layers.Conv2DTranspose's arguments after `filters, kernel_size`, in Keras's order.
struct Conv2DTransposeOptions {
  std::vector<int64_t> strides = {1, 1};
  std::string padding = "valid";
  std::vector<int64_t> output_padding = {};  // {} (Keras's None) or {h, w} / {n}, each < stride
  std::string data_format = "";              // "" / "channels_last"
  std::vector<int64_t> dilation_rate = {1, 1};
  ActivationSpec activation = {};  // a name or a function; {} = linear (Keras default None)
  bool use_bias = true;
  Initializer kernel_initializer = initializers::glorot_uniform();
  Initializer bias_initializer = initializers::zeros();
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// y = activation(conv2d_transpose(x, kernel) + bias), kernel [kh, kw, filters,
// in_channels] (Keras's layout). Output size per spatial dimension, as
// Keras's deconv_output_length with k the dilated kernel size: without
// output_padding, "valid" gives in * s + max(k - s, 0) and "same" in * s; with
// it, (in - 1) * s + k - 2 * pad + output_padding where pad = k / 2 ("same")
// or 0 ("valid").
class Conv2DTransposeLayer : public Layer {
 public:
  Conv2DTransposeLayer(int64_t filters, const std::vector<int64_t>& kernel_size,
                       const Conv2DTransposeOptions& options = {});

  int64_t filters() const noexcept { return filters_; }
  const Variable& kernel() const { return kernel_; }
  const Variable& bias() const { return bias_; }
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

 protected:
  void build_weights(const TensorShape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  void check_input(const TensorShape& shape) const;
  int64_t output_length(int64_t in, int axis) const;

  int64_t filters_;
  std::pair<int64_t, int64_t> kernel_size_, strides_, dilation_;
  std::optional<std::pair<int64_t, int64_t>> output_padding_;
  std::string padding_;
  Conv2DTransposeOptions options_;
  ActivationFunction activation_;
  int64_t input_channels_ = -1;
  Variable kernel_;
  Variable bias_;
};

std::shared_ptr<Conv2DTransposeLayer> Conv2DTranspose(int64_t filters,
                                                      const std::vector<int64_t>& kernel_size,
                                                      const Conv2DTransposeOptions& options = {});

}  // namespace strata::keras::layers
