#pragma once
// keras.layers.Flatten and keras.layers.Reshape: change the per-example shape,
// keeping the batch dimension; ZeroPadding2D, Cropping2D and UpSampling2D
// resize NHWC images.
//
//   auto flat = keras::layers::Flatten();
//   (*flat)(x);                                      // [batch, 28, 28, 1] -> [batch, 784]
//   auto r = keras::layers::Reshape({-1, 4});        // one -1 is inferred
//   (*r)(y);                                         // [batch, 8] -> [batch, 2, 4]
//   r->compute_output_shape({-1, 8});                // [-1, 2, 4]
//   auto pad = keras::layers::ZeroPadding2D({1, 2});  // 1 row above and below, 2 columns each side
//   auto up = keras::layers::UpSampling2D({2, 2});    // nearest: [b, h, w, c] -> [b, 2h, 2w, c]
//
// No layer here has weights; gradients pass through the underlying ops
// (reshape, pad, slice, broadcast_to). Only data_format "channels_last"
// exists (UnimplementedError otherwise). Thread-safe once constructed.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/keras/layer.h"

namespace strata::keras::layers {

struct FlattenOptions {
  std::string data_format =
      "";  // "" / "channels_last" (Keras default None); "channels_first" unsupported
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// [batch, d1, ..., dn] -> [batch, d1 * ... * dn]; a rank-1 input [batch]
// becomes [batch, 1], as Keras.
class FlattenLayer : public Layer {
 public:
  explicit FlattenLayer(const FlattenOptions& options = {});
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;
  // Base keys and "data_format" ("channels_last").
  nlohmann::json get_config() const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;
};

std::shared_ptr<FlattenLayer> Flatten(const FlattenOptions& options = {});

// [batch, ...] -> [batch] + target_shape. target_shape excludes the batch
// dimension; its entries are > 0 except at most one -1, inferred from the
// element count. InvalidArgumentError for a bad target_shape (at
// construction) or an input whose element count does not fit (at call).
class ReshapeLayer : public Layer {
 public:
  explicit ReshapeLayer(std::vector<int64_t> target_shape, const LayerArgs& args = {});
  const std::vector<int64_t>& target_shape() const noexcept { return target_shape_; }
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;
  // Base keys and "target_shape" (Keras's: a list, -1 kept).
  nlohmann::json get_config() const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  std::vector<int64_t> target_shape_;
};

std::shared_ptr<ReshapeLayer> Reshape(std::vector<int64_t> target_shape,
                                      const LayerArgs& args = {});

// Options of ZeroPadding2D, Cropping2D and UpSampling2D after their first argument.
struct Image2DOptions {
  std::string data_format = "";  // "" / "channels_last" (Keras's default)
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// Adds `padding` zero rows / columns around each image. `padding` is {n} (every
// side), {h, w} (Keras's symmetric 2-tuple) or {top, bottom, left, right}
// (Keras's ((top, bottom), (left, right))); entries >= 0.
class ZeroPadding2DLayer : public Layer {
 public:
  explicit ZeroPadding2DLayer(const std::vector<int64_t>& padding,
                              const Image2DOptions& options = {});
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  int64_t top_, bottom_, left_, right_;
};

std::shared_ptr<ZeroPadding2DLayer> ZeroPadding2D(const std::vector<int64_t>& padding = {1, 1},
                                                  const Image2DOptions& options = {});

// Removes `cropping` rows / columns from the edges; the same three forms as
// ZeroPadding2D (Keras default: nothing). InvalidArgumentError if nothing would remain.
class Cropping2DLayer : public Layer {
 public:
  explicit Cropping2DLayer(const std::vector<int64_t>& cropping,
                           const Image2DOptions& options = {});
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  int64_t top_, bottom_, left_, right_;
};

std::shared_ptr<Cropping2DLayer> Cropping2D(const std::vector<int64_t>& cropping = {0, 0},
                                            const Image2DOptions& options = {});

// tf.keras.layers.UpSampling2D's arguments after `size`.
struct UpSampling2DOptions {
  std::string data_format = "";           // "" / "channels_last"
  std::string interpolation = "nearest";  // only "nearest"; "bilinear" is UnimplementedError
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// Repeats every row size[0] times and every column size[1] times.
class UpSampling2DLayer : public Layer {
 public:
  explicit UpSampling2DLayer(const std::vector<int64_t>& size,
                             const UpSampling2DOptions& options = {});
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  int64_t rows_, cols_;
};

std::shared_ptr<UpSampling2DLayer> UpSampling2D(const std::vector<int64_t>& size = {2, 2},
                                                const UpSampling2DOptions& options = {});

// tf.keras.layers.Permute: reorders the non-batch axes. `dims` is a
// permutation of 1 .. rank - 1 (1-based, as Keras), e.g. {2, 1} swaps the two
// axes of [batch, a, b].
class PermuteLayer : public Layer {
 public:
  explicit PermuteLayer(std::vector<int64_t> dims, const LayerArgs& args = {});
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  std::vector<int64_t> dims_;
};

std::shared_ptr<PermuteLayer> Permute(std::vector<int64_t> dims, const LayerArgs& args = {});

// tf.keras.layers.RepeatVector: [batch, features] -> [batch, n, features].
class RepeatVectorLayer : public Layer {
 public:
  explicit RepeatVectorLayer(int64_t n, const LayerArgs& args = {});
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  int64_t n_;
};

std::shared_ptr<RepeatVectorLayer> RepeatVector(int64_t n, const LayerArgs& args = {});

}  // namespace strata::keras::layers
