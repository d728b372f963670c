#include "strata/keras/optimizers/adagrad.h"

#include "strata/base/errors.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras::optimizers {

AdagradOptimizer::AdagradOptimizer(const AdagradOptions& o)
    : Optimizer("Adagrad", o.learning_rate,
                {.weight_decay = o.weight_decay,
                 .clipnorm = o.clipnorm,
                 .clipvalue = o.clipvalue,
                 .global_clipnorm = o.global_clipnorm,
                 .name = o.name}),
      initial_accumulator_value_(o.initial_accumulator_value),
      epsilon_(o.epsilon) {
  // Keras documents "must be non-negative" (TF's legacy Adagrad raises).
  STRATA_CHECK_ARG(o.initial_accumulator_value >= 0.0,
                   "AdagradOptions.initial_accumulator_value must be non-negative, got ",
                   o.initial_accumulator_value);
}

void AdagradOptimizer::build_slots(const std::vector<Variable>& var_list) {
  for (const Variable& v : var_list) {
    add_variable_from_reference(
        v, "accumulator",
        strata::fill(v.shape(),
                     strata::cast(strata::constant(initial_accumulator_value_), v.dtype())));
  }
}

void AdagradOptimizer::update_step(const Tensor& gradient, const Variable& variable,
                                   double learning_rate) {
  const Variable& accumulator = slot(variable, "accumulator");
  accumulator.assign_add(gradient * gradient);
  variable.assign_sub(gradient * learning_rate / strata::sqrt(accumulator.value() + epsilon_));
}

std::shared_ptr<AdagradOptimizer> Adagrad(const AdagradOptions& options) {
  return std::make_shared<AdagradOptimizer>(options);
}

}  // namespace strata::keras::optimizers
