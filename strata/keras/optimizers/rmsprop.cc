#include "strata/keras/optimizers/rmsprop.h"

#include "strata/base/errors.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras::optimizers {

RMSpropOptimizer::RMSpropOptimizer(const RMSpropOptions& o)
    : Optimizer("RMSprop", o.learning_rate,
                {.weight_decay = o.weight_decay,
                 .clipnorm = o.clipnorm,
                 .clipvalue = o.clipvalue,
                 .global_clipnorm = o.global_clipnorm,
                 .name = o.name}),
      rho_(o.rho),
      momentum_(o.momentum),
      epsilon_(o.epsilon),
      centered_(o.centered) {
  STRATA_CHECK_ARG(o.momentum >= 0.0, "RMSpropOptions.momentum must be >= 0, got ", o.momentum);
}

void RMSpropOptimizer::build_slots(const std::vector<Variable>& var_list) {
  // Keras's creation order: all velocities, then momentums, then average gradients.
  for (const Variable& v : var_list) add_variable_from_reference(v, "velocity");
  if (momentum_ > 0) {
    for (const Variable& v : var_list) add_variable_from_reference(v, "momentum");
  }
  if (centered_) {
    for (const Variable& v : var_list) add_variable_from_reference(v, "average_gradient");
  }
}

void RMSpropOptimizer::update_step(const Tensor& gradient, const Variable& variable,
                                   double learning_rate) {
  const Variable& velocity = slot(variable, "velocity");
  Tensor new_velocity = velocity.value() * rho_ + strata::square(gradient) * (1.0 - rho_);
  velocity.assign(new_velocity);
  Tensor denominator;
  if (centered_) {
    const Variable& average_grad = slot(variable, "average_gradient");
    Tensor new_average = average_grad.value() * rho_ + gradient * (1.0 - rho_);
    average_grad.assign(new_average);
    denominator = new_velocity - strata::square(new_average) + epsilon_;
  } else {
    denominator = new_velocity + epsilon_;
  }
  Tensor increment = gradient * learning_rate * strata::rsqrt(denominator);
  if (momentum_ > 0) {
    const Variable& momentum = slot(variable, "momentum");
    Tensor new_momentum = momentum.value() * momentum_ + increment;
    momentum.assign(new_momentum);
    variable.assign_sub(new_momentum);
  } else {
    variable.assign_sub(increment);
  }
}

std::shared_ptr<RMSpropOptimizer> RMSprop(const RMSpropOptions& options) {
  return std::make_shared<RMSpropOptimizer>(options);
}

}  // namespace strata::keras::optimizers
