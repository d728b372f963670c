#pragma once
// keras.optimizers.Adam (and AMSGrad).
//
//   auto opt = keras::optimizers::Adam({.learning_rate = 1e-3, .amsgrad = true});
//   opt->apply_gradients(strata::zip(grads, model->trainable_variables()));
//
// Keras 2.11+ update at step t = iterations + 1, slots m, v (and vhat) at 0:
//   alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
//   m += (g - m) * (1 - beta_1)
//   v += (g^2 - v) * (1 - beta_2)
//   vhat = max(vhat, v); v = vhat              (amsgrad only)
//   var -= m * alpha / (sqrt(v) + epsilon)      (epsilon is Keras's "epsilon hat")
// Thread-safety: see Optimizer.

#include <memory>
#include <optional>
#include <string>

#include "strata/keras/optimizer.h"

namespace strata::keras::optimizers {

// keras.optimizers.Adam arguments, in Keras's order, with Keras's defaults.
struct AdamOptions {
  LearningRate learning_rate = 0.001;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  bool amsgrad = false;
  // OptimizerArgs (see optimizer.h)
  std::optional<double> weight_decay = std::nullopt;
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = "Adam";
};

class AdamOptimizer : public Optimizer {
 public:
  explicit AdamOptimizer(const AdamOptions& options = {});
  double beta_1() const noexcept { return beta_1_; }
  double beta_2() const noexcept { return beta_2_; }
  double epsilon() const noexcept { return epsilon_; }
  bool amsgrad() const noexcept { return amsgrad_; }

 protected:
  // For AdamW, which shares the update.
  AdamOptimizer(const std::string& default_name, LearningRate learning_rate, double beta_1,
                double beta_2, double epsilon, bool amsgrad, const OptimizerArgs& args);
  void build_slots(const std::vector<Variable>& var_list) override;
  void update_step(const Tensor& gradient, const Variable& variable, double learning_rate) override;
  bool update_is_elementwise() const override { return true; }

 private:
  double beta_1_;
  double beta_2_;
  double epsilon_;
  bool amsgrad_;
};

std::shared_ptr<AdamOptimizer> Adam(const AdamOptions& options = {});

}  // namespace strata::keras::optimizers
