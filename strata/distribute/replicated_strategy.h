#pragma once
// ReplicatedStrategy: the machinery shared by MirroredStrategy,
// MultiWorkerMirroredStrategy and TPUStrategy: one long-lived replica thread
// per local replica, bound to the replica's (primary) device, each running in
// its own replica context; merge_call through a bounded barrier; failures of
// one replica abort what the others wait in.
//
// Subclasses decide which devices the local replicas use and where this
// worker's replicas sit among all replicas (replica_id_offset).
//
// Thread-safety: driven by one thread at a time (see Strategy).

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "strata/base/mutex.h"
#include "strata/distribute/communication_options.h"
#include "strata/distribute/strategy.h"
#include "strata/ops/collective_ops.h"

namespace strata::collective {
class Collectives;
}

namespace strata::distribute {

namespace internal {
class GradientOverlap;
class MergeBarrier;
class ReplicaThreads;
}  // namespace internal

class ReplicatedStrategy : public Strategy {
 public:
  ~ReplicatedStrategy() override;

  int num_replicas_in_sync() const override { return num_replicas_in_sync_; }
  int num_local_replicas() const override { return static_cast<int>(devices_.size()); }
  int global_replica_id(int local) const override { return replica_id_offset_ + local; }
  const Device& local_device(int local) const override { return *devices_.at(local); }
  // The local replicas' devices, in local replica order.
  const std::vector<const Device*>& devices() const noexcept { return devices_; }

  // Distributed variables (distributed_variable.h); from a replica context the
  // variable is created once through a merge_call and shared by every replica.
  Variable create_variable(const NextVariableCreator& next, VariableArgs args) override;
  // All-reduce through the strategy's collectives: the local replicas'
  // in-process reduce-scatter + all-gather (or the hierarchical group of a
  // multi-worker strategy), in packs of communication_options().bytes_per_pack.
  std::vector<Tensor> all_reduce_in_replica(ReplicaContext& ctx, ReduceOp op,
                                            const std::vector<Tensor>& values) override;
  // The sink of CommunicationOptions.overlap_gradient_reduction on a strategy
  // that enabled it (a multi-worker strategy with two or more workers), else
  // nullptr.
  std::unique_ptr<GradientSink> gradient_sink_in_replica(ReplicaContext& ctx,
                                                         size_t num_sources) override;
  // What overlap_gradient_reduction did so far, summed over the local
  // replicas (all zero when it is off). Between steps only.
  GradientOverlapCounts gradient_overlap_counts() const;
  const CommunicationOptions& communication_options() const noexcept {
    return communication_options_;
  }
  // Each replica's `row` (rank 2, one row; the same columns and dtype on
  // every replica) gathered across every replica of every worker, in global
  // replica order: [num_replicas_in_sync, columns]. On a replica thread of
  // this strategy; every replica must call it (the sharded weight update's
  // all-gather of new values). The result is the caller's to keep.
  Tensor all_gather_rows_in_replica(ReplicaContext& ctx, const Tensor& row);
  // Each replica's `rows` (rank 2, num_replicas_in_sync() rows; the same
  // shape and dtype on every replica) summed across every replica of every
  // worker; replica r receives row r of the sum only, [1, columns]. A
  // reduce-scatter of the strategy's collectives (the sharded weight update's
  // gradient reduction); under deterministic_reduction the all-reduce's fixed
  // tree sums the rows instead and each replica keeps its own. One collective
  // for the whole tensor: bytes_per_pack does not split it. On a replica
  // thread of this strategy; every replica must call it.
  Tensor reduce_scatter_rows_in_replica(ReplicaContext& ctx, const Tensor& rows);
  // Whether every replica is a thread of this process (MirroredStrategy, or a
  // multi-worker strategy of one worker) and sums are the collectives' own
  // (deterministic_reduction off): the sharded weight update then reads the
  // other replicas' tensors in place (exchange_in_process) instead of
  // exchanging packed rows through the collectives.
  bool replicas_share_process() const noexcept {
    return num_local_replicas() == num_replicas_in_sync_ &&
           !communication_options_.deterministic_reduction;
  }
  // Every local replica's `values` (the handles: the buffers are shared, not
  // copied), in local replica order. A barrier of the local replicas: every
  // one must call it. On a replica thread of this strategy.
  std::shared_ptr<const std::vector<std::vector<Tensor>>> exchange_in_process(
      ReplicaContext& ctx, const std::vector<Tensor>& values);
  // communication_options().deterministic_micro_batches when
  // deterministic_reduction is on, else 0.
  int deterministic_micro_batches() const override;
  // The strategy.run calls that have completed without an error: the step
  // number that divergence checks (check_divergence_every_n_steps) report.
  int64_t steps_completed() const noexcept { return steps_completed_; }

