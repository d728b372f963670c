#pragma once
// keras.optimizers.RMSprop (plain or centered, with optional momentum).
//
//   auto opt = keras::optimizers::RMSprop({.learning_rate = 1e-3, .centered = true});
//   opt->apply_gradients(strata::zip(grads, model->trainable_variables()));
//
// Keras 2.11+ update, slots velocity (and momentum, average_gradient) at 0:
//   velocity = rho * velocity + (1 - rho) * g^2
//   average_gradient = rho * average_gradient + (1 - rho) * g       (centered)
//   denominator = velocity - average_gradient^2 + epsilon            (centered)
//               = velocity + epsilon                                 (otherwise)
//   increment = lr * g / sqrt(denominator)       (epsilon inside the sqrt, as Keras)
//   momentum_slot = momentum * momentum_slot + increment; var -= momentum_slot   (momentum > 0)
//   var -= increment                                                             (momentum == 0)
// Thread-safety: see Optimizer.

#include <memory>
#include <optional>
#include <string>

#include "strata/keras/optimizer.h"

namespace strata::keras::optimizers {

// keras.optimizers.RMSprop arguments, in Keras's order, with Keras's defaults.
struct RMSpropOptions {
  LearningRate learning_rate = 0.001;
  double rho = 0.9;
  double momentum = 0.0;
  double epsilon = 1e-7;
  bool centered = false;
  // OptimizerArgs (see optimizer.h)
  std::optional<double> weight_decay = std::nullopt;
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = "RMSprop";
};

class RMSpropOptimizer : public Optimizer {
 public:
  // InvalidArgumentError if momentum < 0.
  explicit RMSpropOptimizer(const RMSpropOptions& options = {});
  double rho() const noexcept { return rho_; }
  double momentum() const noexcept { return momentum_; }
  double epsilon() const noexcept { return epsilon_; }
  bool centered() const noexcept { return centered_; }

 protected:
  void build_slots(const std::vector<Variable>& var_list) override;
  void update_step(const Tensor& gradient, const Variable& variable, double learning_rate) override;
  bool update_is_elementwise() const override { return true; }

 private:
  double rho_;
  double momentum_;
  double epsilon_;
  bool centered_;
};

std::shared_ptr<RMSpropOptimizer> RMSprop(const RMSpropOptions& options = {});

}  // namespace strata::keras::optimizers
