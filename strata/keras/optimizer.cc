#include "strata/keras/optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/strategy.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras::optimizers {
namespace {

// Keras keeps the learning rate in a float32 (floatx) variable.
double as_float32(double v) { return static_cast<double>(static_cast<float>(v)); }

Tensor scalar_of(double v, DType dtype) { return strata::cast(strata::constant(v), dtype); }

// sum(g^2) of one gradient, accumulated in double.
double squared_l2(const Tensor& g) {
  return strata::reduce_sum(strata::square(strata::cast(g, DType::float64))).scalar_as_double();
}

}  // namespace

struct Optimizer::DecayPatterns {
  std::vector<std::regex> patterns;
};

Optimizer::~Optimizer() = default;

Optimizer::Optimizer(const std::string& default_name, LearningRate learning_rate,
                     const OptimizerArgs& args)
    : name_(args.name.empty() ? default_name : args.name),
      learning_rate_(std::move(learning_rate)),
      args_(args) {
  STRATA_CHECK_ARG(!(args.clipnorm && args.global_clipnorm), name_,
                   ": at most one of `clipnorm` and `global_clipnorm` can be set, got clipnorm=",
                   *args.clipnorm, ", global_clipnorm=", *args.global_clipnorm);
  for (const auto& [field, value] :
       {std::pair{"clipnorm", args.clipnorm}, std::pair{"clipvalue", args.clipvalue},
        std::pair{"global_clipnorm", args.global_clipnorm}}) {
    STRATA_CHECK_ARG(!value || !std::isnan(*value), name_, ": ", field,
                     " must be a number, got nan");
  }
  iterations_ = Variable(strata::constant<int64_t>(0),
                         {.name = str_cat(name_, "/iteration"), .trainable = false});
  current_learning_rate_ = as_float32(learning_rate_.at(0));
}

int64_t Optimizer::iterations() const { return iterations_.value().item<int64_t>(); }

double Optimizer::learning_rate() const { return current_learning_rate_; }

void Optimizer::set_learning_rate(LearningRate learning_rate) {
  STRATA_CHECK_ARG(!learning_rate_.is_schedule() || learning_rate.is_schedule(), name_,
                   ": this optimizer was created with a LearningRateSchedule as its learning_rate, "
                   "hence its learning rate is not settable to a constant");
  learning_rate_ = std::move(learning_rate);
  current_learning_rate_ = as_float32(learning_rate_.at(iterations()));
}

void Optimizer::exclude_from_weight_decay(const std::vector<Variable>& var_list,
                                          const std::vector<std::string>& var_names) {
  STRATA_CHECK(
      FAILED_PRECONDITION, !built_, name_,
      ": exclude_from_weight_decay() can only be configured before the optimizer is built");
  excluded_from_decay_.clear();
  for (const Variable& v : var_list) excluded_from_decay_.push_back(v.impl_ptr().get());
  std::vector<std::regex> patterns;
  for (const std::string& pattern : var_names) {
    try {
      patterns.emplace_back(pattern);
    } catch (const std::regex_error& e) {
      STRATA_CHECK_ARG(false, name_, ": exclude_from_weight_decay: invalid pattern '", pattern,
                       "': ", e.what());
    }
  }
  excluded_from_decay_patterns_ =
      std::make_unique<DecayPatterns>(DecayPatterns{std::move(patterns)});
}

bool Optimizer::uses_weight_decay(const Variable& variable) const {
  const VariableImpl* id = variable.impl_ptr().get();
  if (std::find(excluded_from_decay_.begin(), excluded_from_decay_.end(), id) !=
      excluded_from_decay_.end()) {
    return false;
  }
  if (excluded_from_decay_patterns_) {
    for (const std::regex& pattern : excluded_from_decay_patterns_->patterns) {
      if (std::regex_search(variable.name(), pattern)) return false;
    }
  }
  return true;
}

std::vector<Variable> Optimizer::variables() const {
  std::vector<Variable> out{iterations_};
  out.insert(out.end(), slot_order_.begin(), slot_order_.end());
  return out;
}

void Optimizer::build(const std::vector<Variable>& var_list) {
  if (built_) return;
  for (const Variable& v : var_list) {
    STRATA_CHECK_ARG(v.defined(), name_, ": build() got an undefined variable");
    built_for_.push_back(v.impl_ptr().get());
  }
  const size_t first_new_slot = slot_records_.size();
  build_slots(var_list);
  built_ = true;
  for (const SlotCreatedCallback& callback : slot_created_callbacks_) {
    for (size_t i = first_new_slot; i < slot_records_.size(); ++i) callback(slot_records_[i]);
  }
}

