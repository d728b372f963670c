#pragma once
// keras.optimizers.Optimizer: the base of every optimizer (Keras 2.11+ "new"
// optimizer math; each subclass's update rule is documented in its header).
//
//   auto opt = keras::optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9});
//   auto grads = tape.gradient(loss, model->trainable_variables());
//   opt->apply_gradients(strata::zip(grads, model->trainable_variables()));
//   opt->iterations();                          // 1
//
// apply_gradients(grads_and_vars):
//   1. creates the slot variables on first use (build), through the variable-
//      creator stack, so under a strategy's scope they are distributed like the
//      model's variables;
//   2. aggregate_gradients(): the strategy plug-in point for gradient
//      aggregation. Single device: identity. Inside a replica context with more
//      than one replica it all-reduces (SUM) the gradients across replicas, as
//      Keras's `experimental_aggregate_gradients=True` (the distribute layer
//      provides the all-reduce; the optimizer only asks the replica context);
//   3. clipping (clipnorm per gradient, global_clipnorm over all, clipvalue);
//   4. update_step(gradient, variable, learning_rate) per pair, then
//      iterations += 1. An undefined gradient (unconnected) skips its variable,
//      as Keras filters None gradients.
// InvalidArgumentError if a gradient's shape or dtype differs from its variable's.
//
// Thread-safety: one apply_gradients at a time per optimizer, except that under
// a strategy every replica thread calls it once per step (the distribute layer
// synchronises those calls).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/base/zip.h"
#include "strata/core/tensor.h"
#include "strata/core/variable.h"

namespace strata::keras::optimizers {

namespace schedules {
// keras.optimizers.schedules.LearningRateSchedule: learning rate as a function of the step.
class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  virtual double operator()(int64_t step) const = 0;
};
}  // namespace schedules

// A constant learning rate or a schedule (Keras accepts either).
class LearningRate {
 public:
  LearningRate(double value) : value_(value) {}  // NOLINT(google-explicit-constructor): as Keras
  LearningRate(std::shared_ptr<const schedules::LearningRateSchedule> schedule)  // NOLINT
      : schedule_(std::move(schedule)) {}
  double at(int64_t step) const { return schedule_ ? (*schedule_)(step) : value_; }
  bool is_schedule() const noexcept { return schedule_ != nullptr; }

 private:
  double value_ = 0.0;
  std::shared_ptr<const schedules::LearningRateSchedule> schedule_;
};

// The arguments every Keras optimizer takes after its own (Keras's order).
struct OptimizerArgs {
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = "";
};

using GradsAndVars = std::vector<std::pair<Tensor, Variable>>;

class Optimizer {
 public:
  Optimizer(std::string name, LearningRate learning_rate, const OptimizerArgs& args);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  void apply_gradients(const GradsAndVars& grads_and_vars);

  // Steps applied so far (Keras's `iterations`, an int64 variable).
  int64_t iterations() const;
  const Variable& iterations_variable() const noexcept { return iterations_; }
  // The learning rate at the current step; setting it replaces a schedule by a constant.
  double learning_rate() const;
  void set_learning_rate(LearningRate learning_rate);

  const std::string& name() const noexcept { return name_; }
  // iterations then every slot variable, in creation order (what a checkpoint saves).
  std::vector<Variable> variables() const;

 protected:
  // Creates the slots for `vars` (called once, on the first apply_gradients).
  virtual void build(const std::vector<Variable>& vars) { (void)vars; }
  // Applies one (already aggregated and clipped) gradient to its variable.
  virtual void update_step(const Tensor& gradient, const Variable& variable, double learning_rate) = 0;

  // A slot shaped like `reference`, named "<optimizer>/<reference name>/<slot>",
  // initialised to `initial` (zeros when undefined).
  Variable add_variable_from_reference(const Variable& reference, const std::string& slot_name,
                                       const Tensor& initial = Tensor());
  // The slot made for `variable` under `slot_name` (InternalError if missing).
  const Variable& slot(const Variable& variable, const std::string& slot_name) const;

  // Gradient aggregation across replicas (see the header comment). Virtual so a
  // strategy-specific optimizer wrapper can change it.
  virtual std::vector<Tensor> aggregate_gradients(const std::vector<Tensor>& gradients);

 private:
  std::string name_;
  LearningRate learning_rate_;
  OptimizerArgs args_;
  Variable iterations_;
  bool built_ = false;
  struct Slot {
    const VariableImpl* variable;
    std::string name;
    Variable value;
  };
  std::vector<Slot> slots_;
};

using OptimizerPtr = std::shared_ptr<Optimizer>;

}  // namespace strata::keras::optimizers
