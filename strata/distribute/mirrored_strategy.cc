#include "strata/distribute/mirrored_strategy.h"

#include <algorithm>

#include "strata/base/errors.h"
#include "strata/distribute/internal/merge_barrier.h"
#include "strata/distribute/internal/replica_threads.h"

namespace strata::distribute {

namespace {

class DeviceListExtended : public StrategyExtended {
 public:
  DeviceListExtended(Strategy& owner, std::vector<const Device*> devices)
      : StrategyExtended(owner), devices_(std::move(devices)) {}
  std::vector<std::string> worker_devices() const override {
    std::vector<std::string> names;
    for (const Device* d : devices_) names.push_back(d->name());
    return names;
  }

 private:
  std::vector<const Device*> devices_;
};

std::vector<const Device*> resolve_devices(const std::vector<std::string>& names) {
  STRATA_CHECK_ARG(!names.empty(), "MirroredStrategy: `devices` cannot be empty");
  std::vector<const Device*> devices;
  for (const std::string& n : names) {
    const Device* d = &find_device(n);
    STRATA_CHECK_ARG(std::find(devices.begin(), devices.end(), d) == devices.end(),
                     "MirroredStrategy: No duplicates allowed in `devices` argument: ", names);
    devices.push_back(d);
  }
  return devices;
}

std::vector<std::string> all_local_device_names() {
  std::vector<std::string> names;
  for (const Device* d : local_devices()) names.push_back(d->name());
  return names;
}

}  // namespace

MirroredStrategy::MirroredStrategy() : MirroredStrategy(all_local_device_names()) {}

MirroredStrategy::MirroredStrategy(const std::vector<std::string>& devices)
    : devices_(resolve_devices(devices)) {
  set_extended(std::make_unique<DeviceListExtended>(*this, devices_));
  for (int i = 0; i < num_replicas_in_sync(); ++i) {
    contexts_.push_back(std::make_unique<ReplicaContext>(*this, global_replica_id(i), i));
  }
  merge_barrier_ = std::make_unique<internal::MergeBarrier>(num_replicas_in_sync(),
                                                            std::chrono::minutes(30));
  threads_ = std::make_unique<internal::ReplicaThreads>(
      devices_, [this](int replica, std::exception_ptr) {
        merge_barrier_->abort(std::make_exception_ptr(
            AbortedError(str_cat("replica ", replica, " failed"))));
      });
}

MirroredStrategy::~MirroredStrategy() = default;

void MirroredStrategy::run_on_replicas(const std::function<void(int)>& body) {
  merge_barrier_->reset();
  threads_->run_all([&](int local) {
    internal::ReplicaModeGuard guard(*contexts_[local]);
    body(local);
    merge_barrier_->replica_finished(local);
  });
}

std::shared_ptr<void> MirroredStrategy::merge_replicas(int local_replica, const void* payload,
                                                       const MergeFn& merge) {
  return merge_barrier_->arrive(local_replica, payload, merge);
}

OneDeviceStrategy::OneDeviceStrategy(const std::string& device)
    : device_(&find_device(device)), context_(*this, 0, 0) {
  set_extended(std::make_unique<DeviceListExtended>(*this, std::vector<const Device*>{device_}));
}

void OneDeviceStrategy::run_on_replicas(const std::function<void(int)>& body) {
  DeviceScope device_scope(*device_);
  internal::ReplicaModeGuard guard(context_);
  body(0);
}

}  // namespace strata::distribute