void Optimizer::add_slot_created_callback(SlotCreatedCallback callback) {
  STRATA_CHECK_ARG(callback != nullptr, name_, ": add_slot_created_callback got an empty callback");
  slot_created_callbacks_.push_back(std::move(callback));
}

Variable Optimizer::add_variable_from_reference(const Variable& reference,
                                                const std::string& slot_name,
                                                const Tensor& initial) {
  Tensor value = initial.defined() ? initial : strata::zeros(reference.shape(), reference.dtype());
  STRATA_CHECK_ARG(value.shape() == reference.shape() && value.dtype() == reference.dtype(), name_,
                   ": initial value of slot '", slot_name, "' for variable '", reference.name(),
                   "' is ", value.shape(), " ", dtype_name(value.dtype()), ", expected ",
                   reference.shape(), " ", dtype_name(reference.dtype()));
  const auto key = std::pair{reference.impl_ptr().get(), slot_name};
  STRATA_INTERNAL_CHECK(slots_.find(key) == slots_.end(), "slot '", slot_name, "' for variable '",
                        reference.name(), "' made twice");
  Variable slot_var(
      value, {.name = str_cat(name_, "/", reference.name(), "/", slot_name), .trainable = false});
  slots_.emplace(key, slot_var);
  slot_order_.push_back(slot_var);
  slot_records_.push_back({reference, slot_name, slot_var});
  return slot_var;
}

const Variable& Optimizer::slot(const Variable& variable, const std::string& slot_name) const {
  auto it = slots_.find(std::pair{variable.impl_ptr().get(), slot_name});
  STRATA_INTERNAL_CHECK(it != slots_.end(), name_, " has no slot '", slot_name, "' for variable '",
                        variable.name(), "'");
  return it->second;
}

std::vector<Tensor> Optimizer::aggregate_gradients(const std::vector<Tensor>& gradients) {
  distribute::ReplicaContext* ctx = distribute::get_replica_context();
  if (ctx == nullptr || ctx->num_replicas_in_sync() == 1) return gradients;
  // SUM all-reduce of the connected gradients, as Keras's default
  // aggregation: every replica then applies the same update to its own copy.
  // Every replica must have the same gradients connected (else the
  // collective reports the mismatch on every replica).
  std::vector<Tensor> defined;
  for (const Tensor& g : gradients) {
    if (g.defined()) defined.push_back(g);
  }
  std::vector<Tensor> reduced = ctx->all_reduce(distribute::ReduceOp::SUM, defined);
  std::vector<Tensor> out;
  out.reserve(gradients.size());
  size_t next = 0;
  for (const Tensor& g : gradients) out.push_back(g.defined() ? reduced[next++] : Tensor());
  return out;
}

std::vector<Tensor> Optimizer::clip_gradients(std::vector<Tensor> grads) const {
  // Keras's precedence: clipnorm, else global_clipnorm, else clipvalue; a
  // value <= 0 disables that mode.
  if (args_.clipnorm && *args_.clipnorm > 0) {
    const double c = *args_.clipnorm;
    for (Tensor& g : grads) {
      // tf.clip_by_norm: g * c / max(||g||, c).
      const double norm = std::sqrt(squared_l2(g));
      g = strata::multiply(g, scalar_of(c / std::max(norm, c), g.dtype()));
    }
    return grads;
  }
  if (args_.global_clipnorm && *args_.global_clipnorm > 0) {
    const double c = *args_.global_clipnorm;
    double total = 0.0;
    for (const Tensor& g : grads) total += squared_l2(g);
    const double norm = std::sqrt(total);
    // tf.clip_by_global_norm: scale = c * min(1 / norm, 1 / c); a non-finite
    // norm makes every gradient NaN, as TF.
    const double scale = std::isfinite(norm) ? c * std::min(1.0 / norm, 1.0 / c)
                                             : std::numeric_limits<double>::quiet_NaN();
    for (Tensor& g : grads) g = strata::multiply(g, scalar_of(scale, g.dtype()));
    return grads;
  }
  if (args_.clipvalue && *args_.clipvalue > 0) {
    const double c = *args_.clipvalue;
    for (Tensor& g : grads) {
      g = strata::minimum(strata::maximum(g, scalar_of(-c, g.dtype())), scalar_of(c, g.dtype()));
    }
  }
  return grads;
}

void Optimizer::minimize(const std::function<Tensor()>& loss,
                         const std::vector<Variable>& var_list) {
  STRATA_CHECK_ARG(loss != nullptr, name_, ": minimize got an empty loss function");
  std::vector<Tensor> grads;
  {
    GradientTape tape;
    for (const Variable& v : var_list) tape.watch(v);
    const Tensor value = loss();
    STRATA_CHECK_ARG(value.defined(), name_,
                     ": minimize: the loss function returned an undefined tensor");
    grads = tape.gradient(value, var_list);
  }
  apply_gradients(strata::zip(grads, var_list));
}

