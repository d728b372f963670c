#include "strata/testing/logical_devices.h"

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/core/config.h"

namespace strata::testing {

void use_logical_cpus(int count) {
  STRATA_CHECK_ARG(count >= 1, "use_logical_cpus: expected at least one device, got ", count);
  use_logical_cpus(std::vector<int>(static_cast<size_t>(count), 0));
}

void use_logical_cpus(const std::vector<int>& threads_per_device) {
  strata::internal::reset_runtime_for_testing();
  std::vector<config::LogicalDeviceConfiguration> devices(threads_per_device.size());
  for (size_t i = 0; i < devices.size(); ++i) devices[i].num_threads = threads_per_device[i];
  config::set_logical_device_configuration(config::list_physical_devices("CPU").at(0), devices);
}

std::vector<std::string> cpu_device_names(int count) {
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) names.push_back(str_cat("CPU:", i));
  return names;
}

}  // namespace strata::testing
