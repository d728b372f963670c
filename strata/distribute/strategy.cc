#include "strata/distribute/strategy.h"

#include <unordered_map>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/recorder.h"

namespace strata::distribute {

namespace {

// One entry of the thread's mode stack (spec §1.1). Cross-replica modes have
// replica == nullptr; in-replica modes have cross_replica == false.
struct Mode {
  Strategy* strategy;
  bool cross_replica;
  ReplicaContext* replica;
};

// The thread-local mode stack: the documented "current strategy / replica
// context" state. Replica threads start with an empty stack.
thread_local std::vector<Mode> t_modes;

// The innermost colocate_vars_with variable on this thread.
thread_local const Variable* t_colocate_with = nullptr;

// Which strategy's scope created each live variable (variable_created_in_scope).
class CreatedVariables {
 public:
  void note(const Strategy& strategy, const Variable& v) {
    MutexLock lock(mu_);
    entries_[v.impl_ptr().get()] = {&strategy, v.impl_ptr()};
  }
  void forget(const Strategy& strategy) {
    MutexLock lock(mu_);
    std::erase_if(entries_, [&](const auto& e) { return e.second.strategy == &strategy; });
  }
  // The strategy that created `v`, or nullptr.
  const Strategy* creator_of(const Variable& v) {
    MutexLock lock(mu_);
    auto it = entries_.find(v.impl_ptr().get());
    if (it == entries_.end()) return nullptr;
    if (it->second.variable.expired()) {  // an old variable's address, reused
      entries_.erase(it);
      return nullptr;
    }
    return it->second.strategy;
  }

 private:
  struct Entry {
    const Strategy* strategy;
    std::weak_ptr<VariableImpl> variable;
  };
  Mutex mu_;
  std::unordered_map<const VariableImpl*, Entry> entries_ STRATA_GUARDED_BY(mu_);
};

CreatedVariables& created_variables() {
  static CreatedVariables* registry = new CreatedVariables;  // never destroyed: used at exit
  return *registry;
}

class DefaultStrategyExtended : public StrategyExtended {
 public:
  using StrategyExtended::StrategyExtended;
  std::vector<std::string> worker_devices() const override {
    throw FailedPreconditionError(
        "worker_devices() method unsupported by default tf.distribute.Strategy.");
  }
  std::vector<std::string> parameter_devices() const override {
    throw FailedPreconditionError(
        "parameter_devices() method unsupported by default tf.distribute.Strategy.");
  }
};

// Single replica on the calling thread, no-op semantics.
class DefaultStrategy final : public Strategy {
 public:
  DefaultStrategy() { set_extended(std::make_unique<DefaultStrategyExtended>(*this)); }
  int num_replicas_in_sync() const override { return 1; }
  std::string name() const override { return "_DefaultDistributionStrategy"; }
  ReplicaContext& default_replica_context() { return replica_context_; }

 protected:
  void run_on_replicas(const std::function<void(int)>& body) override {
    internal::ReplicaModeGuard guard(replica_context_);
    body(0);
  }