 protected:
  // `devices`: one per local replica. Global replica ids of this worker's
  // replicas are [replica_id_offset, replica_id_offset + devices.size()).
  ReplicatedStrategy(std::vector<const Device*> devices, int replica_id_offset,
                     int num_replicas_in_sync, CommunicationOptions communication_options = {});
  // Replaces the group all_reduce_in_replica uses; its ranks are the global
  // replica ids and its size num_replicas_in_sync() (a multi-worker strategy
  // installs a hierarchical group). The default is a LocalCollectives over the
  // local replicas, used only when they are all the replicas.
  void set_collectives(std::shared_ptr<collective::Collectives> collectives);
  // Starts overlap_gradient_reduction on the current collectives (after
  // set_collectives): one communication thread per local replica.
  void enable_gradient_overlap();
  // Called once per new distributed variable, after its components were made
  // from replica 0's initial value (a multi-worker strategy broadcasts the
  // chief's value here). Runs on one thread while the others wait.
  virtual void initialize_distributed_variable(const Variable& variable) { (void)variable; }
  // Called on a replica thread as soon as its replica failed (before the
  // others return); the default aborts the merge barrier. Subclasses that own
  // collectives abort them too, then call this.
  virtual void on_replica_failure(int local_replica, const std::exception_ptr& error);

  void run_on_replicas(const std::function<void(int)>& body) override;
  std::shared_ptr<void> merge_replicas(int local_replica, const void* payload,
                                       const MergeFn& merge) override;

 private:
  // deterministic_reduction's all-reduce: per floating dtype, the values are
  // packed into one row, all-gathered ([R, P] in global replica order) and
  // summed with pairwise_sum; other dtypes reduce exactly either way.
  std::vector<Tensor> deterministic_all_reduce(int rank, ReduceOp op,
                                               const std::vector<Tensor>& values);
  // The live mirrored variables this strategy created, in creation order
  // (the same order on every worker); forgets the destroyed ones.
  std::vector<Variable> live_mirrored_variables();
  // On local replica `local`'s thread: the CRC-32C of its copy of each of
  // `variables`, all-gathered across every replica: an int64 [R, V] table.
  Tensor gather_fingerprints(int local, const std::vector<Variable>& variables);
  // DataLossError naming each variable whose column of `table` differs.
  void raise_if_diverged(const Tensor& table, const std::vector<Variable>& variables,
                         int64_t step) const;

  std::vector<const Device*> devices_;
  int replica_id_offset_;
  int num_replicas_in_sync_;
  std::unique_ptr<internal::MergeBarrier> merge_barrier_;
  std::vector<std::unique_ptr<ReplicaContext>> contexts_;
  std::unique_ptr<internal::ReplicaThreads> threads_;
  CommunicationOptions communication_options_;
  std::shared_ptr<collective::Collectives> collectives_;
  std::atomic<bool> collectives_need_reset_{false};  // set by failing replica threads
  // One per local replica when overlap_gradient_reduction is on, else empty.
  std::vector<std::unique_ptr<internal::GradientOverlap>> overlaps_;
  int64_t steps_completed_ = 0;  // by the driving thread only
  Mutex mirrored_mu_;
  std::vector<std::weak_ptr<VariableImpl>> mirrored_ STRATA_GUARDED_BY(mirrored_mu_);
};

// Full names of `devices` (for StrategyExtended::worker_devices).
std::vector<std::string> device_names(const std::vector<const Device*>& devices);

// StrategyExtended whose worker (and parameter) devices are a fixed list.
class DeviceListExtended : public StrategyExtended {
 public:
  DeviceListExtended(Strategy& owner, std::vector<const Device*> devices,
                     bool should_checkpoint = true)
      : StrategyExtended(owner),
        devices_(std::move(devices)),
        should_checkpoint_(should_checkpoint) {}
  std::vector<std::string> worker_devices() const override { return device_names(devices_); }
  bool should_checkpoint() const override { return should_checkpoint_; }

 private:
  std::vector<const Device*> devices_;
  bool should_checkpoint_;
};

}  // namespace strata::distribute
