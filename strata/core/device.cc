#include "strata/core/device.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <thread>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/base/numbers.h"
#include "strata/core/config.h"

namespace strata {

Device::Device(DeviceSpec spec, int num_threads)
    : spec_(std::move(spec)),
      name_(spec_.to_string()),
      pool_(std::make_shared<ThreadPool>(num_threads)),
      backing_(this) {}

Device::Device(DeviceSpec spec, const Device& backing)
    : spec_(std::move(spec)),
      name_(spec_.to_string()),
      pool_(backing.pool_),
      backing_(&backing.backing_device()) {}

namespace {

// A whole number in [1, max] from environment variable `name`; anything else is
// the caller's mistake, named with the accepted range (never silently ignored).
int env_count(const char* name, const char* value, int max) {
  const std::optional<int64_t> n = parse_whole_number(value);
  STRATA_CHECK_ARG(n && *n >= 1 && *n <= max, name, ": expected a whole number in [1, ", max,
                   "], got '", value, "'");
  return static_cast<int>(*n);
}

// Process-wide runtime state (TensorFlow's eager context equivalent). Everything
// is guarded by mu; devices is written under mu and immutable once initialized
// is true, which is what lets current_device() read it after a single acquire
// (so it carries no annotation: its readers hold no lock).
struct Runtime {
  Mutex mu;
  bool initialized STRATA_GUARDED_BY(mu) = false;
  // empty = one device
  std::vector<config::LogicalDeviceConfiguration> cpu_config STRATA_GUARDED_BY(mu);
  int intra_op_threads STRATA_GUARDED_BY(mu) = 0;
  std::string job STRATA_GUARDED_BY(mu) = "localhost";
  int task STRATA_GUARDED_BY(mu) = 0;
  std::vector<std::unique_ptr<Device>> devices;
  // set_backed_devices: they come and go while the runtime runs
  std::vector<std::unique_ptr<Device>> backed STRATA_GUARDED_BY(mu);
  // reset_runtime_for_testing and set_backed_devices keep these alive
  std::vector<std::unique_ptr<Device>> retired STRATA_GUARDED_BY(mu);

  static Runtime& get() {
    static Runtime runtime;
    return runtime;
  }

  int total_threads() const STRATA_REQUIRES(mu) {
    if (intra_op_threads > 0) return intra_op_threads;
    if (const char* env = std::getenv("STRATA_NUM_THREADS")) {
      return env_count("STRATA_NUM_THREADS", env, config::max_cpu_threads());
    }
    return std::max(1u, std::thread::hardware_concurrency());
  }

  void initialize_locked() STRATA_REQUIRES(mu) {
    if (initialized) return;
    if (cpu_config.empty()) {
      // STRATA_CPU_DEVICES=K splits the CPU into K logical devices when the
      // program did not configure them (set by `strata launch --devices-per-worker`).
      if (const char* env = std::getenv("STRATA_CPU_DEVICES")) {
        const int k = env_count("STRATA_CPU_DEVICES", env, config::max_cpu_threads());
        if (k > 1) cpu_config.resize(k);
      }
    }
    const int total = total_threads();
    const size_t n = std::max<size_t>(1, cpu_config.size());
    for (size_t i = 0; i < n; ++i) {
      int threads = total;
      if (!cpu_config.empty()) {
        threads = cpu_config[i].num_threads > 0 ? cpu_config[i].num_threads
                                                : std::max(1, total / static_cast<int>(n));
      }
      DeviceSpec spec{.job = job,
                      .replica = 0,
                      .task = task,
                      .device_type = "CPU",
                      .device_index = static_cast<int>(i)};
      devices.push_back(std::make_unique<Device>(std::move(spec), threads));
    }
    initialized = true;
  }

