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

#include "strata/distribute/communication_options.h"
#include "strata/distribute/strategy.h"

namespace strata::collective {
class Collectives;
}

namespace strata::distribute {

namespace internal {
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
  const CommunicationOptions& communication_options() const noexcept {
    return communication_options_;
  }

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
  std::vector<const Device*> devices_;
  int replica_id_offset_;
  int num_replicas_in_sync_;
  std::unique_ptr<internal::MergeBarrier> merge_barrier_;
  std::vector<std::unique_ptr<ReplicaContext>> contexts_;
  std::unique_ptr<internal::ReplicaThreads> threads_;
  CommunicationOptions communication_options_;
  std::shared_ptr<collective::Collectives> collectives_;
  std::atomic<bool> collectives_need_reset_{false};  // set by failing replica threads
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
