#include "strata/keras/activations.h"

#include <memory>
#include <utility>

#include <cmath>
#include <map>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras::activations {
namespace {

// Abramowitz & Stegun 7.1.26: erf(z) ~ sign(z) (1 - poly(t) exp(-z^2)), t = 1 / (1 + p |z|).
Tensor erf_approx(const Tensor& z) {
  constexpr double p = 0.3275911;
  constexpr double a1 = 0.254829592, a2 = -0.284496736, a3 = 1.421413741, a4 = -1.453152027,
                   a5 = 1.061405429;
  const Tensor az = strata::abs(z);
  const Tensor t = strata::reciprocal(az * p + 1.0);
  // Horner's scheme: t (a1 + t (a2 + t (a3 + t (a4 + t a5)))).
  Tensor poly = t * a5 + a4;
  poly = t * poly + a3;
  poly = t * poly + a2;
  poly = t * poly + a1;
  poly = t * poly;
  const Tensor erf_abs = 1.0 - poly * strata::exp(-strata::square(z));
  // sign has no gradient; d/dz (sign(z) f(|z|)) = f'(|z|) comes through abs.
  return strata::sign(z) * erf_abs;
}

const std::map<std::string, ActivationFunction>& registry() {
  static const std::map<std::string, ActivationFunction> table = {
      {"linear", [](const Tensor& x) { return activations::linear(x); }},
      {"relu", [](const Tensor& x) { return activations::relu(x); }},
      {"sigmoid", [](const Tensor& x) { return activations::sigmoid(x); }},
      {"tanh", [](const Tensor& x) { return activations::tanh(x); }},
      {"softmax", [](const Tensor& x) { return activations::softmax(x); }},
      {"log_softmax", [](const Tensor& x) { return activations::log_softmax(x); }},
      {"elu", [](const Tensor& x) { return activations::elu(x); }},
      {"selu", [](const Tensor& x) { return activations::selu(x); }},
      {"softplus", [](const Tensor& x) { return activations::softplus(x); }},
      {"softsign", [](const Tensor& x) { return activations::softsign(x); }},
      {"swish", [](const Tensor& x) { return activations::swish(x); }},
      {"silu", [](const Tensor& x) { return activations::swish(x); }},
      {"gelu", [](const Tensor& x) { return activations::gelu(x); }},
      {"exponential", [](const Tensor& x) { return activations::exponential(x); }},
      {"hard_sigmoid", [](const Tensor& x) { return activations::hard_sigmoid(x); }},
      {"mish", [](const Tensor& x) { return activations::mish(x); }},
      {"relu6", [](const Tensor& x) { return activations::relu6(x); }},
      {"leaky_relu", [](const Tensor& x) { return activations::leaky_relu(x); }},
  };
  return table;
}

}  // namespace

ActivationFunction get(const std::string& identifier) {
  if (identifier.empty()) return registry().at("linear");
  const auto it = registry().find(identifier);
  if (it == registry().end()) {
    std::string known;
    for (const std::string& name : activation_names()) known += (known.empty() ? "" : ", ") + name;
    throw InvalidArgumentError(str_cat("keras.activations.get: expected a known activation name (",
                                       known, "), got \"", identifier, "\""));
  }
  return it->second;
}

ActivationFunction resolve(const ActivationSpec& spec) {
  if (spec.function()) return spec.function();
  return get(spec.name());
}

std::vector<std::string> activation_names() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : registry()) names.push_back(name);
  return names;
}

Tensor relu(const Tensor& x, const ReluOptions& o) {
  // The same decomposition as tf.keras's backend.relu, so that edge cases
  // (x exactly at the threshold, alpha with max_value) agree.
  if (o.alpha != 0.0 && !o.max_value && o.threshold == 0.0) return strata::leaky_relu(x, o.alpha);
  Tensor negative_part;
  if (o.alpha != 0.0) negative_part = strata::relu(o.threshold - x);
  Tensor y;
  bool clip_max = o.max_value.has_value();
  if (o.threshold != 0.0) {
    y = x * strata::cast(x > o.threshold, x.dtype());
  } else if (o.max_value && *o.max_value == 6.0) {
    y = strata::relu6(x);
    clip_max = false;
  } else {
    y = strata::relu(x);
  }
  if (clip_max)
    y = strata::minimum(strata::maximum(y, strata::zeros_like(y)),
                        strata::cast(strata::constant(*o.max_value), y.dtype()));
  if (o.alpha != 0.0) y = y - negative_part * o.alpha;
  return y;
}

namespace {

// Keras's output._keras_logits, carried as the tensor's extension.
class KerasLogits : public TensorExtension {
 public:
  explicit KerasLogits(Tensor logits) : logits_(std::move(logits)) {}
  const Tensor& logits() const noexcept { return logits_; }

 private:
  Tensor logits_;
};

}  // namespace

Tensor sigmoid(const Tensor& x) {
  Tensor y = strata::sigmoid(x);
  // A tensor another layer annotates (a sharded value) keeps its extension.
  if (y.extension() != nullptr) return y;
  return y.with_extension(std::make_shared<const KerasLogits>(x));
}

Tensor keras_logits(const Tensor& output) {
  if (!output.defined()) return Tensor();
  const auto* cached = dynamic_cast<const KerasLogits*>(output.extension().get());
  return cached != nullptr ? cached->logits() : Tensor();
}
Tensor tanh(const Tensor& x) { return strata::tanh(x); }

Tensor softmax(const Tensor& x, int64_t axis) {
  STRATA_CHECK_ARG(x.rank() >= 2,
                   "keras.activations.softmax: expected a tensor of rank >= 2, got shape ",
                   x.shape());
  return strata::softmax(x, axis);
}

Tensor log_softmax(const Tensor& x, int64_t axis) { return strata::log_softmax(x, axis); }
Tensor linear(const Tensor& x) { return x; }

Tensor elu(const Tensor& x, double alpha) {
  if (alpha == 1.0) return strata::elu(x);
  // strata::elu(x) is exp(x) - 1 on the negative side; scale only that side.
  return strata::where(x > 0.0, x, strata::elu(x) * alpha);
}

Tensor selu(const Tensor& x) {
  constexpr double alpha = 1.67326324;
  constexpr double scale = 1.05070098;
  return elu(x, alpha) * scale;
}

Tensor softplus(const Tensor& x) { return strata::softplus(x); }
Tensor softsign(const Tensor& x) { return x / (strata::abs(x) + 1.0); }
Tensor swish(const Tensor& x) { return x * strata::sigmoid(x); }

Tensor gelu(const Tensor& x, bool approximate) {
  if (approximate) {
    const double k = std::sqrt(2.0 / M_PI);
    return x * 0.5 * (1.0 + strata::tanh((x + x * x * x * 0.044715) * k));
  }
  return x * 0.5 * (1.0 + erf_approx(x * M_SQRT1_2));
}

Tensor exponential(const Tensor& x) { return strata::exp(x); }

Tensor hard_sigmoid(const Tensor& x) {
  const Tensor y = x * 0.2 + 0.5;
  return strata::minimum(strata::maximum(y, strata::zeros_like(y)), strata::ones_like(y));
}

Tensor mish(const Tensor& x) { return x * strata::tanh(strata::softplus(x)); }
Tensor relu6(const Tensor& x) { return strata::relu6(x); }
Tensor leaky_relu(const Tensor& x, double alpha) { return strata::leaky_relu(x, alpha); }

}  // namespace strata::keras::activations