 private:
  ReplicaContext replica_context_{*this, 0, 0};
};

DefaultStrategy& the_default_strategy() {
  static DefaultStrategy strategy;
  return strategy;
}

}  // namespace

Strategy& default_strategy() { return the_default_strategy(); }

Strategy& get_strategy() { return t_modes.empty() ? default_strategy() : *t_modes.back().strategy; }

bool has_strategy() { return !get_strategy().is_default(); }

bool in_cross_replica_context() { return !t_modes.empty() && t_modes.back().cross_replica; }

ReplicaContext* get_replica_context() {
  if (t_modes.empty()) return &the_default_strategy().default_replica_context();
  return t_modes.back().replica;
}

ReplicaContext::ReplicaContext(Strategy& strategy, int replica_id_in_sync_group,
                               int local_replica_id)
    : strategy_(&strategy),
      replica_id_(replica_id_in_sync_group),
      local_replica_id_(local_replica_id) {
  STRATA_CHECK_ARG(replica_id_in_sync_group >= 0,
                   "ReplicaContext: replica_id_in_sync_group must be >= 0, got ",
                   replica_id_in_sync_group);
}

int ReplicaContext::num_replicas_in_sync() const { return strategy_->num_replicas_in_sync(); }

Tensor ReplicaContext::all_reduce(ReduceOp op, const Tensor& value) {
  return all_reduce(op, std::vector<Tensor>{value}).front();
}

Tensor ReplicaContext::all_reduce(const std::string& op, const Tensor& value) {
  return all_reduce(reduce_op_from_string(op), value);
}

namespace {
// A collective's result recorded on a tape must be a tensor of its own (one
// replica gives its input back unchanged).
std::vector<Tensor> own_results(const std::vector<Tensor>& values, std::vector<Tensor> results) {
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].id() == values[i].id()) results[i] = results[i].reshaped(results[i].shape());
  }
  return results;
}
}  // namespace

std::vector<Tensor> ReplicaContext::all_reduce(ReduceOp op, const std::vector<Tensor>& values) {
  STRATA_CHECK(FAILED_PRECONDITION, get_replica_context() == this,
               "ReplicaContext.all_reduce: Need to be inside `call_for_each_replica()` of ",
               strategy_->name(), " on this replica's thread");
  for (size_t i = 0; i < values.size(); ++i) {
    STRATA_CHECK_ARG(values[i].defined(), "ReplicaContext.all_reduce: value ", i,
                     " is an empty tensor");
  }
  std::vector<Tensor> results =
      own_results(values, strategy_->all_reduce_in_replica(*this, op, values));
  record_collective_reduce(values, results, op == ReduceOp::MEAN);
  return results;
}

Tensor ReplicaContext::all_gather(const Tensor& value, int64_t axis) {
  return all_gather(std::vector<Tensor>{value}, axis).front();
}

std::vector<Tensor> ReplicaContext::all_gather(const std::vector<Tensor>& values, int64_t axis) {
  STRATA_CHECK(FAILED_PRECONDITION, get_replica_context() == this,
               "ReplicaContext.all_gather: Need to be inside `call_for_each_replica()` of ",
               strategy_->name(), " on this replica's thread");
  for (size_t i = 0; i < values.size(); ++i) {
    STRATA_CHECK_ARG(values[i].defined(), "ReplicaContext.all_gather: value ", i,
                     " is an empty tensor");
    STRATA_CHECK_ARG(values[i].rank() >= 1 && axis >= -values[i].rank() && axis < values[i].rank(),
                     "ReplicaContext.all_gather: `axis` = ", axis,
                     " out of range for a value of shape ", values[i].shape());
  }
  std::vector<Tensor> results;
  if (num_replicas_in_sync() == 1) {
    results = values;
  } else {
    // One merge: the strategy's gather of every value (TF's batch_all_gather
    // in merge_call), each replica taking the result onto its device.
    results = merge_call(
        [axis, n = values.size()](Strategy& strategy,
                                  const PerReplica<std::vector<Tensor>>& gathered) {
          std::vector<Tensor> out;
          for (size_t i = 0; i < n; ++i) {
            std::vector<Tensor> parts;
            for (const auto& replica_values : gathered.values()) {
              STRATA_CHECK_ARG(replica_values.size() == n,
                               "ReplicaContext.all_gather: replicas passed ", replica_values.size(),
                               " and ", n, " values");
              parts.push_back(replica_values[i]);
            }
            out.push_back(strategy.gather(PerReplica<Tensor>(std::move(parts)), axis));
          }
          return out;
        },
        values);
    for (Tensor& r : results) r = r.on_device(strategy_->local_device(local_replica_id_));
  }
  results = own_results(values, std::move(results));
  record_collective_gather(values, results, axis);
  return results;
}

