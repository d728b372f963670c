#pragma once
// tf.distribute.Strategy: the object model shared by every strategy.
//
//   sd::MirroredStrategy strategy;                    // every local logical device
//   {
//     auto scope = strategy.scope();                  // cross-replica context
//     sd::get_strategy();                             // == strategy
//   }
//   sd::PerReplica<int> ids = strategy.run([] {
//     return sd::get_replica_context()->replica_id_in_sync_group();
//   });
//   strategy.experimental_local_results(ids);         // {0, 1, ...}
//
// Contexts (TensorFlow's mode stack, spec §1.1): each thread has a stack of
// modes. Outside every scope the current strategy is the default strategy and
// the replica context is the default one (replica 0). `scope()` pushes
// cross-replica mode; `run` executes the function on the strategy's replica
// threads, each in its own replica context. Exactly one of
// get_replica_context() != nullptr and in_cross_replica_context() holds.
//
// TensorFlow's Python exceptions map to Strata's errors as: RuntimeError ->
// FailedPreconditionError, ValueError/TypeError -> InvalidArgumentError,
// NotImplementedError -> UnimplementedError; messages keep TF's wording.
//
// Thread-safety: a strategy is driven by one thread at a time (the thread that
// calls run/reduce); replica threads only touch their own replica's state.

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "strata/base/denormal.h"
#include "strata/cluster/cluster_resolver.h"
#include "strata/core/device.h"
#include "strata/core/tensor.h"
#include "strata/core/variable.h"
#include "strata/data/dataset.h"
#include "strata/distribute/coordinator.h"
#include "strata/distribute/distributed_dataset.h"
#include "strata/distribute/input_context.h"
#include "strata/distribute/reduce_op.h"
#include "strata/distribute/step_profile.h"
#include "strata/distribute/values.h"
#include "strata/ops/collective_ops.h"
#include "strata/ops/replica_count.h"

namespace strata::distribute {

class Strategy;
class ReplicaContext;

// The strategy of the innermost mode on this thread (the default strategy
// outside every scope). Never null.
Strategy& get_strategy();
// True when a non-default strategy is current.
bool has_strategy();
bool in_cross_replica_context();
// The current replica context: the default one outside every scope, the
// replica's inside `run`, nullptr in cross-replica context.
ReplicaContext* get_replica_context();

// tf.distribute.RunOptions (TensorFlow's order; only TPUStrategy reads them).
struct RunOptions {
  bool experimental_enable_dynamic_batch_size = true;
  bool experimental_bucketizing_dynamic_shape = false;
};

// tf.distribute.experimental.ValueContext, given to the value_fn of
// experimental_distribute_values_from_function.
class ValueContext {
 public:
  explicit ValueContext(int replica_id_in_sync_group = 0, int num_replicas_in_sync = 1)
      : replica_id_(replica_id_in_sync_group), num_replicas_(num_replicas_in_sync) {}
  int replica_id_in_sync_group() const noexcept { return replica_id_; }
  int num_replicas_in_sync() const noexcept { return num_replicas_; }

 private:
  int replica_id_;
  int num_replicas_;
};

// tf.distribute.ReplicaContext. Valid only on the thread it was made current on.
class ReplicaContext {
 public:
  ReplicaContext(Strategy& strategy, int replica_id_in_sync_group, int local_replica_id);
  Strategy& strategy() const noexcept { return *strategy_; }
  // Global replica id in [0, num_replicas_in_sync()).
  int replica_id_in_sync_group() const noexcept { return replica_id_; }
  // Index of this replica among this worker's replicas.
  int local_replica_id() const noexcept { return local_replica_id_; }
  int num_replicas_in_sync() const;

  // tf.distribute.ReplicaContext.merge_call: pauses every replica at this
  // point, calls merge_fn(strategy, PerReplica<Args>...) once in cross-replica
  // context with each argument gathered across the local replicas (replica
  // order), and gives every replica the result (its own component when the
  // result is a PerReplica). All replicas must make the same merge_call
  // calls; a replica that finishes without one makes the others raise
  // FailedPreconditionError instead of hanging.
  template <typename Fn, typename... Args>
  auto merge_call(Fn&& merge_fn, const Args&... args);

