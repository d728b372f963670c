#pragma once
// keras.optimizers.Optimizer: the base of every optimizer (Keras 2.11+ "new"
// optimizer math; each subclass's update rule is documented in its header).
//
//   auto opt = keras::optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9});
//   auto grads = tape.gradient(loss, model->trainable_variables());
//   opt->apply_gradients(strata::zip(grads, model->trainable_variables()));
//   opt->iterations();                          // 1
//
// apply_gradients(grads_and_vars), in Keras's order:
//   1. aggregate_gradients() (unless skip_gradients_aggregation): the
//      strategy plug-in point for gradient aggregation. Single replica:
//      identity. Inside a replica context with more than one replica it
//      all-reduces (SUM) the connected gradients across replicas through
//      ReplicaContext::all_reduce, as Keras's default (the slots are then built
//      once, through a merge_call). With skip_gradients_aggregation the
//      caller has aggregated them (e.g. with ReplicaContext::all_reduce) and
//      every replica applies the same update to its copy of each mirrored
//      variable; the optimizer must then be built (build()) in the strategy's
//      scope beforehand (FailedPreconditionError otherwise), since replica
//      threads cannot create its slots concurrently;
//   2. the current learning rate is fixed for the step: a schedule is
//      evaluated at `iterations` (0 on the first step);
//   3. build(): on the first call, the slot variables for every variable in
//      the list (also those whose gradient is undefined) are created through
//      the variable-creator stack, so under a strategy's scope they are
//      distributed like the model's variables. A later call that names a
//      variable the optimizer was not built with is an InvalidArgumentError,
//      as Keras's KeyError;
//   4. undefined gradients (unconnected variables) are dropped, as Keras
//      filters None gradients; if every gradient is undefined that is an
//      InvalidArgumentError ("No gradients provided for any variable") and
//      nothing changes;
//   5. clipping: clipnorm (tf.clip_by_norm per gradient) if set and > 0, else
//      global_clipnorm (tf.clip_by_global_norm over all gradients), else
//      clipvalue (tf.clip_by_value to [-clipvalue, clipvalue]);
//   6. decoupled weight decay, when weight_decay is set: var -= var * wd * lr
//      (before the update step, on the variable's pre-step value), except for
//      variables excluded with exclude_from_weight_decay();
//   7. update_step(gradient, variable, learning_rate) per pair, then
//      iterations += 1.
// An empty list is a no-op (iterations unchanged). InvalidArgumentError
// naming the variable if a gradient's shape or dtype differs from its
// variable's; that check runs before anything is modified.
//
// Sharded weight update (CommunicationOptions.shard_weight_update of a
// MirroredStrategy or MultiWorkerMirroredStrategy; XLA's
// "Automatic Cross-Replica Sharding of Weight Update in Data-Parallel
// Training"). With R replicas each variable's elements, flattened, form R
// contiguous blocks of ceil(n / R) elements rounded up to a multiple of 16
// (the last ones shorter or empty; a variable of at most 16 elements, a
// scalar say, belongs to replica 0). The rounding puts every block on a
// 64-byte boundary, so a vectorised kernel treats each element alike in its
// block and in the whole variable. After the gradients are reduced, replica r
// runs steps 6 and 7 on block r only: on block r of the variable and of each
// of its slots, in place in its own copies (the blocks are views; nothing is
// copied in or out). The new blocks are then all-gathered (one collective per
// dtype) and every replica writes the full new value into its copy. The
// reduction is the unsharded path's own all-reduce, so both sum in the same
// order: the in-process group's all-reduce is a reduce-scatter whose
// all-gather is free (every rank reads the one shared result buffer) and the
// multi-worker group's reduce-scatter is an all-reduce sliced, so a separate
// reduce-scatter would cost the same (and deterministic_reduction's
// all-reduce applies unchanged). Every copy of every variable is then
// bit-identical to the unsharded update's (the update is element-wise and each
// element sees the same operands).
// Slots are sharded in their content, not their storage: every replica's copy
// of a slot keeps the variable's shape (checkpoints, slot_variables() and
// restores address slots as ordinary mirrored variables), but replica r
// keeps only block r of its copy current, so the optimizer's arithmetic and
// slot traffic divide by R while slot memory does not. slot_variables() and
// variables() first make every copy whole again (gather_sharded_slots()).
// The unsharded path is taken instead when:
//   - the update is not element-wise: a subclass that does not override
//     update_is_elementwise() (every built-in optimizer does), or clipnorm /
//     global_clipnorm, whose norms need the whole gradient (summing partial
//     norms across blocks would change the summation order, hence the bits);
//     clipvalue is element-wise and stays sharded;
//   - skip_gradients_aggregation (the caller reduced the gradients);
//   - check_divergence_every_n_steps > 0 (the check compares whole copies);
//   - a variable is not a MirroredVariable of the strategy, or not float32 /
//     float64.
// A step that takes the unsharded path after sharded ones first makes the
// slots whole (every replica takes the same path, so the gather is collective).
//
// The learning rate is held in float32 (Keras keeps it in a floatx variable)
// and cast to each variable's dtype in update_step.
//
// Thread-safety: one apply_gradients at a time per optimizer, except that under
// a strategy every replica thread calls it once per step (the distribute layer
// synchronises those calls).

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "strata/base/mutex.h"
#include "strata/base/zip.h"
#include "strata/core/tensor.h"
#include "strata/core/variable.h"

