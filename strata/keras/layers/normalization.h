#pragma once
// keras.layers.BatchNormalization: normalises each feature (channel) with the
// batch's statistics while training and with moving averages at inference.
// keras.layers.LayerNormalization: normalises each example over its feature axes.
//
//   auto bn = keras::layers::BatchNormalization();   // axis -1, momentum 0.99, epsilon 1e-3
//   Tensor y = (*bn)(x, /*training=*/true);   // (x - mean_b) / sqrt(var_b + eps) * gamma + beta
//   Tensor z = (*bn)(x);                      // the same with moving_mean, moving_variance
//   bn->count_params();                       // 4 * channels (2 * channels trainable)
//   auto ln = keras::layers::LayerNormalization();   // per example, over the last axis
//
// Weights, in Keras's order: gamma (if scale), beta (if center) trainable;
// moving_mean, moving_variance non-trainable, with synchronization ON_READ and
// aggregation MEAN as Keras (under a strategy each replica keeps its own copy
// and reading averages them).
//
// Training: mean and biased variance over every axis but `axis`; each call
// then sets moving = moving * momentum + batch * (1 - momentum). (tf.keras's
// fused kernel, used for 4-D inputs, feeds the Bessel-corrected variance
// n / (n - 1) * var_b into moving_variance; this layer uses the biased one for
// every rank, as tf.keras's non-fused path and Keras 3 do.) As in Keras, a
// frozen layer (trainable = false) always runs in inference mode.
// Thread-safety: as Layer; training calls write the moving statistics.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/keras/initializers.h"
#include "strata/keras/layer.h"

namespace strata::keras::layers {

// tf.keras.layers.BatchNormalization's arguments, in Keras's order.
// (Regularizers, constraints, renorm and virtual batches are not supported.)
struct BatchNormalizationOptions {
  int64_t axis = -1;  // the feature axis; may be negative
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;  // add beta
  bool scale = true;   // multiply by gamma
  Initializer beta_initializer = initializers::zeros();
  Initializer gamma_initializer = initializers::ones();
  Initializer moving_mean_initializer = initializers::zeros();
  Initializer moving_variance_initializer = initializers::ones();
  // SyncBatchNormalization: in training, the batch mean and variance are those
  // of the global batch, from all-reduced per-replica sums of x and x^2 and the
  // example count (gradients flow through the all-reduce). With one replica
  // (or no strategy) it is the plain layer.
  bool synchronized = false;
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

class BatchNormalizationLayer : public Layer {
 public:
  // InvalidArgumentError if epsilon < 0 or momentum is outside [0, 1].
  explicit BatchNormalizationLayer(const BatchNormalizationOptions& options = {});

  // Valid once built; gamma / beta are undefined without scale / center.
  const Variable& gamma() const { return gamma_; }
  const Variable& beta() const { return beta_; }
  const Variable& moving_mean() const { return moving_mean_; }
  const Variable& moving_variance() const { return moving_variance_; }

  TensorShape compute_output_shape(const TensorShape& input_shape) const override;
  // The base keys, then Keras's "axis" (an int), "momentum", "epsilon",
  // "center", "scale" and "synchronized"; initializers are not written.
  nlohmann::json get_config() const override;

 protected:
  void build_weights(const TensorShape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  void check_input(const TensorShape& shape) const;

  BatchNormalizationOptions options_;
  int axis_ = -1;  // canonical, once built
  int rank_ = -1;  // input rank, once built
  int64_t features_ = -1;
  Variable gamma_, beta_, moving_mean_, moving_variance_;
};

std::shared_ptr<BatchNormalizationLayer> BatchNormalization(
    const BatchNormalizationOptions& options = {});

// tf.keras.layers.LayerNormalization's arguments, in Keras's order
// (regularizers and constraints are not supported).
struct LayerNormalizationOptions {
  // The axes normalised over (Keras's int or list); never the batch axis.
  std::vector<int64_t> axis = {-1};
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  Initializer beta_initializer = initializers::zeros();
  Initializer gamma_initializer = initializers::ones();
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// y = (x - mean) / sqrt(var + epsilon) * gamma + beta, with mean and biased
// variance of each example over `axis`; gamma and beta have the input's
// dimensions at `axis` ("gamma" then "beta", as Keras). The same in training
// and inference. Thread-safety: as Layer.
class LayerNormalizationLayer : public Layer {
 public:
  // InvalidArgumentError if axis is empty or has duplicates, or epsilon < 0.
  explicit LayerNormalizationLayer(const LayerNormalizationOptions& options = {});

  const Variable& gamma() const { return gamma_; }
  const Variable& beta() const { return beta_; }
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

 protected:
  void build_weights(const TensorShape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  // The canonical axes for `shape`, checked (not the batch axis, in range, no duplicates).
  std::vector<int> axes_for(const TensorShape& shape) const;

  LayerNormalizationOptions options_;
  TensorShape built_shape_;  // the input shape at build, for later checks
  Variable gamma_, beta_;
};

std::shared_ptr<LayerNormalizationLayer> LayerNormalization(
    const LayerNormalizationOptions& options = {});

}  // namespace strata::keras::layers
