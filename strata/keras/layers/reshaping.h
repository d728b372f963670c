#pragma once
// keras.layers.Flatten and keras.layers.Reshape: change the per-example shape,
// keeping the batch dimension.
//
//   auto flat = keras::layers::Flatten();
//   (*flat)(x);                                      // [batch, 28, 28, 1] -> [batch, 784]
//   auto r = keras::layers::Reshape({-1, 4});        // one -1 is inferred
//   (*r)(y);                                         // [batch, 8] -> [batch, 2, 4]
//   r->compute_output_shape({-1, 8});                // [-1, 2, 4]
//
// Neither layer has weights; the ops share the input's buffer and pass the
// gradient through (reshape's gradient). Thread-safe once constructed.

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

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  std::vector<int64_t> target_shape_;
};

std::shared_ptr<ReshapeLayer> Reshape(std::vector<int64_t> target_shape,
                                      const LayerArgs& args = {});

}  // namespace strata::keras::layers