namespace strata::distribute {
class ReplicaContext;
class Strategy;
}  // namespace strata::distribute

namespace strata::keras::optimizers {

namespace schedules {
// keras.optimizers.schedules.LearningRateSchedule: learning rate as a function
// of the step (the optimizer's `iterations` before the step). Implementations
// are immutable, hence thread-safe.
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
  template <typename S,
            typename = std::enable_if_t<std::is_base_of_v<schedules::LearningRateSchedule, S>>>
  LearningRate(std::shared_ptr<S> schedule)  // NOLINT: accept the factories' shared_ptr<Concrete>
      : schedule_(std::move(schedule)) {}
  double at(int64_t step) const { return schedule_ ? (*schedule_)(step) : value_; }
  bool is_schedule() const noexcept { return schedule_ != nullptr; }
  const std::shared_ptr<const schedules::LearningRateSchedule>& schedule() const noexcept {
    return schedule_;
  }

 private:
  double value_ = 0.0;
  std::shared_ptr<const schedules::LearningRateSchedule> schedule_;
};

// The arguments every Keras optimizer takes after its own (Keras's order;
// use_ema, ema_momentum, ema_overwrite_frequency and jit_compile are not
// offered). Each optimizer's options struct repeats these fields last.
struct OptimizerArgs {
  std::optional<double> weight_decay = std::nullopt;
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = "";  // "" = the class's name ("SGD", "Adam", ...)
};

using GradsAndVars = std::vector<std::pair<Tensor, Variable>>;

// keras Optimizer.apply_gradients keyword arguments (Keras's order; `name`,
// a name scope in Keras, is not offered).
struct ApplyGradientsOptions {
  bool skip_gradients_aggregation = false;
};

class Optimizer {
 public:
  // `default_name` is used when args.name is empty. InvalidArgumentError if
  // both clipnorm and global_clipnorm are set, as Keras.
  Optimizer(const std::string& default_name, LearningRate learning_rate, const OptimizerArgs& args);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  void apply_gradients(const GradsAndVars& grads_and_vars,
                       const ApplyGradientsOptions& options = {});

  // keras Optimizer.minimize with a callable loss: records `loss()` on a
  // GradientTape (the variables in `var_list` are watched) and applies the
  // gradients of the result with respect to `var_list`.
  void minimize(const std::function<Tensor()>& loss, const std::vector<Variable>& var_list);