  const std::vector<std::unique_ptr<Device>>& ensure_initialized() {
    MutexLock lock(mu);
    initialize_locked();
    return devices;
  }
};

thread_local const Device* t_current_device = nullptr;

void check_not_initialized(const Runtime& rt, std::string_view what) STRATA_REQUIRES(rt.mu) {
  STRATA_CHECK(FAILED_PRECONDITION, !rt.initialized, what,
               " cannot be modified after the runtime has been initialized");
}

}  // namespace

const Device& current_device() {
  if (t_current_device != nullptr) return *t_current_device;
  return *Runtime::get().ensure_initialized().front();
}

const Device& find_device(std::string_view name) {
  const DeviceSpec pattern = DeviceSpec::from_string(name);
  Runtime& rt = Runtime::get();
  const auto& devices = rt.ensure_initialized();
  for (const auto& d : devices) {
    if (d->spec().matches(pattern)) return *d;
  }
  MutexLock lock(rt.mu);
  for (const auto& d : rt.backed) {
    if (d->spec().matches(pattern)) return *d;
  }
  std::vector<std::string> names;
  names.reserve(devices.size() + rt.backed.size());
  for (const auto& d : devices) names.push_back(d->name());
  for (const auto& d : rt.backed) names.push_back(d->name());
  throw NotFoundError(
      str_cat("device: no local device matches '", name, "'; local devices are ", names));
}

std::vector<const Device*> local_devices() {
  std::vector<const Device*> out;
  for (const auto& d : Runtime::get().ensure_initialized()) out.push_back(d.get());
  return out;
}

void set_backed_devices(std::string_view device_type, const std::vector<const Device*>& backing) {
  STRATA_CHECK_ARG(!device_type.empty() && device_type != "CPU",
                   "set_backed_devices: expected a device type other than CPU, got '", device_type,
                   "'");
  Runtime& rt = Runtime::get();
  rt.ensure_initialized();
  MutexLock lock(rt.mu);
  std::vector<std::unique_ptr<Device>> kept;
  for (auto& d : rt.backed) {
    (d->device_type() == device_type ? rt.retired : kept).push_back(std::move(d));
  }
  rt.backed = std::move(kept);
  for (size_t k = 0; k < backing.size(); ++k) {
    STRATA_INTERNAL_CHECK(backing[k] != nullptr, "set_backed_devices: null backing device");
    DeviceSpec spec{.job = rt.job,
                    .replica = 0,
                    .task = rt.task,
                    .device_type = std::string(device_type),
                    .device_index = static_cast<int>(k)};
    rt.backed.push_back(std::make_unique<Device>(std::move(spec), *backing[k]));
  }
}

std::vector<const Device*> backed_devices(std::string_view device_type) {
  Runtime& rt = Runtime::get();
  MutexLock lock(rt.mu);
  std::vector<const Device*> out;
  for (const auto& d : rt.backed) {
    if (device_type.empty() || d->device_type() == device_type) out.push_back(d.get());
  }
  return out;
}

DeviceScope::DeviceScope(const Device& d) : previous_(t_current_device) { t_current_device = &d; }
DeviceScope::~DeviceScope() { t_current_device = previous_; }

namespace config {

namespace {
const PhysicalDevice kCpu{"/physical_device:CPU:0", "CPU"};

// Python's repr of a str: single quotes, unless the text holds a single quote
// and no double quote; backslashes, the chosen quote and control characters
// escaped.
std::string python_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == quote) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

std::ostream& print_device(std::ostream& os, const char* type, const std::string& name,
                           const std::string& device_type) {
  return os << type << "(name=" << python_repr(name) << ", device_type=" << python_repr(device_type)
            << ")";
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const PhysicalDevice& device) {
  return print_device(os, "PhysicalDevice", device.name, device.device_type);
}

std::ostream& operator<<(std::ostream& os, const LogicalDevice& device) {
  return print_device(os, "LogicalDevice", device.name, device.device_type);
}

int max_cpu_threads() noexcept {
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(64 * hardware, 64, 4096);
}

std::vector<PhysicalDevice> list_physical_devices(std::string_view device_type) {
  if (device_type.empty() || device_type == "CPU") return {kCpu};
  return {};
}

void set_logical_device_configuration(const PhysicalDevice& device,
                                      std::vector<LogicalDeviceConfiguration> logical_devices) {
  STRATA_CHECK_ARG(device == kCpu, "set_logical_device_configuration: unknown physical device '",
                   device.name, "'");
  STRATA_CHECK_ARG(!logical_devices.empty(),
                   "set_logical_device_configuration: expected at least one logical device for ",
                   device.name, ", got 0");
  const int max = max_cpu_threads();
  STRATA_CHECK_ARG(logical_devices.size() <= static_cast<size_t>(max),
                   "set_logical_device_configuration: expected at most ", max,
                   " logical devices (64 per hardware thread), got ", logical_devices.size());
  int64_t explicit_threads = 0;
  for (size_t i = 0; i < logical_devices.size(); ++i) {
    STRATA_CHECK_ARG(logical_devices[i].num_threads >= 0 && logical_devices[i].num_threads <= max,
                     "LogicalDeviceConfiguration.num_threads must be in [0, ", max, "], got ",
                     logical_devices[i].num_threads, " for logical device ", i);
    explicit_threads += logical_devices[i].num_threads;
  }
  STRATA_CHECK_ARG(explicit_threads <= max,
                   "set_logical_device_configuration: the logical devices' num_threads add up to ",
                   explicit_threads, ", more than the ", max, " threads a process may have");
  Runtime& rt = Runtime::get();
  MutexLock lock(rt.mu);
  check_not_initialized(rt, "Virtual devices");
  rt.cpu_config = std::move(logical_devices);
}

std::vector<LogicalDeviceConfiguration> get_logical_device_configuration(
    const PhysicalDevice& device) {
  STRATA_CHECK_ARG(device == kCpu, "get_logical_device_configuration: unknown physical device '",
                   device.name, "'");
  Runtime& rt = Runtime::get();
  MutexLock lock(rt.mu);
  return rt.cpu_config;
}

std::vector<LogicalDevice> list_logical_devices(std::string_view device_type) {
  std::vector<LogicalDevice> out;
  for (const auto& d : Runtime::get().ensure_initialized()) {
    if (device_type.empty() || d->device_type() == device_type) {
      out.push_back({d->name(), d->device_type()});
    }
  }
  for (const Device* d : backed_devices(device_type)) out.push_back({d->name(), d->device_type()});
  return out;
}

void set_intra_op_parallelism_threads(int n) {
  STRATA_CHECK_ARG(n >= 0 && n <= max_cpu_threads(),
                   "set_intra_op_parallelism_threads: expected n in [0, ", max_cpu_threads(),
                   "], got ", n);
  Runtime& rt = Runtime::get();
  MutexLock lock(rt.mu);
  check_not_initialized(rt, "Intra op parallelism");
  rt.intra_op_threads = n;
}

int get_intra_op_parallelism_threads() {
  Runtime& rt = Runtime::get();
  MutexLock lock(rt.mu);
  return rt.total_threads();
}

void set_local_task(std::string job, int task) {
  STRATA_CHECK(FAILED_PRECONDITION, set_local_task_if_uninitialized(std::move(job), task),
               "The local task cannot be modified after the runtime has been initialized");
}

bool set_local_task_if_uninitialized(std::string job, int task) {
  STRATA_CHECK_ARG(!job.empty() && task >= 0,
                   "set_local_task: expected a job name and task >= 0, got '", job, "', ", task);
  Runtime& rt = Runtime::get();
  MutexLock lock(rt.mu);
  if (rt.initialized) return false;
  rt.job = std::move(job);
  rt.task = task;
  return true;
}

bool is_runtime_initialized() {
  Runtime& rt = Runtime::get();
  MutexLock lock(rt.mu);
  return rt.initialized;
}

namespace {
std::atomic<bool> g_op_determinism{false};
}  // namespace

void enable_op_determinism() { g_op_determinism.store(true, std::memory_order_relaxed); }
void disable_op_determinism() { g_op_determinism.store(false, std::memory_order_relaxed); }
bool is_op_determinism_enabled() noexcept {
  return g_op_determinism.load(std::memory_order_relaxed);
}

}  // namespace config

namespace internal {
void reset_runtime_for_testing() {
  Runtime& rt = Runtime::get();
  MutexLock lock(rt.mu);
  for (auto& d : rt.devices) rt.retired.push_back(std::move(d));
  rt.devices.clear();
  for (auto& d : rt.backed) rt.retired.push_back(std::move(d));
  rt.backed.clear();
  rt.cpu_config.clear();
  rt.intra_op_threads = 0;
  rt.job = "localhost";
  rt.task = 0;
  rt.initialized = false;
}
}  // namespace internal

}  // namespace strata
