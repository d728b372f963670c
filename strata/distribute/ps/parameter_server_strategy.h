#pragma once
// tf.distribute.experimental.ParameterServerStrategy (spec §9): asynchronous
// training where variables live on ps tasks and workers run closures the
// chief schedules through a ClusterCoordinator (cluster_coordinator.h).
//
//   // TF_CONFIG: {"cluster": {"chief": [...], "worker": [...], "ps": [...]},
//   //             "task": {"type": "chief", "index": 0}}
//   auto resolver = std::make_shared<cr::TFConfigClusterResolver>();
//   if (resolver->task_type() != "chief") {          // ps and workers serve
//     sd::Server(*resolver).join();
//     return 0;
//   }
//   sd::ParameterServerStrategy strategy(resolver);
//   strata::Variable w;
//   { auto scope = strategy.scope(); w = strata::Variable(strata::zeros({4, 1})); }
//   w.device();                                      // "/job:ps/replica:0/task:0/device:CPU:0"
//   sd::ClusterCoordinator coordinator(strategy);
//   auto loss = coordinator.schedule("train_step", {w, iterator});
//
// Construction validates the cluster as TF does (InvalidArgumentError, TF's
// ValueError): a non-empty cluster ("Cluster spec must be non-empty in
// `tf.distribute.cluster_resolver.ClusterResolver`."), the multi-worker role
// rules (multi_worker_util::validate_cluster_spec), at least one ps ("There
// must be at least one ps.") and one worker ("There must be at least one
// worker."), a chief job (the coordinator: "There must be a chief ...") and
// this process being that chief. It contacts no task: a ps that is not up
// yet fails the first variable creation with UnavailableError.
//
// Variables created in the scope are created on ps task k = (creation index
// mod #ps) at once (CreateVariable RPC with the initial value) and the handle
// reads and updates them there (ps_variable.h).
//
// Partitioned variables (TF's variable_partitioner): a rank >= 1 variable the
// partitioner splits into k = num_partitions(...) > 1 shards is a
// ShardedVariable whose shards "<name>/part_<i>" hold TF's "div" layout (13
// rows in 5 shards: 3,3,3,2,2); each shard is one creation in the
// round-robin, so with 2 ps the shards land on ps 0,1,0,1,0. The handle
// returned is ShardedVariable::as_variable(): reading it concatenates the
// shards, ShardedVariable::from_variable gives the shards, and it can be
// passed to ClusterCoordinator::schedule (FunctionArgs::sharded_variable on
// the worker: full-tensor use, embedding_lookup per shard, per-shard
// gradients applied on each shard's ps). An invalid partition is
// InvalidArgumentError. A synchronization ON_READ variable (a metric's state)
// is one ps variable too, shared by every worker (one replica per worker: its
// reads need no aggregation), as TF's strategy places it. num_replicas_in_sync() is 1 (one CPU
// replica per worker; workers with accelerators are not modelled).
//
// Inside a scheduled function, TF's pattern:
//
//   std::vector<strata::Tensor> step_fn(const sd::ps::FunctionArgs& args) {
//     sd::Strategy& strategy = sd::get_strategy();   // the worker's ParameterServerStrategy
//     auto replica_fn = [&](const strata::Tensor& x) { ...; return loss; };
//     auto losses = strategy.run(replica_fn, x);     // one replica: replica_id 0 of 1
//     return {strategy.reduce(sd::ReduceOp::SUM, losses, std::nullopt)};
//   }
//
// A worker runs every closure in the scope of its worker-side strategy
// (ps::internal::worker_strategy(): named "ParameterServerStrategy", one
// replica), so get_strategy() there is that strategy, as TF's closures see the
// strategy they were traced under; the chief's object is not needed (a worker
// process has none). run() executes fn on the closure's thread in a replica
// context of one replica (replica_id_in_sync_group 0, num_replicas_in_sync 1)
// and reduce() of its result is the value, reduced along `axis` when one is
// given. The chief's ParameterServerStrategy object, where a closure can reach
// it (the same process), runs the same way. run() outside a scheduled function
// is FailedPreconditionError: TF raises NotImplementedError before a
// ClusterCoordinator exists and only warns after (then running fn on the
// coordinator); Strata never runs a replica function on the coordinator.
//
// Thread-safety: as every strategy, driven by one thread at a time; the
// variables it made are thread-safe.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/cluster/cluster_resolver.h"
#include "strata/distribute/strategy.h"

namespace strata::distribute {

struct ParameterServerStrategyOptions {
  // TF's variable_partitioner (None by default): called with a variable's
  // shape and dtype, returns the number of partitions per axis.
  // (partitioners.h: FixedShardsPartitioner, MinSizePartitioner,
  // MaxSizePartitioner.) A variable it splits into k > 1 shards becomes a
  // ShardedVariable (sharded_variable.h) of k ps variables in the "div"
  // layout, behind the ordinary Variable handle (ShardedVariable::from_variable).
  std::function<std::vector<int64_t>(const TensorShape&, DType)> variable_partitioner = nullptr;
  // The deadline of every variable RPC made through this strategy's variables.
  std::chrono::milliseconds rpc_timeout{30000};
};

class ParameterServerStrategy : public Strategy {
 public:
  explicit ParameterServerStrategy(std::shared_ptr<cluster_resolver::ClusterResolver> resolver,
                                   ParameterServerStrategyOptions options = {});
  ~ParameterServerStrategy() override;

  std::string name() const override { return "ParameterServerStrategy"; }
  int num_replicas_in_sync() const override { return 1; }
  const cluster_resolver::ClusterResolver* cluster_resolver() const override {
    return resolver_.get();
  }
  Variable create_variable(const NextVariableCreator& next, VariableArgs args) override;

  int num_ps() const noexcept { return static_cast<int>(ps_targets_.size()); }
  int num_workers() const noexcept { return static_cast<int>(worker_targets_.size()); }
  // Task addresses in task-index order.
  const std::vector<std::string>& ps_targets() const noexcept { return ps_targets_; }
  const std::vector<std::string>& worker_targets() const noexcept { return worker_targets_; }
  std::chrono::milliseconds rpc_timeout() const noexcept { return options_.rpc_timeout; }

 protected:
  void run_on_replicas(const std::function<void(int local_replica)>& body) override;

 private:
  std::shared_ptr<cluster_resolver::ClusterResolver> resolver_;
  ParameterServerStrategyOptions options_;
  std::vector<std::string> ps_targets_;
  std::vector<std::string> worker_targets_;
  // One variable on ps task (creation index mod #ps).
  Variable create_on_next_ps(const Tensor& initial_value, const VariableOptions& options);

  int64_t variables_created_ = 0;
};

namespace ps::internal {
// The strategy every closure on a worker runs under (the server enters its
// scope around the registered function): one process-wide object, named
// "ParameterServerStrategy", one replica per worker. Its run() is
// FailedPreconditionError outside a closure; variables created in its scope
// are plain local variables (the closures' own creators hand out the chief's).
Strategy& worker_strategy();
}  // namespace ps::internal

}  // namespace strata::distribute
