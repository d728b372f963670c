#include "strata/distribute/ps/parameter_server_strategy.h"

#include "strata/base/errors.h"
#include "strata/base/numbers.h"
#include "strata/cluster/multi_worker_util.h"
#include "strata/distribute/partitioners.h"
#include "strata/distribute/ps/cluster_coordinator.h"
#include "strata/distribute/ps/function_registry.h"
#include "strata/distribute/ps/internal/remote_variable.h"
#include "strata/distribute/sharded_variable.h"

namespace strata::distribute {

namespace {

std::string ps_device(int task) {
  return str_cat("/job:ps/replica:0/task:", task, "/device:CPU:0");
}

class ParameterServerExtended final : public StrategyExtended {
 public:
  ParameterServerExtended(Strategy& owner, int num_ps) : StrategyExtended(owner), num_ps_(num_ps) {}
  // The coordinator's compute device (TF: the chief's local devices).
  std::vector<std::string> worker_devices() const override {
    return {"/job:chief/replica:0/task:0/device:CPU:0"};
  }
  std::vector<std::string> parameter_devices() const override {
    std::vector<std::string> out;
    out.reserve(static_cast<size_t>(num_ps_));
    for (int k = 0; k < num_ps_; ++k) out.push_back(ps_device(k));
    return out;
  }
  bool should_use_with_coordinator() const override { return true; }
  std::unique_ptr<Coordinator> make_coordinator() override {
    return std::make_unique<ClusterCoordinator>(static_cast<ParameterServerStrategy&>(strategy()));
  }

 private:
  int num_ps_;
};

// run() of a ParameterServerStrategy: inside a closure, body(0) on this
// thread in a replica context of one replica (TF runs one replica per worker
// there); outside, FailedPreconditionError.
void run_in_closure(Strategy& strategy, const std::function<void(int)>& body) {
  if (!ps::internal::in_closure()) {
    throw FailedPreconditionError(
        "ParameterServerStrategy.run: use it inside a function scheduled with "
        "ClusterCoordinator.schedule (the strategy must be used with a ClusterCoordinator)");
  }
  ReplicaContext context(strategy, /*replica_id_in_sync_group=*/0, /*local_replica_id=*/0);
  internal::ReplicaModeGuard guard(context);
  body(0);
}

// The strategy closures see on a worker (ps::internal::worker_strategy).
class WorkerSideStrategy final : public Strategy {
 public:
  std::string name() const override { return "ParameterServerStrategy"; }
  int num_replicas_in_sync() const override { return 1; }

