#include "strata/keras/optimizers/sgd.h"

#include <cmath>

#include "strata/base/errors.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras::optimizers {

SGDOptimizer::SGDOptimizer(const SGDOptions& o)
    : Optimizer("SGD", o.learning_rate,
                {.weight_decay = o.weight_decay,
                 .clipnorm = o.clipnorm,
                 .clipvalue = o.clipvalue,
                 .global_clipnorm = o.global_clipnorm,
                 .name = o.name}),
      momentum_(o.momentum),
      nesterov_(o.nesterov) {
  STRATA_CHECK_ARG(o.momentum >= 0.0 && o.momentum <= 1.0,
                   "SGDOptions.momentum must be between [0, 1], got ", o.momentum);
}

void SGDOptimizer::build_slots(const std::vector<Variable>& var_list) {
  // Keras makes the momentum slot for every variable, even with momentum 0.
  for (const Variable& v : var_list) add_variable_from_reference(v, "m");
}

void SGDOptimizer::update_step(const Tensor& gradient, const Variable& variable,
                               double learning_rate) {
  const Variable& m = slot(variable, "m");
  Tensor lr_g = gradient * learning_rate;
  Tensor new_m = m.value() * momentum_ - lr_g;
  m.assign(new_m);
  if (nesterov_) {
    variable.assign_add(new_m * momentum_ - lr_g);
  } else {
    variable.assign_add(new_m);
  }
}

std::shared_ptr<SGDOptimizer> SGD(const SGDOptions& options) {
  return std::make_shared<SGDOptimizer>(options);
}

}  // namespace strata::keras::optimizers
