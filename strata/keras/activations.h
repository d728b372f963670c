#pragma once
// Keras activation functions (tf.keras.activations) and their lookup by name.
//
//   auto act = keras::activations::get("relu");        // std::function<Tensor(const Tensor&)>
//   Tensor y = act(x);
//   Tensor p = keras::activations::softmax(logits);    // last axis, as Keras
//   Tensor g = keras::activations::gelu(x, /*approximate=*/true);
//   keras::activations::get("");                        // linear (Keras's get(None))
//   keras::activations::get("relu_");                   // InvalidArgumentError: unknown name
//
// Every function is composed of differentiable strata ops, so gradients come
// from the GradientTape. Names and formulas follow tf.keras 2.x; the known
// names are listed by activation_names(). Pure functions; thread-safe.

#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::keras {

using ActivationFunction = std::function<Tensor(const Tensor&)>;

// A layer's `activation` argument, as Keras's: a name or a function.
//   {.activation = "relu"}
//   {.activation = [](const Tensor& x) { return strata::relu(x) * 2.f; }}
// The constructors are implicit on purpose: they are the conversions.
class ActivationSpec {
 public:
  ActivationSpec() = default;  // linear
  ActivationSpec(const char* name) : name_(name) {}
  ActivationSpec(std::string name) : name_(std::move(name)) {}
  template <typename F,
            typename = std::enable_if_t<std::is_invocable_r_v<Tensor, F&, const Tensor&> &&
                                        !std::is_convertible_v<F, std::string>>>
  ActivationSpec(F fn) : function_(std::move(fn)) {}

  // The name; "" for a function (or the default, linear).
  const std::string& name() const noexcept { return name_; }
  // Set when the spec holds a function.
  const ActivationFunction& function() const noexcept { return function_; }

 private:
  std::string name_;
  ActivationFunction function_;
};

namespace activations {

// The function called `identifier` ("relu", "softmax", ...). "" and "linear"
// give the identity. InvalidArgumentError naming the identifier and the known
// names when it is unknown (Keras's ValueError).
ActivationFunction get(const std::string& identifier);
// The function a spec names or holds (get(spec.name()) for a name).
ActivationFunction resolve(const ActivationSpec& spec);
// The names get() accepts, sorted.
std::vector<std::string> activation_names();

struct ReluOptions {
  double alpha = 0.0;                              // slope below the threshold (Keras default 0)
  std::optional<double> max_value = std::nullopt;  // saturation value (Keras default None)
  double threshold = 0.0;                          // values below it are damped (Keras default 0)
};
// Keras's relu: f(x) = max_value for x >= max_value, x for threshold <= x < max_value,
// alpha * (x - threshold) otherwise.
Tensor relu(const Tensor& x, const ReluOptions& options = {});
// 1 / (1 + exp(-x)). As Keras 2 (output._keras_logits), the result remembers
// x, so that binary_crossentropy of it uses the logits (from_logits) instead
// of clipped probabilities: keras_logits(sigmoid(x)) is x. An op applied to
// the result gives a plain tensor again (as in Keras, where the cache is an
// attribute of that one tensor).
Tensor sigmoid(const Tensor& x);
// The logits a Keras sigmoid output was computed from, or an undefined tensor.
Tensor keras_logits(const Tensor& output);
Tensor tanh(const Tensor& x);
// Softmax along `axis`; InvalidArgumentError for a rank-0 or rank-1 input, as
// tf.keras (which refuses "a tensor that is 1D").
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);
Tensor linear(const Tensor& x);
// x for x > 0, alpha * (exp(x) - 1) otherwise.
Tensor elu(const Tensor& x, double alpha = 1.0);
// scale * elu(x, alpha) with Keras's constants alpha = 1.67326324, scale = 1.05070098.
Tensor selu(const Tensor& x);
Tensor softplus(const Tensor& x);
// x / (|x| + 1)
Tensor softsign(const Tensor& x);
// x * sigmoid(x); "silu" is the same function.
Tensor swish(const Tensor& x);
// x * Phi(x). approximate = false (Keras's default) uses the Gaussian CDF
// 0.5 * (1 + erf(x / sqrt(2))); strata has no erf op, so erf is evaluated with
// the Abramowitz-Stegun 7.1.26 rational approximation (absolute error below
// 1.5e-7, i.e. float32 rounding) built from differentiable ops.
// approximate = true uses the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& x, bool approximate = false);
Tensor exponential(const Tensor& x);
// tf.keras 2.x's piecewise-linear sigmoid: clip(0.2 x + 0.5, 0, 1).
Tensor hard_sigmoid(const Tensor& x);
// x * tanh(softplus(x))
Tensor mish(const Tensor& x);
Tensor relu6(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double alpha = 0.2);

}  // namespace activations
}  // namespace strata::keras
