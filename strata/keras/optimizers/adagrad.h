#pragma once
// keras.optimizers.Adagrad.
//
//   auto opt = keras::optimizers::Adagrad({.learning_rate = 0.1});
//   opt->apply_gradients(strata::zip(grads, model->trainable_variables()));
//
// Keras 2.11+ update, slot accumulator starting at initial_accumulator_value:
//   accumulator += g^2
//   var -= lr * g / sqrt(accumulator + epsilon)
// Thread-safety: see Optimizer.

#include <memory>
#include <optional>
#include <string>

#include "strata/keras/optimizer.h"

namespace strata::keras::optimizers {

// keras.optimizers.Adagrad arguments, in Keras's order, with Keras's defaults.
struct AdagradOptions {
  LearningRate learning_rate = 0.001;
  double initial_accumulator_value = 0.1;  // >= 0
  double epsilon = 1e-7;
  // OptimizerArgs (see optimizer.h)
  std::optional<double> weight_decay = std::nullopt;
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = "Adagrad";
};

class AdagradOptimizer : public Optimizer {
 public:
  // InvalidArgumentError if initial_accumulator_value < 0.
  explicit AdagradOptimizer(const AdagradOptions& options = {});
  double initial_accumulator_value() const noexcept { return initial_accumulator_value_; }
  double epsilon() const noexcept { return epsilon_; }

 protected:
  void build_slots(const std::vector<Variable>& var_list) override;
  void update_step(const Tensor& gradient, const Variable& variable, double learning_rate) override;
  bool update_is_elementwise() const override { return true; }

 private:
  double initial_accumulator_value_;
  double epsilon_;
};

std::shared_ptr<AdagradOptimizer> Adagrad(const AdagradOptions& options = {});

}  // namespace strata::keras::optimizers