  // tf.distribute.ReplicaContext.all_reduce: every replica calls it with its
  // value (same number of calls, order, shapes and dtypes on every replica);
  // each gets the SUM or MEAN across all replicas of all workers. A list is
  // reduced as one batch (packed by the strategy's bytes_per_pack). If another
  // replica fails meanwhile, this raises AbortedError instead of waiting.
  // Differentiable: under a GradientTape the gradient of an all_reduce is the
  // same all_reduce of the upstream gradient, as TF's custom gradient.
  Tensor all_reduce(ReduceOp op, const Tensor& value);
  std::vector<Tensor> all_reduce(ReduceOp op, const std::vector<Tensor>& values);
  // TF's string spelling of the op: all_reduce("SUM", t) (case-insensitive).
  Tensor all_reduce(const std::string& op, const Tensor& value);
  Tensor all_reduce(const char* op, const Tensor& value) {
    return all_reduce(std::string(op), value);
  }

  // tf.distribute.ReplicaContext.all_gather: every replica calls it with its
  // value (same rank; dims other than `axis` equal; sizes along `axis` may
  // differ) and each gets the values of all replicas of all workers
  // concatenated along `axis` in replica order. Differentiable: the gradient
  // is the SUM all_reduce of the upstream gradient, sliced to this replica's
  // rows along `axis` (TF's custom gradient). InvalidArgumentError for a
  // scalar value or an axis out of range.
  Tensor all_gather(const Tensor& value, int64_t axis);
  std::vector<Tensor> all_gather(const std::vector<Tensor>& values, int64_t axis);

  // tf.distribute.ReplicaContext.devices: the device of this replica, as a
  // one-element list of full device names (TF: the replica's devices).
  std::vector<std::string> devices() const;

 private:
  Strategy* strategy_;
  int replica_id_;
  int local_replica_id_;
};

// Where StrategyExtended::reduce_to puts its result (TF's `destinations`):
// the devices of a variable (each component's, in replica order), of a
// tensor, of distributed values, or devices by name ("CPU:1" or a full name;
// NotFoundError for an unknown one). Immutable.
class Destinations {
 public:
  // Implicit, as TF accepts any of these as `destinations`.
  Destinations(const Variable& variable);                 // NOLINT(google-explicit-constructor)
  Destinations(const Tensor& tensor);                     // NOLINT(google-explicit-constructor)
  Destinations(const std::string& device);                // NOLINT(google-explicit-constructor)
  Destinations(const char* device);                       // NOLINT(google-explicit-constructor)
  Destinations(const std::vector<std::string>& devices);  // NOLINT(google-explicit-constructor)
  template <typename T>
  Destinations(const DistributedValues<T>& value) {  // NOLINT(google-explicit-constructor)
    for (const T& v : value.values()) devices_.push_back(&v.placement());
  }
  const std::vector<const Device*>& devices() const noexcept { return devices_; }

 private:
  std::vector<const Device*> devices_;
};

// RAII guard of StrategyExtended::colocate_vars_with; scopes nest strictly.
class [[nodiscard]] ColocateVarsWithScope {
 public:
  explicit ColocateVarsWithScope(const Variable& variable);
  ~ColocateVarsWithScope();
  ColocateVarsWithScope(const ColocateVarsWithScope&) = delete;
  ColocateVarsWithScope& operator=(const ColocateVarsWithScope&) = delete;

 private:
  const Variable* previous_;
  Variable variable_;
};

// tf.distribute.StrategyExtended (selected members; spec §1.5).
class StrategyExtended {
 public:
  explicit StrategyExtended(Strategy& owner) : owner_(&owner) {}
  virtual ~StrategyExtended() = default;

  // tf.distribute.StrategyExtended.update: runs fn(component, args...) once
  // per component of `var` (one per local replica for a distributed
  // variable; the variable itself for a plain one), under the component's
  // device, in cross-replica context. A distributed argument gives fn its
  // component of the same replica. Returns the results as a Mirrored (TF's
  // group=True; nothing for a void fn). From a replica context:
  // FailedPreconditionError (TF: call it through merge_call).
  template <typename Fn, typename... Args>
  auto update(const Variable& var, Fn&& fn, const Args&... args);

