#pragma once
// Devices: where ops run. Strata's local devices are CPU devices, the physical
// CPU or the logical CPU devices it was split into (strata/core/config.h).
// Each device owns an intra-op ThreadPool; logical devices divide the machine's
// cores among them (config.h documents the rule).
//
//   auto scope = strata::device("CPU:1");      // ops on this thread now run on CPU:1
//   strata::Tensor t = strata::ones({2, 2});   // t.device() == ".../device:CPU:1"
//   const strata::Device& d = strata::current_device();
//   d.thread_pool().parallel_for(...);          // kernels split work over its threads
//
// Device objects live for the whole process (they are never destroyed while a
// tensor may point at them) and are immutable after creation: thread-safe.
// The current device is thread-local state, set and restored by DeviceScope.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/base/thread_pool.h"
#include "strata/core/device_spec.h"

namespace strata {

class Device {
 public:
  Device(DeviceSpec spec, int num_threads);
  // A device that runs on `backing`'s threads and memory under its own name
  // (the emulated TPU system's cores, see set_backed_devices).
  Device(DeviceSpec spec, const Device& backing);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Full TensorFlow name, e.g. "/job:localhost/replica:0/task:0/device:CPU:0".
  const std::string& name() const noexcept { return name_; }
  const DeviceSpec& spec() const noexcept { return spec_; }
  const std::string& device_type() const noexcept { return spec_.device_type; }
  int index() const noexcept { return *spec_.device_index; }
  int num_threads() const noexcept { return pool_->num_threads(); }
  ThreadPool& thread_pool() const noexcept { return *pool_; }
  // The local device this device runs on: itself, or the backing device.
  const Device& backing_device() const noexcept { return *backing_; }

 private:
  DeviceSpec spec_;
  std::string name_;
  std::shared_ptr<ThreadPool> pool_;  // shared with the devices it backs
  const Device* backing_;
};

// The device ops issued on this thread run on: the innermost DeviceScope, else
// the first local device (CPU:0). Initialises the runtime on first use.
const Device& current_device();

// The local device whose name matches `name` ("CPU:1", "/device:CPU:1",
// "/TPU:0", or a full name; unset fields match anything): the logical CPU
// devices first, then the backed devices. NotFoundError lists the devices.
const Device& find_device(std::string_view name);

// Every local logical CPU device, in order (CPU:0, CPU:1, ...): the devices
// replicas run on. Backed devices are not among them.
std::vector<const Device*> local_devices();

// Backed devices: `device_type` devices "<type>:0", "<type>:1", ... where
// device k runs on backing[k]'s threads and memory under its own name. The
// emulated TPU system (strata/distribute/tpu_system.h) shows its cores this
// way, as TensorFlow shows TPU devices once the TPU system is initialised:
// config::list_logical_devices("TPU") lists them and device("/TPU:0")
// places ops there. Replaces the earlier devices of that type; an empty list
// removes them. Devices handed out stay valid (retired, never freed).
// InvalidArgumentError for the type "CPU" (the runtime's own devices) or an
// empty type. Thread-safe.
void set_backed_devices(std::string_view device_type, const std::vector<const Device*>& backing);

// The backed devices of `device_type` ("" = every type), in order.
std::vector<const Device*> backed_devices(std::string_view device_type = "");

// RAII guard that makes `d` the current device of this thread until destroyed.
// Not copyable or movable: scopes nest strictly.
class DeviceScope {
 public:
  explicit DeviceScope(const Device& d);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  const Device* previous_;
};

// tf.device(name): `auto scope = strata::device("CPU:1");`
[[nodiscard]] inline DeviceScope device(std::string_view name) {
  return DeviceScope(find_device(name));
}

}  // namespace strata
