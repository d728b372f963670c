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

#include "strata/distribute/replicated_strategy.h"
#include "strata/distribute/strategy.h"

namespace strata::distribute {

class MirroredStrategy : public ReplicatedStrategy {
 public:
  MirroredStrategy();
  explicit MirroredStrategy(const std::vector<std::string>& devices);
  // Strata extension (TF takes cross_device_ops here): how all-reduces are
  // packed and how long they may wait; see communication_options.h.
  MirroredStrategy(const std::vector<std::string>& devices,
                   CommunicationOptions communication_options);
  std::string name() const override { return "MirroredStrategy"; }
};

class OneDeviceStrategy : public Strategy {
 public:
  explicit OneDeviceStrategy(const std::string& device);
  int num_replicas_in_sync() const override { return 1; }
  std::string name() const override { return "OneDeviceStrategy"; }
  const Device& device() const noexcept { return *device_; }
  const Device& local_device(int) const override { return *device_; }
  // A plain variable placed on the strategy's device (as TF's OneDeviceStrategy).
  Variable create_variable(const NextVariableCreator& next, VariableArgs args) override;

 protected:
  void run_on_replicas(const std::function<void(int)>& body) override;

 private:
  const Device* device_;
  ReplicaContext context_;
};

}  // namespace strata::distribute
