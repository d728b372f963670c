#include "strata/keras/optimizers/adam.h"

#include <algorithm>
#include <cmath>

#include "strata/base/errors.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"

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

namespace {

// One pass over the parameters (TF's fused ResourceApplyAdam does the same):
// reads g, m, v (and vhat), writes the new m, v (vhat) and the update, with
// Keras's formulas evaluated in the variable's dtype T in Keras's order.
template <typename T>
void fused_adam(const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& vhat,
                T one_minus_b1, T one_minus_b2, T alpha, T epsilon, Tensor& new_m, Tensor& new_v,
                Tensor& new_vhat, Tensor& delta) {
  const int64_t n = g.num_elements();
  const T* gp = g.data<T>();
  const T* mp = m.data<T>();
  const T* vp = v.data<T>();
  T* nm = new_m.mutable_data<T>();
  T* nv = new_v.mutable_data<T>();
  T* d = delta.mutable_data<T>();
  if (vhat.defined()) {
    const T* hp = vhat.data<T>();
    T* nh = new_vhat.mutable_data<T>();
    for (int64_t i = 0; i < n; ++i) {
      nm[i] = mp[i] + (gp[i] - mp[i]) * one_minus_b1;
      nv[i] = vp[i] + (gp[i] * gp[i] - vp[i]) * one_minus_b2;
      nh[i] = std::max(hp[i], nv[i]);
      d[i] = nm[i] * alpha / (std::sqrt(nh[i]) + epsilon);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    nm[i] = mp[i] + (gp[i] - mp[i]) * one_minus_b1;
    nv[i] = vp[i] + (gp[i] * gp[i] - vp[i]) * one_minus_b2;
    d[i] = nm[i] * alpha / (std::sqrt(nv[i]) + epsilon);
  }
}

}  // namespace

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
    const Variable* v_hat = amsgrad_ ? &slot(variable, "vhat") : nullptr;
    Tensor new_m = Tensor::allocate(dtype, variable.shape());
    Tensor new_v = Tensor::allocate(dtype, variable.shape());
    Tensor new_vhat = v_hat ? Tensor::allocate(dtype, variable.shape()) : Tensor();
    Tensor delta = Tensor::allocate(dtype, variable.shape());
    {
      const Tensor m_now = m.value(), v_now = v.value();
      const Tensor vhat_now = v_hat ? v_hat->value() : Tensor();
      if (dtype == DType::float32) {
        fused_adam<float>(gradient, m_now, v_now, vhat_now, float(1.0 - beta_1_),
                          float(1.0 - beta_2_), alpha.item<float>(), float(epsilon_), new_m, new_v,
                          new_vhat, delta);
      } else {
        fused_adam<double>(gradient, m_now, v_now, vhat_now, 1.0 - beta_1_, 1.0 - beta_2_,
                           alpha.item<double>(), epsilon_, new_m, new_v, new_vhat, delta);
      }
    }  // the reads are released, so the assignments below write in place
    m.assign(new_m);
    v.assign(new_v);
    if (v_hat) v_hat->assign(new_vhat);
    variable.assign_sub(delta);
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
