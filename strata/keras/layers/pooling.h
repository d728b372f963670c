#pragma once
// keras.layers.MaxPooling2D / AveragePooling2D (windowed) and
// GlobalMaxPooling2D / GlobalAveragePooling2D (over all of H and W), NHWC;
// the 1-D forms over [batch, steps, channels] sequences.
//
//   auto pool = keras::layers::MaxPooling2D({2, 2});          // strides default to pool_size
//   Tensor y = (*pool)(x);                                    // [b, 26, 26, 32] -> [b, 13, 13, 32]
//   auto avg = keras::layers::AveragePooling2D({3, 3}, {.strides = {1, 1}, .padding = "same"});
//   auto gap = keras::layers::GlobalAveragePooling2D();       // [b, h, w, c] -> [b, c]
//   auto seq = keras::layers::GlobalAveragePooling1D();       // [b, t, c] -> [b, c]
//
// "same" average pooling divides by the number of in-bounds elements of each
// window (TF's rule), not by the window size. Only data_format "channels_last"
// is supported (UnimplementedError otherwise). No weights; thread-safe.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/keras/layer.h"

namespace strata::keras::layers {

// tf.keras.layers.{Max,Average}Pooling2D's arguments after `pool_size`.
struct Pooling2DOptions {
  std::vector<int64_t> strides = {};  // {} (Keras's None) = pool_size
  std::string padding = "valid";
  std::string data_format = "";  // "" (Keras's None: channels_last) or "channels_last"
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

class Pooling2DLayer : public Layer {
 public:
  enum class Kind { MAX, AVERAGE };
  // InvalidArgumentError for non-positive pool_size / strides or a bad padding.
  Pooling2DLayer(Kind kind, const std::vector<int64_t>& pool_size,
                 const Pooling2DOptions& options = {});

  TensorShape compute_output_shape(const TensorShape& input_shape) const override;
  // Base keys, "pool_size", "padding", "strides", "data_format".
  nlohmann::json get_config() const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  Kind kind_;
  std::pair<int64_t, int64_t> pool_size_;
  std::pair<int64_t, int64_t> strides_;
  std::string padding_;
};

std::shared_ptr<Pooling2DLayer> MaxPooling2D(const std::vector<int64_t>& pool_size = {2, 2},
                                             const Pooling2DOptions& options = {});
std::shared_ptr<Pooling2DLayer> AveragePooling2D(const std::vector<int64_t>& pool_size = {2, 2},
                                                 const Pooling2DOptions& options = {});

// tf.keras.layers.GlobalAveragePooling2D / GlobalMaxPooling2D arguments.
struct GlobalPooling2DOptions {
  std::string data_format = "";  // "" or "channels_last"
  bool keepdims = false;         // true: [b, 1, 1, c]
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

class GlobalPooling2DLayer : public Layer {
 public:
  using Kind = Pooling2DLayer::Kind;
  GlobalPooling2DLayer(Kind kind, const GlobalPooling2DOptions& options = {});
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  Kind kind_;
  bool keepdims_;
};

std::shared_ptr<GlobalPooling2DLayer> GlobalMaxPooling2D(
    const GlobalPooling2DOptions& options = {});
std::shared_ptr<GlobalPooling2DLayer> GlobalAveragePooling2D(
    const GlobalPooling2DOptions& options = {});

// tf.keras.layers.{Max,Average}Pooling1D's arguments after `pool_size`.
struct Pooling1DOptions {
  std::optional<int64_t> strides = std::nullopt;  // Keras default None: pool_size
  std::string padding = "valid";
  std::string data_format = "";  // "" / "channels_last" (Keras's default)
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// Windows along the steps axis, computed as the 2-D pool of a height-1 image.
class Pooling1DLayer : public Layer {
 public:
  using Kind = Pooling2DLayer::Kind;
  Pooling1DLayer(Kind kind, int64_t pool_size, const Pooling1DOptions& options = {});
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  Kind kind_;
  int64_t pool_size_;
  int64_t strides_;
  std::string padding_;
};

std::shared_ptr<Pooling1DLayer> MaxPooling1D(int64_t pool_size = 2,
                                             const Pooling1DOptions& options = {});
std::shared_ptr<Pooling1DLayer> AveragePooling1D(int64_t pool_size = 2,
                                                 const Pooling1DOptions& options = {});

// [batch, steps, channels] -> [batch, channels] (keepdims: [batch, 1, channels]).
class GlobalPooling1DLayer : public Layer {
 public:
  using Kind = Pooling2DLayer::Kind;
  GlobalPooling1DLayer(Kind kind, const GlobalPooling2DOptions& options = {});
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  Kind kind_;
  bool keepdims_;
};

// Options as the 2-D global pools (data_format, keepdims, LayerArgs).
std::shared_ptr<GlobalPooling1DLayer> GlobalMaxPooling1D(
    const GlobalPooling2DOptions& options = {});
std::shared_ptr<GlobalPooling1DLayer> GlobalAveragePooling1D(
    const GlobalPooling2DOptions& options = {});

}  // namespace strata::keras::layers
