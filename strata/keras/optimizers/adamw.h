#pragma once
// keras.optimizers.AdamW: Adam with decoupled weight decay.
//
//   auto opt = keras::optimizers::AdamW({.learning_rate = 1e-3, .weight_decay = 0.004});
//   opt->exclude_from_weight_decay({}, {"bias"});      // before the first step
//   opt->apply_gradients(strata::zip(grads, model->trainable_variables()));
//
// Each step first decays every (non-excluded) variable, var -= var * wd * lr,
// then applies Adam's update (adam.h) with the same gradient. weight_decay is
// required, as Keras (default 0.004). Thread-safety: see Optimizer.

#include <memory>
#include <optional>
#include <string>

#include "strata/keras/optimizers/adam.h"

namespace strata::keras::optimizers {

// keras.optimizers.AdamW arguments, in Keras's order (weight_decay second),
// with Keras's defaults.
struct AdamWOptions {
  LearningRate learning_rate = 0.001;
  double weight_decay = 0.004;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  bool amsgrad = false;
  // OptimizerArgs (see optimizer.h; weight_decay is above)
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = "AdamW";
};

class AdamWOptimizer : public AdamOptimizer {
 public:
  // InvalidArgumentError if weight_decay is NaN.
  explicit AdamWOptimizer(const AdamWOptions& options = {});
  double weight_decay() const { return *args().weight_decay; }
};

std::shared_ptr<AdamWOptimizer> AdamW(const AdamWOptions& options = {});

}  // namespace strata::keras::optimizers
