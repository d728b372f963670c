#include "strata/keras/optimizers/adam.h"

#include <algorithm>
#include <cmath>

#include "strata/base/errors.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/ops/training_ops.h"

namespace strata::keras::optimizers {

AdamOptimizer::AdamOptimizer(const AdamOptions& o)
    : AdamOptimizer("Adam", o.learning_rate, o.beta_1, o.beta_2, o.epsilon, o.amsgrad,
                    {.weight_decay = o.weight_decay,
                     .clipnorm = o.clipnorm,
                     .clipvalue = o.clipvalue,
                     .global_clipnorm = o.global_clipnorm,
                     .name = o.name}) {}

AdamOptimizer::AdamOptimizer(const std::string& default_name, LearningRate learning_rate,
                             double beta_1, double beta_2, double epsilon, bool amsgrad,
                             const OptimizerArgs& args)
    : Optimizer(default_name, std::move(learning_rate), args),
      beta_1_(beta_1),
      beta_2_(beta_2),
      epsilon_(epsilon),
      amsgrad_(amsgrad) {}

void AdamOptimizer::build_slots(const std::vector<Variable>& var_list) {
  // Keras's creation order: every m and v interleaved, then every vhat.
  for (const Variable& v : var_list) {
    add_variable_from_reference(v, "m");
    add_variable_from_reference(v, "v");
  }
  if (amsgrad_) {
    for (const Variable& v : var_list) add_variable_from_reference(v, "vhat");
  }
}

void AdamOptimizer::update_step(const Tensor& gradient, const Variable& variable,
                                double learning_rate) {
  const DType dtype = variable.dtype();
  // Keras computes the bias corrections in the variable's dtype.
  const Tensor local_step = strata::cast(strata::constant(iterations() + 1), dtype);
  const Tensor beta_1_power =
      strata::pow(strata::cast(strata::constant(beta_1_), dtype), local_step);
  const Tensor beta_2_power =
      strata::pow(strata::cast(strata::constant(beta_2_), dtype), local_step);
  const Tensor lr = strata::cast(strata::constant(learning_rate), dtype);
  const Tensor alpha = lr * strata::sqrt(1.0 - beta_2_power) / (1.0 - beta_1_power);

  const Variable& m = slot(variable, "m");
  const Variable& v = slot(variable, "v");
  if (dtype == DType::float32 || dtype == DType::float64) {
    // One fused pass rewriting variable, m, v (vhat) in place, as TF's
    // ResourceApplyAdam.
    strata::apply_adam(variable, m, v, amsgrad_ ? &slot(variable, "vhat") : nullptr, gradient,
                       {.one_minus_beta_1 = 1.0 - beta_1_,
                        .one_minus_beta_2 = 1.0 - beta_2_,
                        .alpha = alpha.scalar_as_double(),
                        .epsilon = epsilon_});
    return;
  }
  m.assign_add((gradient - m.value()) * (1.0 - beta_1_));
  v.assign_add((strata::square(gradient) - v.value()) * (1.0 - beta_2_));
  Tensor v_used = v.value();
  if (amsgrad_) {
    const Variable& v_hat = slot(variable, "vhat");
    v_hat.assign(strata::maximum(v_hat.value(), v_used));
    v_used = v_hat.value();
  }
  variable.assign_sub(m.value() * alpha / (strata::sqrt(v_used) + epsilon_));
}

std::shared_ptr<AdamOptimizer> Adam(const AdamOptions& options) {
  return std::make_shared<AdamOptimizer>(options);
}

}  // namespace strata::keras::optimizers
