#pragma once
// tf.distribute.MirroredStrategy and tf.distribute.OneDeviceStrategy.
//
//   sd::MirroredStrategy strategy;                      // every local logical device
//   sd::MirroredStrategy two({"CPU:0", "CPU:1"});       // these devices, in this order
//   sd::OneDeviceStrategy one("CPU:0");
//   strategy.num_replicas_in_sync();                    // number of devices
//   strategy.extended().worker_devices();               // their full names
//
// MirroredStrategy runs one long-lived replica thread per device (created with
// the strategy, joined when it is destroyed); each thread keeps its device as
// the current device, so ops issued by the replica run there. OneDeviceStrategy
// runs the single replica on the calling thread, under a device scope.
//
// Device names are resolved with strata::find_device: unknown names raise
// NotFoundError, an empty list or a duplicate InvalidArgumentError (TF's
// ValueError).

#include <memory>
#include <string>
#include <vector>

#include "strata/distribute/strategy.h"

namespace strata::distribute {

namespace internal {
class MergeBarrier;
class ReplicaThreads;
}  // namespace internal

class MirroredStrategy : public Strategy {
 public:
  MirroredStrategy();
  explicit MirroredStrategy(const std::vector<std::string>& devices);
  ~MirroredStrategy() override;

  int num_replicas_in_sync() const override { return static_cast<int>(devices_.size()); }
  std::string name() const override { return "MirroredStrategy"; }
  const std::vector<const Device*>& devices() const noexcept { return devices_; }
  const Device& local_device(int local) const override { return *devices_.at(local); }

 protected:
  void run_on_replicas(const std::function<void(int)>& body) override;
  std::shared_ptr<void> merge_replicas(int local_replica, const void* payload,
                                       const MergeFn& merge) override;

 private:
  std::vector<const Device*> devices_;
  std::unique_ptr<internal::MergeBarrier> merge_barrier_;
  std::vector<std::unique_ptr<ReplicaContext>> contexts_;
  std::unique_ptr<internal::ReplicaThreads> threads_;
};

class OneDeviceStrategy : public Strategy {
 public:
  explicit OneDeviceStrategy(const std::string& device);
  int num_replicas_in_sync() const override { return 1; }
  std::string name() const override { return "OneDeviceStrategy"; }
  const Device& device() const noexcept { return *device_; }
  const Device& local_device(int) const override { return *device_; }

 protected:
  void run_on_replicas(const std::function<void(int)>& body) override;

 private:
  const Device* device_;
  ReplicaContext context_;
};

}  // namespace strata::distribute
