#pragma once
// Runtime configuration, as tf.config: physical devices, logical device
// configuration, intra-op threads.
//
//   auto cpus = strata::config::list_physical_devices("CPU");
//   strata::config::set_logical_device_configuration(
//       cpus[0], std::vector<strata::config::LogicalDeviceConfiguration>(4));
//   auto logical = strata::config::list_logical_devices("CPU");   // CPU:0 .. CPU:3
//
// The runtime initialises itself on first use (the first op, the first
// list_logical_devices, the first strategy). After that the device
// configuration is fixed: set_logical_device_configuration and
// set_intra_op_parallelism_threads raise FailedPreconditionError, as
// TensorFlow does ("... cannot be modified after being initialized").
//
// Without a configuration, the environment variable STRATA_CPU_DEVICES=K (K >= 1)
// splits the CPU into K logical devices (what `strata launch --devices-per-worker`
// sets); an invalid value raises InvalidArgumentError at initialisation.
//
// Threads (Strata's rule; TensorFlow has no logical CPU threads): the runtime has
// T intra-op threads in all, T = set_intra_op_parallelism_threads(), else the
// STRATA_NUM_THREADS environment variable, else the number of hardware threads.
// One CPU device gets T threads. N logical devices each get
// LogicalDeviceConfiguration::num_threads if set, else max(1, T / N): they
// divide the cores, so replicas on different logical devices do not compete.
//
// Bounds (Strata's; TensorFlow has none and lets a process run out of memory or
// threads): the intra-op threads in all, and so the logical CPU devices (each has
// at least one thread), are at most max_cpu_threads() = 64 per hardware thread
// (at least 64, at most 4096). Larger values, from the API or the environment,
// raise InvalidArgumentError naming the value and the accepted range; so does a
// STRATA_NUM_THREADS or STRATA_CPU_DEVICES that is not a whole number.
//
// Thread-safe. The configuration is process-wide state (like TF's context).

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::config {

struct PhysicalDevice {
  std::string name;         // "/physical_device:CPU:0"
  std::string device_type;  // "CPU"
  bool operator==(const PhysicalDevice&) const = default;
};

// tf.config.LogicalDeviceConfiguration(memory_limit, experimental_priority,
// experimental_device_ordinal), plus Strata's num_threads.
struct LogicalDeviceConfiguration {
  std::optional<int64_t> memory_limit;       // MB; accepted, not enforced on CPU
  std::optional<int> experimental_priority;  // accepted, no effect on CPU
  std::optional<int> experimental_device_ordinal;
  int num_threads = 0;  // Strata: 0 = an equal share of the cores
};

struct LogicalDevice {
  std::string name;         // "/job:localhost/replica:0/task:0/device:CPU:0"
  std::string device_type;  // "CPU"
  bool operator==(const LogicalDevice&) const = default;
};

// Python's repr of TensorFlow's namedtuples, which print(device) shows:
// PhysicalDevice(name='/physical_device:CPU:0', device_type='CPU') and
// LogicalDevice(name='/job:localhost/replica:0/task:0/device:CPU:0', device_type='CPU').
// The strings are quoted as Python's repr quotes them.
std::ostream& operator<<(std::ostream& os, const PhysicalDevice& device);
std::ostream& operator<<(std::ostream& os, const LogicalDevice& device);

// The most intra-op threads (and logical CPU devices) one process may have: 64 per
// hardware thread, at least 64 and at most 4096 (see the bounds above).
int max_cpu_threads() noexcept;

// Physical devices of `device_type` ("" = all). Strata has one: the CPU.
std::vector<PhysicalDevice> list_physical_devices(std::string_view device_type = "");

// Splits `device` into logical devices. InvalidArgumentError for an unknown
// device or an empty list; FailedPreconditionError once the runtime is initialised.
void set_logical_device_configuration(const PhysicalDevice& device,
                                      std::vector<LogicalDeviceConfiguration> logical_devices);
std::vector<LogicalDeviceConfiguration> get_logical_device_configuration(
    const PhysicalDevice& device);

// Initialises the runtime if needed and lists its logical devices.
std::vector<LogicalDevice> list_logical_devices(std::string_view device_type = "");

// Total intra-op threads (see the rule above). FailedPreconditionError after
// initialisation; InvalidArgumentError for n < 0 (0 = default).
void set_intra_op_parallelism_threads(int n);
int get_intra_op_parallelism_threads();

// The job and task this process's local devices are named after
// ("localhost", 0 by default; a multi-worker strategy sets e.g. "worker", 1).
// FailedPreconditionError after initialisation.
void set_local_task(std::string job, int task);
// As set_local_task, but returns false instead of throwing when the runtime is
// already initialised: the check and the change are one step, so a strategy
// built while another thread first uses a device does not fail.
bool set_local_task_if_uninitialized(std::string job, int task);

bool is_runtime_initialized();

// tf.config.experimental.enable_op_determinism: from this call on, every
// kernel gives the same bits for the same inputs run to run, whatever the
// number of intra-op threads of the device it runs on and however its
// threads are scheduled. Strata's CPU kernels never reduce in a
// scheduling-dependent order; what the flag changes is where the split of
// the work depended on the thread count: with it, every kernel cuts its work
// into the same chunks for any pool size (fixed-size element-wise chunks, a
// GEMM split by rows or columns into parts set by the shape alone), and each
// chunk runs the same arithmetic on any thread. The split is then coarser
// or finer than the pool wants, which costs some speed (docs/PERFORMANCE.md).
// Process-wide; may be called at any time (kernels already running finish
// with the old split). Thread-safe.
void enable_op_determinism();
// Turns the flag off again (TF's config.disable_op_determinism, an internal
// helper its tests use).
void disable_op_determinism();
// Whether enable_op_determinism() is in effect (TF's
// config.is_op_determinism_enabled).
bool is_op_determinism_enabled() noexcept;

// TensorFlow spells them tf.config.experimental.*; both spellings work.
namespace experimental {
using config::disable_op_determinism;
using config::enable_op_determinism;
using config::is_op_determinism_enabled;
}  // namespace experimental

}  // namespace strata::config

namespace strata::internal {
// Test-only: forgets the configuration and the devices so that a test can
// configure the runtime again. Devices already handed out stay valid (they are
// retired, never freed). Not thread-safe with concurrent ops.
void reset_runtime_for_testing();
}  // namespace strata::internal
