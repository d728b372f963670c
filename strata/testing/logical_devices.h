#pragma once
// Logical CPU devices for a test, as TensorFlow's tests split the host CPU
// with tf.config.set_logical_device_configuration before building a strategy:
//
//   strata::testing::use_logical_cpus(4);                 // CPU:0 .. CPU:3
//   sd::MirroredStrategy strategy(strata::testing::cpu_device_names(2));
//   strata::testing::use_logical_cpus({1, 2});            // CPU:0 one thread, CPU:1 two
//
// Each call first resets the runtime (strata::internal::reset_runtime_for_testing:
// the devices and what was built on them), so a fixture's SetUp can call it
// whatever the previous test of the binary configured.
//
// Test-only (strata/testing is not installed). Call it from the test's main
// thread while no strategy, variable or iterator of an earlier configuration
// is alive.

#include <string>
#include <vector>

namespace strata::testing {

// Resets the runtime and splits the first physical CPU into `count` logical
// devices, each with an equal share of the cores (num_threads 0).
void use_logical_cpus(int count);

// Resets the runtime and splits the first physical CPU into one logical
// device per entry of `threads_per_device`, device i running
// threads_per_device[i] intra-op threads.
void use_logical_cpus(const std::vector<int>& threads_per_device);

// "CPU:0" .. "CPU:<count - 1>": the names a strategy takes for its devices.
std::vector<std::string> cpu_device_names(int count);

}  // namespace strata::testing