  // Creates the slot variables for `var_list` (keras Optimizer.build); a
  // second call is a no-op. apply_gradients calls it on first use; call it
  // yourself to have the slots before the first step (e.g. to restore them).
  void build(const std::vector<Variable>& var_list);
  bool built() const noexcept { return built_; }

  // Steps applied so far (Keras's `iterations`, an int64 variable).
  int64_t iterations() const;
  const Variable& iterations_variable() const noexcept { return iterations_; }

  // The learning rate: the constant, or for a schedule the value used by the
  // latest step (schedule(0) before the first), as Keras's
  // `optimizer.learning_rate`.
  double learning_rate() const;
  // Replaces the learning rate. As Keras, an optimizer made with a schedule
  // accepts another schedule but not a constant (InvalidArgumentError, Keras's
  // TypeError).
  void set_learning_rate(LearningRate learning_rate);
  // The learning rate as given (constant or schedule).
  const LearningRate& learning_rate_spec() const noexcept { return learning_rate_; }

  // Variables (compared by identity) and name patterns (ECMAScript regex,
  // searched in the variable's name) that weight decay skips. Only before the
  // optimizer is built (FailedPreconditionError after).
  void exclude_from_weight_decay(const std::vector<Variable>& var_list,
                                 const std::vector<std::string>& var_names = {});

  const std::string& name() const noexcept { return name_; }
  const OptimizerArgs& args() const noexcept { return args_; }
  // iterations then every slot variable, in creation order (what a checkpoint
  // saves). After sharded updates it first calls gather_sharded_slots().
  std::vector<Variable> variables() const;

  // After sharded weight updates, makes every copy of every slot hold the
  // whole value again (each replica kept only its block current): the blocks
  // are all-gathered, through strategy.run when called in cross-replica
  // context. A no-op when the slots are whole. Under
  // MultiWorkerMirroredStrategy it is collective: every worker calls it at the
  // same point (as every worker saves a checkpoint). Logically const: the
  // slots' values do not change, only which copies hold them.
  void gather_sharded_slots() const;
  // Whether some replica's copies of the slots hold only its block (a sharded
  // update ran since the last gather).
  bool slots_sharded() const;

  // A slot variable with the variable it belongs to (its `reference`) and the
  // slot's name ("momentum", "m", "v", ...).
  struct SlotVariable {
    Variable reference;
    std::string slot_name;
    Variable slot;
  };
  // Every slot, in creation order. A checkpoint saves each keyed by its
  // reference variable's place in the object graph and the slot name (TF's
  // slot_variables), not by creation order.
  // Calls gather_sharded_slots() first.
  std::vector<SlotVariable> slot_variables() const {
    gather_sharded_slots();
    return slot_records_;
  }

  // Deferred restoration (strata::train::Checkpoint): `callback(slot)` runs
  // for every slot build() creates from now on, once all of that build's
  // slots exist and the optimizer counts as built, so a checkpoint read before
  // the first apply_gradients assigns the saved slot values there. Callbacks
  // run in the order added; an exception from one propagates out of build()
  // (and so out of apply_gradients, before any update is applied).
  using SlotCreatedCallback = std::function<void(const SlotVariable& slot)>;
  void add_slot_created_callback(SlotCreatedCallback callback);

 protected:
  // Creates the slots for `var_list` (called once, by build()).
  virtual void build_slots(const std::vector<Variable>& var_list) { (void)var_list; }
  // Applies one (already aggregated, clipped and decayed) gradient to its
  // variable. `learning_rate` is the step's rate (float32-rounded).
  virtual void update_step(const Tensor& gradient, const Variable& variable,
                           double learning_rate) = 0;
  // Whether update_step is element-wise: element i of the variable and of
  // each slot depends only on element i of the gradient, variable and slots
  // (and on scalars such as the learning rate and `iterations`), so it may run
  // on a contiguous block of the flattened variable (the sharded weight
  // update). A subclass that overrides it with true must read its slots
  // through slot() and write nothing but the variable and its slots.
  virtual bool update_is_elementwise() const { return false; }

