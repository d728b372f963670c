#include "strata/distribute/mirrored_strategy.h"

#include <algorithm>

#include "strata/base/errors.h"

namespace strata::distribute {

namespace {

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
    : MirroredStrategy(devices, CommunicationOptions{}) {}

MirroredStrategy::MirroredStrategy(const std::vector<std::string>& devices,
                                   CommunicationOptions communication_options)
    : ReplicatedStrategy(resolve_devices(devices), 0, static_cast<int>(devices.size()),
                         communication_options) {
  set_extended(std::make_unique<DeviceListExtended>(*this, this->devices()));
}

OneDeviceStrategy::OneDeviceStrategy(const std::string& device)
    : device_(&find_device(device)), context_(*this, 0, 0) {
  set_extended(std::make_unique<DeviceListExtended>(*this, std::vector<const Device*>{device_}));
}

Variable OneDeviceStrategy::create_variable(const NextVariableCreator& next, VariableArgs args) {
  DeviceScope device_scope(*device_);
  return next(std::move(args));
}

void OneDeviceStrategy::run_on_replicas(const std::function<void(int)>& body) {
  DeviceScope device_scope(*device_);
  internal::ReplicaModeGuard guard(context_);
  body(0);
}

}  // namespace strata::distribute