  // tf.distribute.StrategyExtended.reduce_to: `value` reduced across every
  // replica (as Strategy::reduce with no axis) and copied to each destination
  // device, a Mirrored with one component per destination. A Mirrored value
  // with MEAN is its own value; a plain tensor follows Strategy::reduce.
  // Cross-replica only.
  Mirrored<Tensor> reduce_to(ReduceOpArg op, const PerReplica<Tensor>& value,
                             const Destinations& destinations);
  Mirrored<Tensor> reduce_to(ReduceOpArg op, const Mirrored<Tensor>& value,
                             const Destinations& destinations);
  Mirrored<Tensor> reduce_to(ReduceOpArg op, const Tensor& value, const Destinations& destinations);
  // tf.distribute.StrategyExtended.batch_reduce_to: reduce_to of every
  // (value, destinations) pair, in order.
  std::vector<Mirrored<Tensor>> batch_reduce_to(
      ReduceOpArg op,
      const std::vector<std::pair<PerReplica<Tensor>, Destinations>>& value_destination_pairs);

  // tf.distribute.StrategyExtended.colocate_vars_with: variables created while
  // the returned scope lives are placed with `colocate_with_variable`. It must
  // have been created in this strategy's scope (InvalidArgumentError
  // otherwise, as TF's ValueError). Mirrored and one-device strategies place
  // every variable on the same devices already; ParameterServerStrategy puts
  // the new variables on the parameter server of `colocate_with_variable`.
  ColocateVarsWithScope colocate_vars_with(const Variable& colocate_with_variable);

  // tf.distribute.StrategyExtended.variable_created_in_scope: whether `v` was
  // created while this strategy's scope was active (for the default strategy:
  // outside every strategy's scope).
  bool variable_created_in_scope(const Variable& v) const;

  // tf.distribute.StrategyExtended.value_container: the distributed variable
  // whose component `value` is; `value` itself otherwise.
  Variable value_container(const Variable& value) const;

  // TF: whether this strategy requires static shapes (true on TPU).
  virtual bool experimental_require_static_shapes() const { return false; }
  // Full names of this worker's compute devices, one per local replica.
  // FailedPreconditionError for the default strategy, as TF's RuntimeError.
  virtual std::vector<std::string> worker_devices() const;
  // Where variables live (the worker devices for mirrored strategies).
  virtual std::vector<std::string> parameter_devices() const;
  // Whether this worker should write checkpoints and summaries (TF: only the
  // chief of a multi-worker strategy; every other strategy: true).
  virtual bool should_checkpoint() const { return true; }
  virtual bool should_save_summary() const { return should_checkpoint(); }
  // TF's extended._in_multi_worker_mode(): whether the strategy spans more
  // than one worker process (MultiWorkerMirroredStrategy with >= 2 workers).
  virtual bool in_multi_worker_mode() const { return false; }
  // TF's extended._task_id: this worker's index in its job (TF_CONFIG
  // task.index); 0 outside a cluster. Names the non-chief's temporary write
  // directory "workertemp_<task_id>" (keras/internal/distributed_file_utils.h).
  virtual int task_id() const { return 0; }
  // TF's extended._should_use_with_coordinator: whether training schedules
  // closures on remote workers through a coordinator (coordinator.h) instead
  // of running strategy.run on local replicas (ParameterServerStrategy).
  virtual bool should_use_with_coordinator() const { return false; }
  // A new coordinator of this strategy's workers; FailedPreconditionError
  // unless should_use_with_coordinator().
  virtual std::unique_ptr<Coordinator> make_coordinator();
  Strategy& strategy() const noexcept { return *owner_; }

 private:
  // The components update() applies fn to; InvalidArgumentError for a
  // distributed variable of another strategy.
  std::vector<Variable> update_components(const Variable& var) const;

  Strategy* owner_;
};

// RAII guard returned by Strategy::scope(). Not copyable; movable only as a
// prvalue (guaranteed elision), so scopes nest strictly.
class [[nodiscard]] StrategyScope {
 public:
  explicit StrategyScope(Strategy& strategy);
  ~StrategyScope();
  StrategyScope(const StrategyScope&) = delete;
  StrategyScope& operator=(const StrategyScope&) = delete;

 private:
  Strategy* strategy_;
  bool pushed_;
  std::optional<VariableCreatorScope> creator_;
};

class Strategy {
 public:
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;
  virtual ~Strategy();

  // Enters this strategy's scope: cross-replica context with this strategy
  // current. Re-entering the same strategy's scope is allowed; entering a
  // different one inside is FailedPreconditionError ("Mixing different
  // tf.distribute.Strategy objects"), as is entering from a replica context.
  [[nodiscard]] StrategyScope scope() { return StrategyScope(*this); }