  // A non-trainable slot shaped like `reference`, named
  // "<optimizer>/<reference name>/<slot>", initialised to `initial` (zeros of
  // the reference's shape and dtype when undefined), made through the
  // variable-creator stack.
  Variable add_variable_from_reference(const Variable& reference, const std::string& slot_name,
                                       const Tensor& initial = Tensor());
  // The slot made for `variable` under `slot_name` (InternalError if missing).
  const Variable& slot(const Variable& variable, const std::string& slot_name) const;

  // Gradient aggregation across replicas (see the header comment). Undefined
  // gradients stay undefined. Virtual so a strategy-specific optimizer wrapper
  // can change it.
  virtual std::vector<Tensor> aggregate_gradients(const std::vector<Tensor>& gradients);

 private:
  std::vector<Tensor> clip_gradients(std::vector<Tensor> gradients) const;
  // Whether this step's update is sharded (see the header comment).
  bool shards_update(const distribute::ReplicaContext& ctx, const std::vector<Variable>& vars,
                     const ApplyGradientsOptions& options) const;
  // Steps 6 and 7 on this replica's blocks, then the all-gather of the new
  // values (the sharded weight update). Gradients are aggregated.
  void apply_sharded(distribute::ReplicaContext& ctx, const std::vector<Tensor>& grads,
                     const std::vector<Variable>& vars, double learning_rate);
  // On a replica thread: makes this replica's copy of every slot whole.
  void gather_slot_blocks(distribute::ReplicaContext& ctx) const;
  // The weight decay of step 6 on `variable` (a whole variable or a block).
  void decay_weights(const Variable& variable, double learning_rate) const;
  bool uses_weight_decay(const Variable& variable) const;

  std::string name_;
  LearningRate learning_rate_;
  // Atomic: every replica thread of a strategy writes the same value.
  std::atomic<double> current_learning_rate_ = 0.0;
  OptimizerArgs args_;
  Variable iterations_;
  bool built_ = false;
  // Variables the optimizer was built with (identity), for the KeyError check.
  std::vector<const VariableImpl*> built_for_;
  std::vector<const VariableImpl*> excluded_from_decay_;
  // Compiled exclude_from_weight_decay patterns (keeps <regex> out of this header).
  struct DecayPatterns;
  std::unique_ptr<DecayPatterns> excluded_from_decay_patterns_;
  // Slots in creation order, and an index by (variable identity, slot name).
  std::vector<Variable> slot_order_;
  std::map<std::pair<const VariableImpl*, std::string>, Variable> slots_;
  std::vector<SlotVariable> slot_records_;
  std::vector<SlotCreatedCallback> slot_created_callbacks_;
  // Whether local replica `local_replica`'s slot copies hold only its block.
  bool holds_slot_blocks(int local_replica) const;

  // Sharded weight update state.
  mutable Mutex shard_mu_;
  // The local replicas whose slot copies hold only their block (each replica
  // adds and removes itself, so every replica decides from its own history),
  // and the strategy whose replicas they are.
  mutable std::set<int> replicas_holding_blocks_ STRATA_GUARDED_BY(shard_mu_);
  distribute::Strategy* sharded_strategy_ STRATA_GUARDED_BY(shard_mu_) = nullptr;
  // During a sharded update_step: the block variable standing for a variable
  // (by the block's identity) -> its slots' blocks by slot name, which slot()
  // returns. Each replica inserts and erases its own blocks only.
  std::map<const VariableImpl*, std::map<std::string, Variable>> block_slots_
      STRATA_GUARDED_BY(shard_mu_);
};

using OptimizerPtr = std::shared_ptr<Optimizer>;

}  // namespace strata::keras::optimizers