std::vector<std::string> ReplicaContext::devices() const {
  return {strategy_->local_device(local_replica_id_).name()};
}

Variable Strategy::create_variable(const NextVariableCreator& next, VariableArgs args) {
  return next(std::move(args));
}

std::unique_ptr<GradientSink> Strategy::gradient_sink_in_replica(ReplicaContext&, size_t) {
  return nullptr;
}

std::vector<Tensor> Strategy::all_reduce_in_replica(ReplicaContext& ctx, ReduceOp op,
                                                    const std::vector<Tensor>& values) {
  if (num_replicas_in_sync() == 1) return values;
  return ctx.merge_call(
      [op, n = values.size()](Strategy& strategy, const PerReplica<std::vector<Tensor>>& gathered) {
        std::vector<Tensor> reduced;
        for (size_t i = 0; i < n; ++i) {
          std::vector<Tensor> parts;
          for (const auto& replica_values : gathered.values()) {
            STRATA_CHECK_ARG(replica_values.size() == n,
                             "ReplicaContext.all_reduce: replicas passed ", replica_values.size(),
                             " and ", n, " values");
            parts.push_back(replica_values[i]);
          }
          Tensor r = strategy.reduce(op, PerReplica<Tensor>(std::move(parts)), std::nullopt);
          reduced.push_back(r.dtype() == gathered.values().front()[i].dtype()
                                ? r
                                : cast(r, gathered.values().front()[i].dtype()));
        }
        return reduced;
      },
      values);
}

std::vector<std::string> StrategyExtended::worker_devices() const {
  throw UnimplementedError(str_cat(owner_->name(), ": worker_devices() is not provided"));
}
std::vector<std::string> StrategyExtended::parameter_devices() const { return worker_devices(); }

namespace {
std::vector<const Device*> devices_named(const std::vector<std::string>& names) {
  STRATA_CHECK_ARG(!names.empty(), "reduce_to: expected at least one destination device, got none");
  std::vector<const Device*> devices;
  devices.reserve(names.size());
  for (const std::string& n : names) devices.push_back(&find_device(n));
  return devices;
}

Mirrored<Tensor> copy_to(const Tensor& value, const Destinations& destinations) {
  std::vector<Tensor> copies;
  copies.reserve(destinations.devices().size());
  for (const Device* d : destinations.devices()) copies.push_back(value.on_device(*d));
  return Mirrored<Tensor>(std::move(copies));
}
}  // namespace

Destinations::Destinations(const Variable& variable) {
  STRATA_CHECK_ARG(variable.defined(), "reduce_to: destinations is an empty variable handle");
  std::vector<std::string> names;
  for (const Variable& c : distributed_components(variable)) names.push_back(c.device());
  devices_ = devices_named(names);
}
Destinations::Destinations(const Tensor& tensor) : devices_{&tensor.placement()} {}
Destinations::Destinations(const std::string& device) : devices_(devices_named({device})) {}
Destinations::Destinations(const char* device) : Destinations(std::string(device)) {}
Destinations::Destinations(const std::vector<std::string>& devices)
    : devices_(devices_named(devices)) {}

ColocateVarsWithScope::ColocateVarsWithScope(const Variable& variable)
    : previous_(t_colocate_with), variable_(variable) {
  t_colocate_with = &variable_;
}
ColocateVarsWithScope::~ColocateVarsWithScope() { t_colocate_with = previous_; }

std::vector<Variable> StrategyExtended::update_components(const Variable& var) const {
  STRATA_CHECK_ARG(var.defined(), owner_->name(), ".extended.update: `var` is an empty handle");
  const Strategy* owner = owning_strategy(var);
  STRATA_CHECK_ARG(owner == nullptr || owner == owner_, owner_->name(),
                   ".extended.update: variable '", var.name(), "' belongs to ",
                   owner == nullptr ? std::string() : owner->name(), ", not this strategy");
  return distributed_components(var);
}