  virtual int num_replicas_in_sync() const = 0;
  // Replicas executed by this process (== num_replicas_in_sync on one worker).
  virtual int num_local_replicas() const { return num_replicas_in_sync(); }
  // The global id of local replica `local` (this worker's offset + local).
  virtual int global_replica_id(int local) const { return local; }
  StrategyExtended& extended() const noexcept { return *extended_; }
  // The cluster resolver of a multi-worker or TPU strategy; nullptr where none.
  virtual const cluster_resolver::ClusterResolver* cluster_resolver() const { return nullptr; }
  // A short name for messages and logs: "MirroredStrategy", ...
  virtual std::string name() const = 0;
  bool is_default() const noexcept;

  // Starts recording where training steps spend their time, per local
  // replica (step_profile.h); a Strata extension. Call between runs. The
  // strategy keeps one recorder for its lifetime: enabling again after
  // disable_step_profile() continues its totals. Totals are read with
  // gather_step_profile(*this).
  std::shared_ptr<StepProfiler> enable_step_profile();
  void disable_step_profile() noexcept { step_profiler_.store(nullptr); }
  // The recorder while profiling, else nullptr. Any thread may ask.
  StepProfiler* step_profiler() const noexcept { return step_profiler_.load(); }

  // Runs fn(args...) once per local replica, each on its replica thread with
  // its own replica context and device; PerReplica arguments are unwrapped to
  // the replica's component. Returns the results regrouped as TF's regroup
  // does: a PerReplica of the results, or, when fn returns a std::tuple or
  // std::pair (TF: a tuple), a tuple (pair) of the regrouped components, so
  //   auto [loss, acc] = strategy.run(step_fn, x);   // PerReplica<Tensor> each
  // Nested tuples regroup recursively; other types (a struct, a vector) come
  // back whole as PerReplica<T> (C++ cannot take a struct apart). With one
  // replica TF returns the plain value: a one-component PerReplica converts to
  // it (`Tensor loss = strategy.run(fn);`, values.h). Nothing for a void fn.
  // Called from a replica context: FailedPreconditionError.
  template <typename Fn, typename... Args>
  auto run(Fn&& fn, const Args&... args);
  // run(fn, std::tuple{a, b}, options): the arguments as a tuple, with RunOptions.
  template <typename Fn, typename... Args>
  auto run(Fn&& fn, const std::tuple<Args...>& args, const RunOptions& options);

  // tf.distribute.Strategy.experimental_distribute_dataset: `dataset` is
  // batched by the global batch size; see distributed_dataset.h for the
  // sharding and rebatching applied. Options are validated as TF does.
  DistributedDataset experimental_distribute_dataset(const data::Dataset& dataset,
                                                     const InputOptions& options = {});
  // tf.distribute.Strategy.distribute_datasets_from_function: the dataset
  // must yield per-replica batches (no rebatching, no sharding is applied).
  // InputReplicationMode::PER_WORKER (default): calls dataset_fn(InputContext)
  // once for this worker's input pipeline, and each of this worker's replicas
  // takes one batch per step from it in replica order.
  // InputReplicationMode::PER_REPLICA: calls dataset_fn once per local replica,
  // under that replica's device, with InputContext(num_input_pipelines =
  // num_replicas_in_sync, input_pipeline_id = the replica's global id), and
  // each replica reads only its own dataset.
  DistributedDataset distribute_datasets_from_function(
      const std::function<data::Dataset(const InputContext&)>& dataset_fn,
      const InputOptions& options = {});
  // The older spelling of distribute_datasets_from_function.
  DistributedDataset experimental_distribute_datasets_from_function(
      const std::function<data::Dataset(const InputContext&)>& dataset_fn,
      const InputOptions& options = {});
  // Deprecated in TF, kept for parity: Dataset::from_tensor_slices({array}).
  data::Dataset experimental_make_numpy_dataset(const Tensor& array) const;
  // How this worker's distributed iterators agree with the other workers'
  // on whether a step has data (distributed_dataset.h); none on one worker.
  virtual StepAgreement step_agreement() const { return {}; }
  // Input pipelines across all workers and this worker's index among them.
  virtual int num_input_pipelines() const { return 1; }
  virtual int input_pipeline_id() const { return 0; }

