#pragma once
// In-place training updates of variables (TF's training_ops, e.g.
// tf.raw_ops.ResourceApplyAdam): one fused pass per variable that rewrites the
// variable and its optimizer slots where they lie, with no temporary of the
// variable's size. What the Keras optimizers' update_step runs; not recorded
// by gradient tapes (an assignment, like Variable::assign).
//
//   strata::apply_adam(w, m, v, /*vhat=*/nullptr, grad,
//                      {.one_minus_beta_1 = 0.1, .one_minus_beta_2 = 0.001,
//                       .alpha = alpha, .epsilon = 1e-7});
//
// Each variable is written through Variable::update_in_place, so a
// MirroredVariable in replica context updates only this replica's copy and
// Tensors read before the update keep the old values. Thread-safe as the
// variables are; concurrent updates of the same variables must all use this
// function (it locks var, m, v, vhat in that order).

#include "strata/core/tensor.h"
#include "strata/core/variable.h"
#include "strata/kernels/training.h"

namespace strata {

using kernels::AdamCoefficients;

// Keras's Adam step on `var` with slots `m`, `v` (and `vhat` for amsgrad;
// nullptr otherwise), see kernels::apply_adam for the formulas. Everything
// must have the gradient's shape and dtype, float32 or float64
// (InvalidArgumentError naming the variable and the mismatch otherwise).
void apply_adam(const Variable& var, const Variable& m, const Variable& v, const Variable* vhat,
                const Tensor& grad, const AdamCoefficients& coefficients);

}  // namespace strata