Mirrored<Tensor> StrategyExtended::reduce_to(ReduceOpArg op, const PerReplica<Tensor>& value,
                                             const Destinations& destinations) {
  return copy_to(owner_->reduce(op, value, std::nullopt), destinations);
}

Mirrored<Tensor> StrategyExtended::reduce_to(ReduceOpArg op, const Mirrored<Tensor>& value,
                                             const Destinations& destinations) {
  return copy_to(owner_->reduce(op, value, std::nullopt), destinations);
}

Mirrored<Tensor> StrategyExtended::reduce_to(ReduceOpArg op, const Tensor& value,
                                             const Destinations& destinations) {
  return copy_to(owner_->reduce(op, value, std::nullopt), destinations);
}

std::vector<Mirrored<Tensor>> StrategyExtended::batch_reduce_to(
    ReduceOpArg op,
    const std::vector<std::pair<PerReplica<Tensor>, Destinations>>& value_destination_pairs) {
  std::vector<Mirrored<Tensor>> out;
  out.reserve(value_destination_pairs.size());
  for (const auto& [value, destinations] : value_destination_pairs)
    out.push_back(reduce_to(op, value, destinations));
  return out;
}

ColocateVarsWithScope StrategyExtended::colocate_vars_with(const Variable& colocate_with_variable) {
  STRATA_CHECK_ARG(
      colocate_with_variable.defined() && variable_created_in_scope(colocate_with_variable),
      "`colocate_vars_with` must only be passed a variable created in this "
      "tf.distribute.Strategy.scope(), not: ",
      colocate_with_variable.to_string());
  return ColocateVarsWithScope(colocate_with_variable);
}

bool StrategyExtended::variable_created_in_scope(const Variable& v) const {
  if (!v.defined()) return false;
  const Strategy* creator = owning_strategy(v);
  if (creator == nullptr) creator = created_variables().creator_of(v);
  if (owner_->is_default()) return creator == nullptr;
  return creator == owner_;
}

Variable StrategyExtended::value_container(const Variable& value) const {
  Variable container = distributed_container(value);
  return container.defined() ? container : value;
}

std::unique_ptr<Coordinator> StrategyExtended::make_coordinator() {
  throw FailedPreconditionError(
      str_cat(owner_->name(),
              ": make_coordinator: expected a strategy that trains through a coordinator "
              "(extended().should_use_with_coordinator()), got one that runs its replicas"));
}

Strategy::Strategy(std::unique_ptr<StrategyExtended> extended) : extended_(std::move(extended)) {
  if (!extended_) extended_ = std::make_unique<StrategyExtended>(*this);
}
Strategy::~Strategy() { internal::forget_variables_of(*this); }

std::shared_ptr<StepProfiler> Strategy::enable_step_profile() {
  if (!step_profile_) step_profile_ = std::make_shared<StepProfiler>(num_local_replicas());
  step_profiler_.store(step_profile_.get());
  return step_profile_;
}

const Device& Strategy::local_device(int) const { return current_device(); }

std::shared_ptr<void> Strategy::merge_replicas(int, const void* payload, const MergeFn& merge) {
  return merge({payload});
}

std::vector<Variable> Strategy::experimental_local_results(const Variable& value) const {
  return distributed_components(value);
}

bool Strategy::is_default() const noexcept { return this == &the_default_strategy(); }

void Strategy::check_cross_replica(const char* method) const {
  if (t_modes.empty() || t_modes.back().cross_replica) return;
  STRATA_CHECK(FAILED_PRECONDITION, false, name(), ".", method,
               ": Method requires being in cross-replica context, use "
               "get_replica_context().merge_call()");
}