  // tf.distribute.Strategy.reduce (spec §3.2). Cross-replica only. `op` is a
  // ReduceOp or its name ("SUM", "MEAN"); `axis` None, one axis or a list.
  // axis == None: element-wise SUM/MEAN across replicas (equal shapes).
  // axis == k or {k, ...}: each replica reduces along the axes, then SUM adds
  // the partial sums and MEAN divides the summed numerators by the summed
  // element counts (the product of the dims along the axes), so replicas with
  // unequal (even empty) batches weigh each element equally. Integer MEAN is
  // true division (float64). Across workers the strategy adds every worker's
  // contribution, so each worker gets the global result.
  Tensor reduce(ReduceOpArg op, const PerReplica<Tensor>& value, const ReduceAxis& axis);
  // A Mirrored value: MEAN with axis None is the value itself (TF); otherwise
  // its components reduce as a PerReplica's (SUM adds the identical copies).
  Tensor reduce(ReduceOpArg op, const Mirrored<Tensor>& value, const ReduceAxis& axis);
  // A non-distributed value (reduced along `axis` first if given). On one
  // worker: MEAN gives the value; SUM is InvalidArgumentError with more than
  // one replica (TF's ValueError), the value itself with one. Across several
  // workers (MultiWorkerMirroredStrategy) each worker's value counts once, as
  // TF's collective reduce of a non-distributed value: SUM adds the workers'
  // values, MEAN divides that by the number of workers (with axes: by the
  // summed element counts).
  Tensor reduce(ReduceOpArg op, const Tensor& value, const ReduceAxis& axis);

  // tf.distribute.Strategy.gather: the components of `value` of every replica
  // of every worker concatenated along `axis`, in replica order (sizes along
  // `axis` may differ; the other dims must agree). Cross-replica only.
  // A non-distributed value: itself with one replica, InvalidArgumentError
  // with more (TF: it must be a DistributedValues there).
  Tensor gather(const PerReplica<Tensor>& value, int64_t axis);
  Tensor gather(const Tensor& value, int64_t axis);

  // tf.distribute.Strategy.experimental_local_results.
  template <typename T>
  std::vector<T> experimental_local_results(const DistributedValues<T>& value) const {
    return value.values();
  }
  template <typename T>
  std::vector<T> experimental_local_results(const PerReplica<T>& value) const {
    return value.values();
  }
  template <typename T>
  std::vector<T> experimental_local_results(const Mirrored<T>& value) const {
    return value.values();
  }
  // A distributed variable: its per-replica component variables, in local
  // replica order (TF returns the MirroredVariable's values); a plain
  // variable: {value}.
  std::vector<Variable> experimental_local_results(const Variable& value) const;
  // A non-distributed value: {value}.
  template <typename T>
  std::vector<T> experimental_local_results(const T& value) const {
    return {value};
  }

  // Calls value_fn(ValueContext) once per local replica, in local order, under
  // that replica's device, and wraps the results (always a PerReplica, even
  // for one replica, as TF).
  template <typename Fn>
  auto experimental_distribute_values_from_function(Fn&& value_fn) {
    using Value = std::decay_t<std::invoke_result_t<Fn&, const ValueContext&>>;
    std::vector<Value> values;
    for (int local = 0; local < num_local_replicas(); ++local) {
      DeviceScope device_scope(local_device(local));
      values.push_back(value_fn(ValueContext(global_replica_id(local), num_replicas_in_sync())));
    }
    return PerReplica<Value>(std::move(values));
  }

  // The device of local replica `local` (the current device for the default strategy).
  virtual const Device& local_device(int local) const;
  // Where local replica `local`'s copy of a new distributed variable goes:
  // local_device(local), unless the strategy places it elsewhere (TPUStrategy
  // inside extended().experimental_logical_device(k)).
  virtual const Device& variable_device(int local) const { return local_device(local); }

  // CommunicationOptions.deterministic_reduction: the number M of virtual
  // micro-batches a training step splits each global batch into (each
  // replica computes the gradients of its M / num_replicas_in_sync() on its
  // own and sums them with pairwise_sum before all_reduce); 0 when the
  // strategy reduces in its default order (every strategy but a replicated
  // one with deterministic_reduction).
  virtual int deterministic_micro_batches() const { return 0; }

  // merge_call's rendezvous (type-erased): returns the shared result of
  // merge(payloads of every local replica). The default runs it at once
  // (one local replica).
  using MergeFn = std::function<std::shared_ptr<void>(const std::vector<const void*>&)>;
  // Combines this worker's partial result of a cross-replica reduction with
  // the other workers' (SUM). Identity on a single worker.
  virtual Tensor sum_across_workers(const Tensor& local) { return local; }
  virtual std::shared_ptr<void> merge_replicas(int local_replica, const void* payload,
                                               const MergeFn& merge);

