#include "strata/core/device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/core/device_spec.h"

namespace strata {
namespace {

class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override { internal::reset_runtime_for_testing(); }
  void TearDown() override { internal::reset_runtime_for_testing(); }
};

TEST(DeviceSpecTest, ParsesFullAndShortNames) {
  auto d = DeviceSpec::from_string("/job:worker/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(d.job, "worker");
  EXPECT_EQ(d.replica, 0);
  EXPECT_EQ(d.task, 1);
  EXPECT_EQ(d.device_type, "CPU");
  EXPECT_EQ(d.device_index, 0);
  EXPECT_EQ(d.to_string(), "/job:worker/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(DeviceSpec::from_string("CPU:1").to_string(), "/device:CPU:1");
  EXPECT_EQ(DeviceSpec::from_string("/cpu:0").to_string(), "/device:CPU:0");
  EXPECT_EQ(DeviceSpec::from_string("/job:ps/task:3").to_string(), "/job:ps/task:3");
  EXPECT_EQ(DeviceSpec::from_string("/device:GPU:*").device_index, std::nullopt);
  EXPECT_EQ(DeviceSpec::from_string("").to_string(), "");
}

TEST(DeviceSpecTest, MalformedNamesAreInvalidArgument) {
  for (const char* bad : {"/job", "/task:x", "/replica:-1", "CPU:1:2", "/device:CPU:a", "/foo:bar",
                          ":0", "/job:w//task:1"}) {
    try {
      DeviceSpec::from_string(bad);
      ADD_FAILURE() << bad;
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("DeviceSpec"), std::string::npos) << e.what();
    }
  }
}

TEST(DeviceSpecTest, MergeAndMatch) {
  auto base = DeviceSpec::from_string("/job:worker/task:1");
  auto merged = base.merged_with(DeviceSpec::from_string("CPU:2"));
  EXPECT_EQ(merged.to_string(), "/job:worker/task:1/device:CPU:2");
  EXPECT_TRUE(merged.matches(DeviceSpec::from_string("CPU:2")));
  EXPECT_FALSE(merged.matches(DeviceSpec::from_string("/job:ps")));
}

TEST_F(DeviceTest, DefaultRuntimeHasOneCpuDevice) {
  auto physical = config::list_physical_devices("CPU");
  ASSERT_EQ(physical.size(), 1u);
  EXPECT_EQ(physical[0].name, "/physical_device:CPU:0");
  EXPECT_TRUE(config::list_physical_devices("GPU").empty());
  auto logical = config::list_logical_devices("CPU");
  ASSERT_EQ(logical.size(), 1u);
  EXPECT_EQ(logical[0].name, "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_TRUE(config::is_runtime_initialized());
}

TEST_F(DeviceTest, DevicesPrintAsTensorFlowsNamedTuples) {
  // for i, device in enumerate(tf.config.list_logical_devices()):
  //   print("%d) %s" % (i, device))
  // 0) LogicalDevice(name='/job:localhost/replica:0/task:0/device:CPU:0', device_type='CPU')
  // 1) LogicalDevice(name='/job:localhost/replica:0/task:0/device:CPU:1', device_type='CPU')
  config::set_logical_device_configuration(config::list_physical_devices("CPU")[0],
                                           std::vector<config::LogicalDeviceConfiguration>(2));
  std::ostringstream out;
  int i = 0;
  for (const config::LogicalDevice& device : config::list_logical_devices()) {
    out << i << ") " << device << "\n";
    ++i;
  }
  EXPECT_EQ(out.str(),
            "0) LogicalDevice(name='/job:localhost/replica:0/task:0/device:CPU:0', "
            "device_type='CPU')\n"
            "1) LogicalDevice(name='/job:localhost/replica:0/task:0/device:CPU:1', "
            "device_type='CPU')\n");
  // print(tf.config.list_physical_devices("CPU")[0])
  // PhysicalDevice(name='/physical_device:CPU:0', device_type='CPU')
  std::ostringstream physical;
  physical << config::list_physical_devices("CPU")[0];
  EXPECT_EQ(physical.str(), "PhysicalDevice(name='/physical_device:CPU:0', device_type='CPU')");
  // Python's repr of the strings: print(LogicalDevice(name="it's", device_type='a\\b\n'))
  // LogicalDevice(name="it's", device_type='a\\b\n')
  std::ostringstream quoted;
  quoted << config::LogicalDevice{"it's", "a\\b\n"};
  EXPECT_EQ(quoted.str(), "LogicalDevice(name=\"it's\", device_type='a\\\\b\\n')");
  std::ostringstream both;
  both << config::LogicalDevice{"'\"", ""};
  EXPECT_EQ(both.str(), "LogicalDevice(name='\\'\"', device_type='')");
}

TEST_F(DeviceTest, LogicalDevicesSplitTheCpuAndDivideThreads) {
  config::set_intra_op_parallelism_threads(4);
  auto cpus = config::list_physical_devices("CPU");
  config::set_logical_device_configuration(cpus[0],
                                           std::vector<config::LogicalDeviceConfiguration>(4));
  EXPECT_EQ(config::get_logical_device_configuration(cpus[0]).size(), 4u);
  auto logical = config::list_logical_devices("CPU");
  ASSERT_EQ(logical.size(), 4u);
  EXPECT_EQ(logical[3].name, "/job:localhost/replica:0/task:0/device:CPU:3");
  for (const Device* d : local_devices()) EXPECT_EQ(d->num_threads(), 1);
}

TEST_F(DeviceTest, ExplicitThreadCountsAreHonoured) {
  config::set_intra_op_parallelism_threads(2);
  std::vector<config::LogicalDeviceConfiguration> conf(2);
  conf[1].num_threads = 3;
  config::set_logical_device_configuration(config::list_physical_devices("CPU")[0], conf);
  EXPECT_EQ(find_device("CPU:0").num_threads(), 1);
  EXPECT_EQ(find_device("CPU:1").num_threads(), 3);
}

TEST_F(DeviceTest, ConfigurationAfterInitialisationIsFailedPrecondition) {
  config::list_logical_devices();
  auto cpus = config::list_physical_devices("CPU");
  try {
    config::set_logical_device_configuration(cpus[0],
                                             std::vector<config::LogicalDeviceConfiguration>(2));
    FAIL();
  } catch (const FailedPreconditionError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be modified after"), std::string::npos);
  }
  EXPECT_THROW(config::set_intra_op_parallelism_threads(2), FailedPreconditionError);
  EXPECT_THROW(config::set_local_task("worker", 1), FailedPreconditionError);
  EXPECT_FALSE(config::set_local_task_if_uninitialized("worker", 1));
  EXPECT_EQ(current_device().name(), "/job:localhost/replica:0/task:0/device:CPU:0");
}

TEST_F(DeviceTest, InvalidConfigurationIsInvalidArgument) {
  auto cpus = config::list_physical_devices("CPU");
  EXPECT_THROW(config::set_logical_device_configuration(cpus[0], {}), InvalidArgumentError);
  EXPECT_THROW(
      config::set_logical_device_configuration({"/physical_device:GPU:0", "GPU"},
                                               std::vector<config::LogicalDeviceConfiguration>(2)),
      InvalidArgumentError);
  EXPECT_THROW(config::set_intra_op_parallelism_threads(-1), InvalidArgumentError);
}

TEST_F(DeviceTest, ThreadAndDeviceCountsBeyondTheMachineAreInvalidArgument) {
  const int max = config::max_cpu_threads();
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(max, std::clamp(64 * hardware, 64, 4096));
  auto cpus = config::list_physical_devices("CPU");
  EXPECT_THROW(config::set_logical_device_configuration(
                   cpus[0], std::vector<config::LogicalDeviceConfiguration>(max + 1)),
               InvalidArgumentError);
  auto with_threads = [](std::vector<int> threads) {
    std::vector<config::LogicalDeviceConfiguration> devices(threads.size());
    for (size_t i = 0; i < threads.size(); ++i) devices[i].num_threads = threads[i];
    return devices;
  };
  EXPECT_THROW(config::set_logical_device_configuration(cpus[0], with_threads({max + 1})),
               InvalidArgumentError);
  // Each within the bound, together beyond it.
  EXPECT_THROW(config::set_logical_device_configuration(cpus[0], with_threads({max, 1})),
               InvalidArgumentError);
  EXPECT_THROW(config::set_intra_op_parallelism_threads(max + 1), InvalidArgumentError);
  config::set_intra_op_parallelism_threads(max);  // the bound itself is accepted
}

// The environment's counts are checked as strictly as the API's: a value that is
// not a whole number in range is named, never read as "unset" or wrapped.
TEST_F(DeviceTest, MalformedOrHugeThreadAndDeviceVariablesAreNamed) {
  const std::string too_many = std::to_string(config::max_cpu_threads() + 1);
  for (const char* var : {"STRATA_NUM_THREADS", "STRATA_CPU_DEVICES"}) {
    for (const std::string& value :
         {std::string("abc"), std::string("2x"), std::string("0"), std::string("-3"), too_many}) {
      internal::reset_runtime_for_testing();
      ::setenv(var, value.c_str(), 1);
      try {
        config::list_logical_devices();
        ADD_FAILURE() << var << "=" << value << " was accepted";
      } catch (const InvalidArgumentError& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find(var), std::string::npos) << message;
        EXPECT_NE(message.find("'" + value + "'"), std::string::npos) << message;
        EXPECT_NE(message.find("[1, "), std::string::npos) << message;
      }
      ::unsetenv(var);
    }
  }
  internal::reset_runtime_for_testing();
  ::setenv("STRATA_NUM_THREADS", "3", 1);
  EXPECT_EQ(config::get_intra_op_parallelism_threads(), 3);
  ::unsetenv("STRATA_NUM_THREADS");
}

TEST_F(DeviceTest, DeviceScopeIsThreadLocalAndNests) {
  config::set_logical_device_configuration(config::list_physical_devices("CPU")[0],
                                           std::vector<config::LogicalDeviceConfiguration>(3));
  EXPECT_EQ(current_device().index(), 0);
  {
    auto outer = device("CPU:2");
    EXPECT_EQ(current_device().index(), 2);
    {
      auto inner = device("/device:CPU:1");
      EXPECT_EQ(current_device().index(), 1);
    }
    EXPECT_EQ(current_device().index(), 2);
    std::thread other([] { EXPECT_EQ(current_device().index(), 0); });
    other.join();
  }
  EXPECT_EQ(current_device().index(), 0);
  try {
    find_device("CPU:7");
    FAIL();
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("CPU:7"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("device:CPU:2"), std::string::npos);
  }
}

TEST_F(DeviceTest, LocalTaskNamesTheDevices) {
  config::set_local_task("worker", 1);
  EXPECT_EQ(current_device().name(), "/job:worker/replica:0/task:1/device:CPU:0");
}

TEST_F(DeviceTest, LocalTaskIfUninitializedSetsItOnlyBeforeFirstUse) {
  EXPECT_THROW(config::set_local_task_if_uninitialized("", 1), InvalidArgumentError);
  EXPECT_TRUE(config::set_local_task_if_uninitialized("chief", 0));
  EXPECT_EQ(current_device().name(), "/job:chief/replica:0/task:0/device:CPU:0");
  EXPECT_FALSE(config::set_local_task_if_uninitialized("worker", 3));
  EXPECT_EQ(current_device().name(), "/job:chief/replica:0/task:0/device:CPU:0");
}

TEST_F(DeviceTest, BackedDevicesRunOnTheirBackingDevicesUnderTheirOwnNames) {
  config::set_logical_device_configuration(config::list_physical_devices("CPU")[0],
                                           std::vector<config::LogicalDeviceConfiguration>(2));
  const Device& cpu1 = find_device("CPU:1");
  set_backed_devices("TPU", {&find_device("CPU:0"), &cpu1});
  const Device& tpu1 = find_device("/TPU:1");
  EXPECT_EQ(tpu1.name(), "/job:localhost/replica:0/task:0/device:TPU:1");
  EXPECT_EQ(tpu1.device_type(), "TPU");
  EXPECT_EQ(&tpu1.backing_device(), &cpu1);
  EXPECT_EQ(&tpu1.thread_pool(), &cpu1.thread_pool());
  EXPECT_EQ(&cpu1.backing_device(), &cpu1);
  EXPECT_EQ(backed_devices("TPU").size(), 2u);
  EXPECT_EQ(local_devices().size(), 2u);  // the CPU devices only
  {
    auto scope = device("/TPU:1");
    EXPECT_EQ(&current_device(), &tpu1);
  }
  // A device handed out stays valid after its type is removed.
  set_backed_devices("TPU", {});
  EXPECT_TRUE(config::list_logical_devices("TPU").empty());
  EXPECT_THROW(find_device("/TPU:1"), NotFoundError);
  EXPECT_EQ(tpu1.name(), "/job:localhost/replica:0/task:0/device:TPU:1");
  EXPECT_THROW(set_backed_devices("CPU", {&cpu1}), InvalidArgumentError);
  EXPECT_THROW(set_backed_devices("", {&cpu1}), InvalidArgumentError);
}

}  // namespace
}  // namespace strata
