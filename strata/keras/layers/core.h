#pragma once
// keras.layers.Dropout, Activation and Rescaling: weightless element-wise layers.
//
//   auto drop = keras::layers::Dropout(0.2, {.seed = 7});
//   Tensor t = (*drop)(x, /*training=*/true);   // ~20% zeros, the rest scaled by 1 / 0.8
//   Tensor i = (*drop)(x);                      // training = false: x unchanged
//   auto soft = keras::layers::Activation("softmax");
//   Tensor p = (*soft)(logits);
//   auto scale = keras::layers::Rescaling(1.0 / 255);   // uint8 pixels -> float32 in [0, 1]
//
// Dropout with a seed is reproducible yet draws a new mask on every training
// call, like Keras's seeded per-layer random generator: the k-th training call
// of replica r (r = 0 outside a strategy) uses a seed derived from (seed, r, k),
// so replicas drop different units and a rerun reproduces each replica's
// masks. Without a seed every mask is fresh. Thread-safe (the per-replica call
// counters are guarded by a mutex).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/base/mutex.h"
#include "strata/keras/activations.h"
#include "strata/keras/layer.h"

namespace strata::keras::layers {

// tf.keras.layers.Dropout's arguments after `rate`.
struct DropoutOptions {
  // Shape of the binary mask, broadcast against the input (Keras's noise_shape;
  // -1 entries take the input's dimension, like Keras's None). {} (Keras's
  // None): the input's shape.
  std::vector<int64_t> noise_shape = {};
  std::optional<uint64_t> seed = std::nullopt;
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// training = true: each element (each mask element) is kept with probability
// 1 - rate and the kept ones scaled by 1 / (1 - rate); training = false:
// the input unchanged. InvalidArgumentError if rate is outside [0, 1).
class DropoutLayer : public Layer {
 public:
  explicit DropoutLayer(double rate, const DropoutOptions& options = {});
  double rate() const noexcept { return rate_; }
  TensorShape compute_output_shape(const TensorShape& input_shape) const override {
    return input_shape;
  }
  // Base keys, "rate", "noise_shape" (null or a list, -1 as null), "seed".
  nlohmann::json get_config() const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  double rate_;
  DropoutOptions options_;
  Mutex mu_;
  std::map<int, uint64_t> calls_ STRATA_GUARDED_BY(mu_);  // training calls so far, per replica id
};

std::shared_ptr<DropoutLayer> Dropout(double rate, const DropoutOptions& options = {});

// Applies the activation (a keras::activations name or a function).
// InvalidArgumentError for an unknown name.
class ActivationLayer : public Layer {
 public:
  explicit ActivationLayer(const ActivationSpec& activation, const LayerArgs& args = {});
  // The name ("" for a function).
  const std::string& activation() const noexcept { return activation_name_; }
  TensorShape compute_output_shape(const TensorShape& input_shape) const override {
    return input_shape;
  }
  // Base keys and "activation" (UnimplementedError for a function).
  nlohmann::json get_config() const override;

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  ActivationSpec spec_;
  std::string activation_name_;
  ActivationFunction activation_;
};

std::shared_ptr<ActivationLayer> Activation(const ActivationSpec& activation,
                                            const LayerArgs& args = {});

// tf.keras.layers.Rescaling's arguments after `scale`.
struct RescalingOptions {
  double offset = 0.0;
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

// inputs * scale + offset, computed in the layer's dtype (inputs of any
// numeric dtype are cast first, as Keras).
class RescalingLayer : public Layer {
 public:
  explicit RescalingLayer(double scale, const RescalingOptions& options = {});
  TensorShape compute_output_shape(const TensorShape& input_shape) const override {
    return input_shape;
  }

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  double scale_;
  double offset_;
};

std::shared_ptr<RescalingLayer> Rescaling(double scale, const RescalingOptions& options = {});

}  // namespace strata::keras::layers