  // The variable creator scope() installs (on the calling thread and, for
  // strategies with replica threads, on those): the default strategy and
  // OneDeviceStrategy make a plain variable (OneDevice: on its device);
  // mirrored-style strategies make distributed variables (distributed_variable.h).
  virtual Variable create_variable(const NextVariableCreator& next, VariableArgs args);
  // ReplicaContext::all_reduce's implementation for `ctx`'s replica. The
  // default goes through merge_call (one merged reduction); strategies with
  // collectives override it.
  virtual std::vector<Tensor> all_reduce_in_replica(ReplicaContext& ctx, ReduceOp op,
                                                    const std::vector<Tensor>& values);
  // The sink a GradientTape computing the gradients of `num_sources`
  // variables on `ctx`'s replica thread reports them to as its backward pass
  // finishes each (CommunicationOptions.overlap_gradient_reduction), or
  // nullptr: the default, no early reduction.
  virtual std::unique_ptr<GradientSink> gradient_sink_in_replica(ReplicaContext& ctx,
                                                                 size_t num_sources);

 protected:
  explicit Strategy(std::unique_ptr<StrategyExtended> extended = nullptr);
  // Executes body(local_replica) for every local replica, each inside its
  // replica context, and waits; re-throws a replica's failure naming it.
  virtual void run_on_replicas(const std::function<void(int local_replica)>& body) = 0;
  void set_extended(std::unique_ptr<StrategyExtended> extended) { extended_ = std::move(extended); }
  // Checks that run/reduce are called in cross-replica or default context.
  void check_cross_replica(const char* method) const;
  friend class StrategyExtended;

 private:
  std::unique_ptr<StrategyExtended> extended_;
  std::shared_ptr<StepProfiler> step_profile_;         // made by the first enable_step_profile
  std::atomic<StepProfiler*> step_profiler_{nullptr};  // step_profile_ while enabled
};

// The process-wide default strategy: one replica, no-op semantics (spec §1.2).
Strategy& default_strategy();

namespace internal {
// The variable of the innermost colocate_vars_with scope on this thread, or
// nullptr (strategies that place variables read it).
const Variable* colocate_vars_with_variable();
// Notes that the scope of `strategy` created `v` (variable_created_in_scope).
void note_variable_created(const Strategy& strategy, const Variable& v);
// Forgets every variable `strategy` created (its destructor).
void forget_variables_of(const Strategy& strategy);
}  // namespace internal

namespace internal {
// RAII: enters cross-replica mode for `strategy` on this thread (merge_fn).
class CrossReplicaModeGuard {
 public:
  explicit CrossReplicaModeGuard(Strategy& strategy);
  ~CrossReplicaModeGuard();
  CrossReplicaModeGuard(const CrossReplicaModeGuard&) = delete;
  CrossReplicaModeGuard& operator=(const CrossReplicaModeGuard&) = delete;
};

// RAII: enters the replica context of `ctx` on this thread.
// Also tells ops the replica count (nn::compute_average_loss's default
// global batch size).
class ReplicaModeGuard {
 public:
  explicit ReplicaModeGuard(ReplicaContext& ctx);
  ~ReplicaModeGuard();
  ReplicaModeGuard(const ReplicaModeGuard&) = delete;
  ReplicaModeGuard& operator=(const ReplicaModeGuard&) = delete;

