#pragma once
// keras.optimizers.SGD: gradient descent with optional (Nesterov) momentum.
//
//   auto opt = keras::optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9});
//   opt->apply_gradients(strata::zip(grads, model->trainable_variables()));
//
// Keras 2.11+ update, with slot m ("momentum" in Keras: `m`) starting at 0:
//   m   = momentum * m - lr * g
//   var = var + m                          (nesterov = false)
//   var = var + momentum * m - lr * g      (nesterov = true, with the new m)
// With momentum 0 this is var -= lr * g. Thread-safety: see Optimizer.

#include <memory>
#include <optional>
#include <string>

#include "strata/keras/optimizer.h"

namespace strata::keras::optimizers {

// keras.optimizers.SGD arguments, in Keras's order, with Keras's defaults.
struct SGDOptions {
  LearningRate learning_rate = 0.01;
  double momentum = 0.0;  // in [0, 1]
  bool nesterov = false;
  // OptimizerArgs (see optimizer.h)
  std::optional<double> weight_decay = std::nullopt;
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = "SGD";
};

class SGDOptimizer : public Optimizer {
 public:
  // InvalidArgumentError unless 0 <= momentum <= 1.
  explicit SGDOptimizer(const SGDOptions& options = {});
  double momentum() const noexcept { return momentum_; }
  bool nesterov() const noexcept { return nesterov_; }

 protected:
  void build_slots(const std::vector<Variable>& var_list) override;
  void update_step(const Tensor& gradient, const Variable& variable, double learning_rate) override;
  bool update_is_elementwise() const override { return true; }

 private:
  double momentum_;
  bool nesterov_;
};

std::shared_ptr<SGDOptimizer> SGD(const SGDOptions& options = {});

}  // namespace strata::keras::optimizers
