#include "strata/keras/layers/core.h"

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/layers/internal/common.h"
#include "strata/keras/layers/serialization.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras::layers {
namespace {

// SplitMix64's finaliser: decorrelates the per-call seeds of one layer.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

DropoutLayer::DropoutLayer(double rate, const DropoutOptions& options)
    : Layer("Dropout", "dropout", internal::layer_args(options)), rate_(rate), options_(options) {
  STRATA_CHECK_ARG(rate >= 0.0 && rate < 1.0, internal::describe(*this),
                   ": expected rate in [0, 1), got ", rate);
  if (!options_.noise_shape.empty()) {
    for (int64_t d : options_.noise_shape) {
      STRATA_CHECK_ARG(d > 0 || d == -1, internal::describe(*this),
                       ": expected noise_shape entries > 0 or -1, got ", options_.noise_shape);
    }
  }
}

Tensor DropoutLayer::call(const Tensor& inputs, bool training) {
  if (!training || rate_ == 0.0) return inputs;
  std::optional<std::vector<int64_t>> noise = std::nullopt;
  if (!options_.noise_shape.empty()) {
    const TensorShape& s = inputs.shape();
    std::vector<int64_t> n = options_.noise_shape;
    STRATA_CHECK_ARG(static_cast<int>(n.size()) == s.rank(), internal::describe(*this),
                     ": expected noise_shape ", n, " to have the input's rank, got input shape ",
                     s);
    for (size_t i = 0; i < n.size(); ++i) {
      if (n[i] == -1) n[i] = s.dim(static_cast<int>(i));
      STRATA_CHECK_ARG(n[i] == 1 || n[i] == s.dim(static_cast<int>(i)), internal::describe(*this),
                       ": expected noise_shape ", options_.noise_shape,
                       " to broadcast to the input, got shape ", s);
    }
    noise = std::move(n);
  }
  std::optional<uint64_t> seed = std::nullopt;
  if (options_.seed) {
    const distribute::ReplicaContext* context = distribute::get_replica_context();
    const int replica = context ? context->replica_id_in_sync_group() : 0;
    uint64_t call = 0;
    {
      MutexLock lock(mu_);
      call = calls_[replica]++;
    }
    seed = mix(mix(*options_.seed ^ mix(call)) ^ static_cast<uint64_t>(replica));
  }
  return strata::nn::dropout(inputs, rate_, {.noise_shape = noise, .seed = seed});
}

nlohmann::json DropoutLayer::get_config() const {
  nlohmann::json config = base_config();
  config["rate"] = rate_;
  if (options_.noise_shape.empty()) {
    config["noise_shape"] = nullptr;
  } else {
    nlohmann::json shape = layers::config_shape(options_.noise_shape);
    config["noise_shape"] = shape;
  }
  config["seed"] = options_.seed ? nlohmann::json(*options_.seed) : nlohmann::json(nullptr);
  return config;
}

nlohmann::json ActivationLayer::get_config() const {
  nlohmann::json config = base_config();
  config["activation"] = internal::activation_config(*this, spec_);
  return config;
}

std::shared_ptr<DropoutLayer> Dropout(double rate, const DropoutOptions& options) {
  return std::make_shared<DropoutLayer>(rate, options);
}

ActivationLayer::ActivationLayer(const ActivationSpec& activation, const LayerArgs& args)
    : Layer("Activation", "activation", args),
      spec_(activation),
      activation_name_(activation.name()),
      activation_(internal::activation_for(*this, activation)) {}

Tensor ActivationLayer::call(const Tensor& inputs, bool /*training*/) {
  return activation_(inputs);
}

std::shared_ptr<ActivationLayer> Activation(const ActivationSpec& activation,
                                            const LayerArgs& args) {
  return std::make_shared<ActivationLayer>(activation, args);
}

RescalingLayer::RescalingLayer(double scale, const RescalingOptions& options)
    : Layer("Rescaling", "rescaling", internal::layer_args(options)),
      scale_(scale),
      offset_(options.offset) {}

Tensor RescalingLayer::call(const Tensor& inputs, bool /*training*/) {
  const Tensor x = internal::cast_to(inputs, dtype());
  return x * scale_ + offset_;
}

std::shared_ptr<RescalingLayer> Rescaling(double scale, const RescalingOptions& options) {
  return std::make_shared<RescalingLayer>(scale, options);
}

}  // namespace strata::keras::layers