 private:
  NumReplicasInSyncScope replicas_;
  // The replica's collectives as ops see them (gradients of all_reduce and
  // all_gather run them), installed for the guard's lifetime.
  std::unique_ptr<ReplicaCollectives> collectives_;
  ReplicaCollectivesScope collectives_scope_;
};
}  // namespace internal

// --- implementation of the templates ------------------------------------------

namespace internal {
template <typename T>
struct IsTuple : std::false_type {};
template <typename... E>
struct IsTuple<std::tuple<E...>> : std::true_type {};
template <typename T>
struct IsPair : std::false_type {};
template <typename A, typename B>
struct IsPair<std::pair<A, B>> : std::true_type {};

// The most fields of a struct result that run takes apart (see regroup).
inline constexpr size_t kMaxRegroupedFields = 8;

// Converts to any type in unevaluated contexts: counts an aggregate's fields.
struct AnyField {
  template <typename T>
  operator T() const;  // NOLINT(google-explicit-constructor): declared, never defined
};

template <typename T, typename... Fields>
constexpr size_t aggregate_field_count() {
  if constexpr (sizeof...(Fields) <= kMaxRegroupedFields && requires {
                  T{std::declval<Fields>()..., AnyField{}};
                }) {
    return aggregate_field_count<T, Fields..., AnyField>();
  } else {
    return sizeof...(Fields);
  }
}

// A struct (aggregate) result that run regroups as a tuple of its fields, as
// TF's regroup takes a namedtuple apart: a class aggregate (not a tuple, pair
// or array) of 1 to kMaxRegroupedFields fields. Larger structs come back
// whole as PerReplica<Struct>.
template <typename T>
constexpr bool is_regrouped_struct() {
  if constexpr (std::is_class_v<T> && std::is_aggregate_v<T> && !IsTuple<T>::value &&
                !IsPair<T>::value) {
    constexpr size_t n = aggregate_field_count<T>();
    return n >= 1 && n <= kMaxRegroupedFields;
  } else {
    return false;
  }
}

// The fields of aggregate `v` as a tuple (moved out), by structured binding.
template <typename T>
auto fields_as_tuple(T&& v) {
  constexpr size_t n = aggregate_field_count<std::decay_t<T>>();
  if constexpr (n == 1) {
    auto&& [f1] = std::forward<T>(v);
    return std::make_tuple(std::move(f1));
  } else if constexpr (n == 2) {
    auto&& [f1, f2] = std::forward<T>(v);
    return std::make_tuple(std::move(f1), std::move(f2));
  } else if constexpr (n == 3) {
    auto&& [f1, f2, f3] = std::forward<T>(v);
    return std::make_tuple(std::move(f1), std::move(f2), std::move(f3));
  } else if constexpr (n == 4) {
    auto&& [f1, f2, f3, f4] = std::forward<T>(v);
    return std::make_tuple(std::move(f1), std::move(f2), std::move(f3), std::move(f4));
  } else if constexpr (n == 5) {
    auto&& [f1, f2, f3, f4, f5] = std::forward<T>(v);
    return std::make_tuple(std::move(f1), std::move(f2), std::move(f3), std::move(f4),
                           std::move(f5));
  } else if constexpr (n == 6) {
    auto&& [f1, f2, f3, f4, f5, f6] = std::forward<T>(v);
    return std::make_tuple(std::move(f1), std::move(f2), std::move(f3), std::move(f4),
                           std::move(f5), std::move(f6));
  } else if constexpr (n == 7) {
    auto&& [f1, f2, f3, f4, f5, f6, f7] = std::forward<T>(v);
    return std::make_tuple(std::move(f1), std::move(f2), std::move(f3), std::move(f4),
                           std::move(f5), std::move(f6), std::move(f7));
  } else if constexpr (n == 8) {
    auto&& [f1, f2, f3, f4, f5, f6, f7, f8] = std::forward<T>(v);
    return std::make_tuple(std::move(f1), std::move(f2), std::move(f3), std::move(f4),
                           std::move(f5), std::move(f6), std::move(f7), std::move(f8));
  } else {
    static_assert(n <= kMaxRegroupedFields, "fields_as_tuple: too many fields");
  }
}

// TF's regroup: one value per local replica becomes one PerReplica, and a
// tuple (pair) per replica becomes a tuple (pair) of regrouped components; a
// struct per replica becomes the tuple of its regrouped fields.
template <typename Value>
auto regroup(std::vector<Value>&& values) {
  if constexpr (is_regrouped_struct<Value>()) {
    using Fields = decltype(fields_as_tuple(std::declval<Value>()));
    std::vector<Fields> tuples;
    tuples.reserve(values.size());
    for (Value& v : values) tuples.push_back(fields_as_tuple(std::move(v)));
    return regroup(std::move(tuples));
  } else if constexpr (IsTuple<Value>::value || IsPair<Value>::value) {
    auto component = [&]<size_t I>(std::integral_constant<size_t, I>) {
      std::vector<std::decay_t<std::tuple_element_t<I, Value>>> parts;
      parts.reserve(values.size());
      for (Value& v : values) parts.push_back(std::move(std::get<I>(v)));
      return regroup(std::move(parts));
    };
    if constexpr (IsPair<Value>::value) {
      return std::make_pair(component(std::integral_constant<size_t, 0>{}),
                            component(std::integral_constant<size_t, 1>{}));
    } else {
      return [&]<size_t... I>(std::index_sequence<I...>) {
        return std::make_tuple(component(std::integral_constant<size_t, I>{})...);
      }
      (std::make_index_sequence<std::tuple_size_v<Value>>{});
    }
  } else {
    return PerReplica<Value>(std::move(values));
  }
}
}  // namespace internal

template <typename Fn, typename... Args>
auto Strategy::run(Fn&& fn, const Args&... args) {
  check_cross_replica("run");
  // The step's ops run with denormals flushed to zero on this thread too (replica
  // threads always do); the caller's mode is back when run returns.
  const ScopedFlushDenormal flush;
  using R = std::invoke_result_t<Fn&, decltype(select_replica(0, args))...>;
  auto call = [&]([[maybe_unused]] int local) -> decltype(auto) {
    return fn(select_replica(local, args)...);
  };
  if constexpr (std::is_void_v<R>) {
    run_on_replicas([&](int local) { call(local); });
  } else {
    using Value = std::decay_t<R>;
    std::vector<std::optional<Value>> results(num_local_replicas());
    run_on_replicas([&](int local) { results[local].emplace(call(local)); });
    std::vector<Value> values;
    values.reserve(results.size());
    for (auto& r : results) values.push_back(std::move(*r));
    return internal::regroup(std::move(values));
  }
}

template <typename Fn, typename... Args>
auto ReplicaContext::merge_call(Fn&& merge_fn, const Args&... args) {
  using R = std::invoke_result_t<Fn&, Strategy&, const PerReplica<Args>&...>;
  using Payload = std::tuple<const Args*...>;
  const Payload mine(&args...);
  Strategy& strategy = *strategy_;
  auto merge = [&](const std::vector<const void*>& payloads) -> std::shared_ptr<void> {
    internal::CrossReplicaModeGuard guard(strategy);
    [[maybe_unused]] auto gathered = [&]<size_t... I>(std::index_sequence<I...>) {
      [[maybe_unused]] auto gather_one = [&]<size_t J>(std::integral_constant<size_t, J>) {
        using A = std::tuple_element_t<J, std::tuple<Args...>>;
        std::vector<A> values;
        values.reserve(payloads.size());
        for (const void* p : payloads)
          values.push_back(*std::get<J>(*static_cast<const Payload*>(p)));
        return PerReplica<A>(std::move(values));
      };
      return std::tuple{gather_one(std::integral_constant<size_t, I>{})...};
    }
    (std::index_sequence_for<Args...>{});
    if constexpr (std::is_void_v<R>) {
      std::apply([&](const auto&... pr) { merge_fn(strategy, pr...); }, gathered);
      return nullptr;
    } else {
      return std::make_shared<std::decay_t<R>>(
          std::apply([&](const auto&... pr) { return merge_fn(strategy, pr...); }, gathered));
    }
  };
  std::shared_ptr<void> result = strategy.merge_replicas(local_replica_id_, &mine, merge);
  if constexpr (!std::is_void_v<R>) {
    const auto& value = *std::static_pointer_cast<std::decay_t<R>>(result);
    return std::decay_t<decltype(select_replica(local_replica_id_, value))>(
        select_replica(local_replica_id_, value));
  }
}

template <typename Fn, typename... Args>
auto StrategyExtended::update(const Variable& var, Fn&& fn, const Args&... args) {
  owner_->check_cross_replica("extended.update");
  const std::vector<Variable> components = update_components(var);
  using R = std::invoke_result_t<Fn&, const Variable&, decltype(select_replica(0, args))...>;
  if constexpr (std::is_void_v<R>) {
    for (size_t i = 0; i < components.size(); ++i) {
      DeviceScope device_scope(find_device(components[i].device()));
      fn(components[i], select_replica(static_cast<int>(i), args)...);
    }
  } else {
    std::vector<std::decay_t<R>> results;
    results.reserve(components.size());
    for (size_t i = 0; i < components.size(); ++i) {
      DeviceScope device_scope(find_device(components[i].device()));
      results.push_back(fn(components[i], select_replica(static_cast<int>(i), args)...));
    }
    return Mirrored<std::decay_t<R>>(std::move(results));
  }
}

template <typename Fn, typename... Args>
auto Strategy::run(Fn&& fn, const std::tuple<Args...>& args, const RunOptions&) {
  return std::apply([&](const Args&... a) { return run(std::forward<Fn>(fn), a...); }, args);
}

}  // namespace strata::distribute