void Optimizer::apply_gradients(const GradsAndVars& grads_and_vars,
                                const ApplyGradientsOptions& options) {
  if (grads_and_vars.empty()) {
    current_learning_rate_ = as_float32(learning_rate_.at(iterations()));
    return;
  }
  std::vector<Variable> vars;
  std::vector<Tensor> grads;
  vars.reserve(grads_and_vars.size());
  grads.reserve(grads_and_vars.size());
  for (const auto& [g, v] : grads_and_vars) {
    STRATA_CHECK_ARG(v.defined(), name_, ": apply_gradients got an undefined variable");
    vars.push_back(v);
    grads.push_back(g);
  }
  // Under a strategy with several replicas every replica thread runs this
  // once per step: the optimizer's own state must be distributed too (each
  // copy updated by its replica), and its slots are made once, by one thread.
  distribute::ReplicaContext* replica = distribute::get_replica_context();
  if (replica != nullptr && replica->num_replicas_in_sync() > 1) {
    STRATA_CHECK(FAILED_PRECONDITION, distribute::is_distributed_variable(iterations_), name_,
                 ": apply_gradients on ", replica->num_replicas_in_sync(),
                 " replicas needs an optimizer created inside the strategy's scope()");
    if (!built_ && !options.skip_gradients_aggregation) {
      replica->merge_call([&](distribute::Strategy&) { build(vars); });
    }
  }
  // Keras aggregates first (distributed Optimizer.apply_gradients), then runs
  // the base steps.
  if (options.skip_gradients_aggregation) {
    const distribute::ReplicaContext* ctx = distribute::get_replica_context();
    STRATA_CHECK(
        FAILED_PRECONDITION, built_ || ctx == nullptr || ctx->num_replicas_in_sync() == 1, name_,
        ": apply_gradients on ", ctx ? ctx->num_replicas_in_sync() : 1,
        " replicas needs the optimizer built first: call build(trainable_variables) in the "
        "strategy's scope before the training loop");
  } else {
    grads = aggregate_gradients(grads);
  }
  STRATA_INTERNAL_CHECK(grads.size() == vars.size(),
                        "aggregate_gradients changed the number of gradients");

  const double lr = as_float32(learning_rate_.at(iterations()));
  current_learning_rate_ = lr;
  build(vars);
  for (const Variable& v : vars) {
    STRATA_CHECK_ARG(
        std::find(built_for_.begin(), built_for_.end(), v.impl_ptr().get()) != built_for_.end(),
        name_, ": the optimizer cannot recognize variable '", v.name(),
        "'; it was built with another list of variables (call build() with the full list "
        "of trainable variables before the training loop, or use a new optimizer)");
  }

  // Drop unconnected variables (Keras's filter_empty_gradients).
  std::vector<Tensor> kept_grads;
  std::vector<Variable> kept_vars;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!grads[i].defined()) continue;
    kept_grads.push_back(grads[i]);
    kept_vars.push_back(vars[i]);
  }
  if (kept_grads.empty()) {
    std::string names;
    for (const Variable& v : vars) names += (names.empty() ? "'" : ", '") + v.name() + "'";
    STRATA_CHECK_ARG(false, name_, ": No gradients provided for any variable: [", names, "]");
  }
  for (size_t i = 0; i < kept_vars.size(); ++i) {
    const Tensor& g = kept_grads[i];
    const Variable& v = kept_vars[i];
    STRATA_CHECK_ARG(g.shape() == v.shape(), name_, ": gradient for variable '", v.name(),
                     "' has shape ", g.shape(), ", expected the variable's shape ", v.shape());
    STRATA_CHECK_ARG(g.dtype() == v.dtype(), name_, ": gradient for variable '", v.name(),
                     "' has dtype ", dtype_name(g.dtype()), ", expected the variable's dtype ",
                     dtype_name(v.dtype()));
  }

  kept_grads = clip_gradients(std::move(kept_grads));
  if (args_.weight_decay) {
    for (const Variable& v : kept_vars) {
      if (!uses_weight_decay(v)) continue;
      // Keras: variable.assign_sub(variable * wd * lr), in the variable's dtype.
      v.assign_sub(
          strata::multiply(strata::multiply(v.value(), scalar_of(*args_.weight_decay, v.dtype())),
                           scalar_of(lr, v.dtype())));
    }
  }
  for (size_t i = 0; i < kept_vars.size(); ++i) update_step(kept_grads[i], kept_vars[i], lr);
  iterations_.assign_add(strata::constant<int64_t>(1));
}

}  // namespace strata::keras::optimizers
