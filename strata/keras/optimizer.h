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
// (distribute::update_block: the last ones shorter or empty; a variable of at
// most 16 elements, a scalar say, belongs to replica 0). A sharded step:
//   1. reduce-scatters the gradients instead of step 1's all-reduce: one
//      collective per dtype, after which replica r holds block r of every
//      summed gradient only (distribute::reduce_scatter_rows: the strategy's
//      Collectives::reduce_scatter, whose cost is the group's: the in-process
//      group reduces 1/R per rank; the multi-worker hierarchical group
//      answers with its all-reduce, sliced). Each element is
//      summed across the replicas in the all-reduce's order, so the blocks
//      are bit-identical to the all-reduce's (deterministic_reduction keeps
//      its fixed-tree all-reduce and each replica keeps its block);
//   2. runs steps 5 to 7 on block r only: clipvalue on the gradient blocks,
//      then weight decay and update_step on block r of the variable and of
//      each of its slots, in place in the replica's own copies (the blocks
//      are views; nothing is copied in or out);
//   3. all-gathers the new blocks (one collective per dtype) and every
//      replica writes the whole new value into its copy.
// Every copy of every variable is then bit-identical to the unsharded
// update's (the update is element-wise and each element sees the same
// operands). aggregate_gradients() is not called by a sharded step.
// Slots are divided: when build() runs in the cross-replica context of a
// strategy that shards weight updates (its scope, or the merge_call of the
// first apply_gradients), for an element-wise update without clipnorm or
// global_clipnorm, each slot of a float32 / float64 MirroredVariable of that
// strategy with aggregation NONE is a sharded slot
// (distribute::make_sharded_slot_variable, made directly rather than through
// the variable-creator stack): replica r's copy stores block r only, 1/R of
// the slot's bytes (slot_bytes() reports them). Every other slot is an
// ordinary mirrored slot, whole on every replica, and its variable is updated
// unsharded. A sharded slot's copy becomes whole (all R blocks gathered) when
// slot_variables(), variables() or gather_sharded_slots() ask for it (a
// checkpoint save: the saved slot is whole, as TensorFlow's) and before a
// step that takes the unsharded path; the next sharded step drops every
// element outside the replica's block again. Assigning a whole value to a
// copy that stores its block keeps the block: a checkpoint restored before
// the optimizer is built (deferred restoration) is scattered straight into
// the blocks; one restored into a built optimizer lists its slots first
// (slot_variables(), a gather), so the copies take the whole saved value
// until the next sharded step. Reading a copy that stores only its block is
// FailedPreconditionError.
// A step takes the unsharded path (the all-reduce, every replica updating its
// whole copy) when:
//   - the update is not element-wise: a subclass that does not override
//     update_is_elementwise() (every built-in optimizer does), or clipnorm /
//     global_clipnorm, whose norms need the whole gradient (summing partial
//     norms across blocks would change the summation order, hence the bits);
//     clipvalue is element-wise and stays sharded;
//   - skip_gradients_aggregation (the caller reduced the gradients);
//   - check_divergence_every_n_steps > 0 (the check compares whole copies);
//   - a variable is not a MirroredVariable of the strategy, not float32 /
//     float64, or its slots are not sharded slots (the optimizer was built
//     outside the strategy's cross-replica context).
// Such a step after sharded ones first makes the sharded slots whole (every
// replica takes the same path, so the gather is collective).
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
  // Keras 3's optimizer.apply(grads, trainable_variables): apply_gradients
  // with the two lists side by side (equal lengths, else
  // InvalidArgumentError), taken by value so that a step that moves its
  // lists in makes no copy of them.
  void apply(std::vector<Tensor> grads, std::vector<Variable> vars,
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

  // Makes every copy of every sharded slot hold the whole value (each
  // replica's copy stored only its block): the blocks are all-gathered,
  // through strategy.run when called in cross-replica context. A no-op when
  // every copy is whole. Under MultiWorkerMirroredStrategy it is collective:
  // every worker calls it at the same point (as every worker saves a
  // checkpoint). Logically const: the slots' values do not change, only how
  // their copies store them. The next sharded step divides them again.
  void gather_sharded_slots() const;
  // Whether some local replica's copy of some slot stores only its block.
  bool slots_sharded() const;
  // The bytes that local replica `local_replica`'s copies of every slot store
  // now (a whole copy: the slot's size; a sharded slot's copy that stores its
  // block: the block's). InvalidArgumentError for a replica out of range.
  int64_t slot_bytes(int local_replica = 0) const;

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
  // variable-creator stack, or a sharded slot (see the header comment).
  Variable add_variable_from_reference(const Variable& reference, const std::string& slot_name,
                                       const Tensor& initial = Tensor());
  // The slot made for `variable` under `slot_name` (InternalError if missing).
  const Variable& slot(const Variable& variable, const std::string& slot_name) const;

  // Gradient aggregation across replicas (see the header comment). Undefined
  // gradients stay undefined. Virtual so a strategy-specific optimizer wrapper
  // can change it. Takes the list by value: with one replica it is returned
  // as it came, no copy.
  virtual std::vector<Tensor> aggregate_gradients(std::vector<Tensor> gradients);

 private:
  std::vector<Tensor> clip_gradients(std::vector<Tensor> gradients) const;
  // Whether this step's update is sharded (see the header comment).
  bool shards_update(const distribute::ReplicaContext& ctx, const std::vector<Variable>& vars,
                     const ApplyGradientsOptions& options) const;
  bool clips_by_norm() const;
  // Steps 6 and 7 on this replica's blocks, then the all-gather of the new
  // values (the sharded weight update). `gradient_blocks[i]`: this replica's
  // block of variable i's reduced and clipped gradient, flat.
  void apply_sharded(distribute::ReplicaContext& ctx, const std::vector<Tensor>& gradient_blocks,
                     const std::vector<Variable>& vars, double learning_rate);
  // On a replica thread: makes this replica's copy of every sharded slot whole.
  void gather_slot_blocks(distribute::ReplicaContext& ctx) const;
  // Local replica `local_replica`'s copies of the sharded slots, in creation order.
  std::vector<Variable> sharded_slot_copies(int local_replica) const;
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
  // Whether some of local replica `local_replica`'s sharded slot copies
  // store only its block (every replica has the same history, so all answer
  // alike).
  bool holds_slot_blocks(int local_replica) const;
  // Variables with a slot that is not a sharded slot (written by build).
  std::set<const VariableImpl*> whole_slot_references_;

  // Sharded weight update state.
  mutable Mutex shard_mu_;
  // The strategy build() found sharding weight updates (the sharded slots
  // belong to it); nullptr otherwise.
  distribute::Strategy* slot_sharding_strategy_ STRATA_GUARDED_BY(shard_mu_) = nullptr;
  // Whether any slot was made sharded: the unsharded path's per-step check for
  // copies holding only their blocks is skipped (with its allocations) when not.
  bool made_sharded_slots_ STRATA_GUARDED_BY(shard_mu_) = false;
  // During a sharded update_step: the block variable standing for a variable
  // (by the block's identity) -> its slots' blocks by slot name, which slot()
  // returns. Each replica inserts and erases its own blocks only.
  std::map<const VariableImpl*, std::map<std::string, Variable>> block_slots_
      STRATA_GUARDED_BY(shard_mu_);
};

using OptimizerPtr = std::shared_ptr<Optimizer>;

}  // namespace strata::keras::optimizers