StrategyScope::StrategyScope(Strategy& strategy) : strategy_(&strategy), pushed_(false) {
  if (!t_modes.empty()) {
    const Mode& top = t_modes.back();
    if (top.strategy != &strategy) {
      if (strategy.is_default()) {
        throw FailedPreconditionError("Must not nest tf.distribute.Strategy scopes.");
      }
      throw FailedPreconditionError(str_cat("Mixing different tf.distribute.Strategy objects: ",
                                            strategy.name(), " is not ", top.strategy->name()));
    }
    if (!top.cross_replica) {
      throw FailedPreconditionError(
          str_cat(strategy.name(),
                  ".scope(): Method requires being in cross-replica context, use "
                  "get_replica_context().merge_call()"));
    }
    return;  // re-entry of the same strategy's scope: nothing is pushed
  }
  t_modes.push_back({&strategy, true, nullptr});
  pushed_ = true;
  if (!strategy.is_default()) {
    creator_.emplace([owner = &strategy](const NextVariableCreator& next, VariableArgs args) {
      Strategy& current = get_strategy();
      if (&current != owner) {
        if (current.is_default()) {
          throw FailedPreconditionError(str_cat("Need to be inside \"with strategy.scope()\" for ",
                                                owner->name(), " (creating variable '",
                                                args.options.name, "')"));
        }
        throw FailedPreconditionError(str_cat("Mixing different tf.distribute.Strategy objects: ",
                                              current.name(), " is not ", owner->name()));
      }
      Variable v = owner->create_variable(next, std::move(args));
      internal::note_variable_created(*owner, v);
      return v;
    });
  }
}

StrategyScope::~StrategyScope() {
  creator_.reset();  // reverse order of entry: creator scope, then mode
  if (pushed_ && !t_modes.empty() && t_modes.back().strategy == strategy_) t_modes.pop_back();
}

namespace internal {
const Variable* colocate_vars_with_variable() { return t_colocate_with; }

void note_variable_created(const Strategy& strategy, const Variable& v) {
  // Distributed variables name their strategy themselves.
  if (v.defined() && !is_distributed_variable(v)) created_variables().note(strategy, v);
}

void forget_variables_of(const Strategy& strategy) { created_variables().forget(strategy); }

CrossReplicaModeGuard::CrossReplicaModeGuard(Strategy& strategy) {
  t_modes.push_back({&strategy, true, nullptr});
}
CrossReplicaModeGuard::~CrossReplicaModeGuard() { t_modes.pop_back(); }

namespace {
// The replica's collectives for ops (gradients of all_reduce / all_gather):
// the replica context's own, unrecorded (the op records itself).
class ContextCollectives final : public ReplicaCollectives {
 public:
  explicit ContextCollectives(ReplicaContext& ctx) : ctx_(&ctx) {}
  int replica_id() const override { return ctx_->replica_id_in_sync_group(); }
  std::vector<Tensor> all_reduce(bool mean, const std::vector<Tensor>& values) override {
    RecordingPause pause;
    return ctx_->all_reduce(mean ? ReduceOp::MEAN : ReduceOp::SUM, values);
  }
  std::vector<Tensor> all_gather(const std::vector<Tensor>& values, int64_t axis) override {
    RecordingPause pause;
    return ctx_->all_gather(values, axis);
  }
  std::unique_ptr<GradientSink> gradient_sink(size_t num_sources) override {
    return ctx_->strategy().gradient_sink_in_replica(*ctx_, num_sources);
  }

 private:
  ReplicaContext* ctx_;
};
}  // namespace

ReplicaModeGuard::ReplicaModeGuard(ReplicaContext& ctx)
    : replicas_(ctx.num_replicas_in_sync()),
      collectives_(std::make_unique<ContextCollectives>(ctx)),
      collectives_scope_(*collectives_) {
  t_modes.push_back({&ctx.strategy(), false, &ctx});
}
ReplicaModeGuard::~ReplicaModeGuard() { t_modes.pop_back(); }
}  // namespace internal

}  // namespace strata::distribute