 protected:
  void run_on_replicas(const std::function<void(int)>& body) override {
    run_in_closure(*this, body);
  }
};

std::vector<std::string> job_targets(const train::ClusterSpec& spec, const std::string& job) {
  std::vector<std::string> out;
  for (int index : spec.task_indices(job)) out.push_back(spec.task_address(job, index));
  return out;
}

}  // namespace

ParameterServerStrategy::ParameterServerStrategy(
    std::shared_ptr<cluster_resolver::ClusterResolver> resolver,
    ParameterServerStrategyOptions options)
    : resolver_(std::move(resolver)), options_(std::move(options)) {
  STRATA_CHECK_ARG(resolver_ != nullptr,
                   "ParameterServerStrategy: expected a cluster resolver, got nullptr");
  STRATA_CHECK_ARG(options_.rpc_timeout.count() > 0,
                   "ParameterServerStrategyOptions.rpc_timeout must be > 0, got ",
                   options_.rpc_timeout.count(), " ms");
  const train::ClusterSpec spec = resolver_->cluster_spec();
  STRATA_CHECK_ARG(
      !spec.jobs().empty(),
      "Cluster spec must be non-empty in `tf.distribute.cluster_resolver.ClusterResolver`.");
  multi_worker_util::validate_cluster_spec(spec, resolver_->task_type(), resolver_->task_id());
  STRATA_CHECK_ARG(spec.has_job("ps") && spec.num_tasks("ps") >= 1,
                   "There must be at least one ps.");
  STRATA_CHECK_ARG(spec.has_job("worker") && spec.num_tasks("worker") >= 1,
                   "There must be at least one worker.");
  STRATA_CHECK_ARG(spec.has_job("chief") && spec.num_tasks("chief") == 1,
                   "There must be a chief (the coordinator) in the cluster, got jobs ",
                   spec.to_json());
  STRATA_CHECK_ARG(
      resolver_->task_type() == "chief",
      "ParameterServerStrategy: expected to be created on the chief (the coordinator), "
      "got task ",
      resolver_->task_type().value_or("None"), ":", resolver_->task_id().value_or(-1),
      " (ps and worker tasks run strata::distribute::Server(resolver).join())");
  ps_targets_ = job_targets(spec, "ps");
  worker_targets_ = job_targets(spec, "worker");
  set_extended(std::make_unique<ParameterServerExtended>(*this, num_ps()));
}

ParameterServerStrategy::~ParameterServerStrategy() = default;

Variable ParameterServerStrategy::create_variable(const NextVariableCreator&, VariableArgs args) {
  const VariableOptions& o = args.options;
  STRATA_CHECK_ARG(args.initial_value.defined(), "ParameterServerStrategy: variable '", o.name,
                   "' needs an initial value");
  // TF's _create_variable: a rank-0 variable is never partitioned; the
  // partitioner's count is validated and capped at the first dimension.
  const int64_t shards = num_partitions(options_.variable_partitioner, args.initial_value.shape(),
                                        args.initial_value.dtype());
  if (shards <= 1) return create_on_next_ps(args.initial_value, o);
  // Every shard is created round-robin as its own variable (TF's
  // _create_variable_round_robin per shard): shard i of the first variable
  // lands on ps (creation index + i) mod #ps.
  ShardedVariable sharded = ShardedVariable::create(
      args.initial_value, shards, o, [this](int64_t, int64_t, const VariableArgs& shard) {
        return create_on_next_ps(shard.initial_value, shard.options);
      });
  return sharded.as_variable();
}

Variable ParameterServerStrategy::create_on_next_ps(const Tensor& initial_value,
                                                    const VariableOptions& o) {
  int task = static_cast<int>(variables_created_ % num_ps());
  // Inside extended().colocate_vars_with(v): v's parameter server, and the
  // round-robin turn is not used up (TF places the variable with v's device).
  const Variable* colocate_with = internal::colocate_vars_with_variable();
  if (colocate_with != nullptr) {
    const std::string& device = colocate_with->device();
    const std::string prefix = "/job:ps/replica:0/task:";
    std::optional<int64_t> index;
    if (device.starts_with(prefix)) {
      const size_t end = device.find('/', prefix.size());
      index = parse_whole_number(device.substr(prefix.size(), end - prefix.size()));
    }
    STRATA_CHECK_ARG(index && *index < num_ps(), "ParameterServerStrategy: colocate_vars_with(",
                     colocate_with->name(), "): expected a variable on one of the ", num_ps(),
                     " parameter servers, got one on ", device);
    task = static_cast<int>(*index);
  }
  auto client = ps::internal::TaskClient::get(ps_targets_[task]);
  ps::internal::RemoteVariableInfo info = client->create_variable(
      o.name, initial_value,
      o.trainable.value_or(o.synchronization != VariableSynchronization::ON_READ), o.aggregation,
      options_.rpc_timeout);
  info.synchronization = o.synchronization == VariableSynchronization::AUTO
                             ? VariableSynchronization::ON_WRITE
                             : o.synchronization;
  if (colocate_with == nullptr) ++variables_created_;
  return ps::internal::make_remote_variable(std::move(info), options_.rpc_timeout);
}

void ParameterServerStrategy::run_on_replicas(const std::function<void(int)>& body) {
  run_in_closure(*this, body);
}

Strategy& ps::internal::worker_strategy() {
  // Never destroyed: closures may still run while the process exits.
  static WorkerSideStrategy* strategy = new WorkerSideStrategy;
  return *strategy;
}

}  // namespace strata::distribute
