#include "strata/distribute/tpu_strategy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/core/device.h"
#include "strata/core/tensor.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/distribute/tpu_system.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/random_ops.h"
#include "strata/testing/logical_devices.h"
#include "strata/tpu/device_assignment.h"
#include "strata/tpu/local_topology.h"
#include "strata/tpu/sharding.h"

namespace strata::distribute {
namespace {

namespace tpu = strata::tpu::experimental;

// Eight logical CPU devices: the local TPU system is the 2x2x1x2 mesh of
// local_topology.h, TPU ordinal (= CPU device) c + 2 * (x + 2 * y).
class TPUStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("STRATA_TPU_TOPOLOGY");
    tpu::shutdown_tpu_system();
    strata::testing::use_logical_cpus(8);
  }
  void TearDown() override { tpu::shutdown_tpu_system(); }

  static std::string cpu(int k) { return find_device("CPU:" + std::to_string(k)).name(); }

  // 4 replicas of the two cores of one chip.
  static tpu::DeviceAssignment two_cores_per_replica(const tpu::Topology& topology) {
    return tpu::DeviceAssignment::build(topology,
                                        {.computation_shape = {1, 1, 1, 2}, .num_replicas = 4});
  }
};

template <typename Fn>
void expect_error_containing(Fn&& fn, ErrorCode code, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing: " << part;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST_F(TPUStrategyTest, InitializeReturnsTheLocalMeshAndShutdownForgetsIt) {
  config::experimental_connect_to_cluster();
  EXPECT_TRUE(config::is_connected_to_cluster());
  EXPECT_FALSE(tpu::is_tpu_system_initialized());
  tpu::Topology topology = tpu::initialize_tpu_system();
  EXPECT_EQ(topology.mesh_shape(), (std::vector<int>{2, 2, 1, 2}));
  EXPECT_EQ(topology.num_tasks(), 1);
  EXPECT_EQ(topology.num_tpus_per_task(), 8);
  EXPECT_TRUE(tpu::is_tpu_system_initialized());
  EXPECT_EQ(tpu::initialized_topology(), topology);
  tpu::shutdown_tpu_system();
  EXPECT_FALSE(tpu::is_tpu_system_initialized());
  EXPECT_EQ(tpu::initialized_topology(), std::nullopt);
  tpu::shutdown_tpu_system();  // a no-op when not initialised
}

TEST_F(TPUStrategyTest, InitializingTwiceWarnsAndReinitializes) {
  tpu::initialize_tpu_system();
  ::setenv("STRATA_TPU_TOPOLOGY", "1x2x2x2", 1);
  ::testing::internal::CaptureStderr();
  tpu::Topology again = tpu::initialize_tpu_system();
  std::string err = ::testing::internal::GetCapturedStderr();
  ::unsetenv("STRATA_TPU_TOPOLOGY");
  EXPECT_NE(err.find("has already been initialized. Reinitializing the TPU can cause previously "
                     "created variables on TPU to be lost."),
            std::string::npos)
      << err;
  EXPECT_EQ(again.mesh_shape(), (std::vector<int>{1, 2, 2, 2}));
  EXPECT_EQ(tpu::initialized_topology(), again);
}

TEST_F(TPUStrategyTest, InitializingWithTooFewDevicesIsNotFoundAndLeavesTheSystemDown) {
  ::setenv("STRATA_TPU_TOPOLOGY", "4x2x1x2", 1);
  expect_error_containing([] { tpu::initialize_tpu_system(); }, ErrorCode::NOT_FOUND,
                          "TPUs not found in the cluster. Failed in initialization: ");
  ::unsetenv("STRATA_TPU_TOPOLOGY");
  EXPECT_FALSE(tpu::is_tpu_system_initialized());
}

TEST_F(TPUStrategyTest, UsingTPUStrategyBeforeInitializeIsAFailedPrecondition) {
  expect_error_containing([] { TPUStrategy strategy; }, ErrorCode::FAILED_PRECONDITION,
                          "the TPU system has not been initialized");
  tpu::initialize_tpu_system();
  TPUStrategy strategy;
  tpu::shutdown_tpu_system();
  expect_error_containing([&] { strategy.run([] {}); }, ErrorCode::FAILED_PRECONDITION,
                          "the TPU system has not been initialized");
}

TEST_F(TPUStrategyTest, WithoutAnAssignmentEveryCoreIsAReplicaOfOneLogicalDevice) {
  tpu::initialize_tpu_system();
  TPUStrategy strategy;
  EXPECT_EQ(strategy.name(), "TPUStrategy");
  EXPECT_EQ(strategy.num_replicas_in_sync(), 8);
  EXPECT_EQ(strategy.num_logical_devices_per_replica(), 1);
  std::vector<std::string> expected;
  expected.reserve(8);
  for (int k = 0; k < 8; ++k) expected.push_back(cpu(k));
  EXPECT_EQ(strategy.extended().worker_devices(), expected);
  for (int r = 0; r < 8; ++r) {
    ASSERT_EQ(strategy.logical_devices(r).size(), 1u);
    EXPECT_EQ(strategy.logical_devices(r)[0]->name(), cpu(r));
  }
  expect_error_containing([&] { strategy.logical_devices(8); }, ErrorCode::INVALID_ARGUMENT,
                          "expected a local replica in [0, 8), got 8");
}

TEST_F(TPUStrategyTest, AnAssignmentOfTwoCoresPerReplicaGivesEachReplicaOneChip) {
  tpu::Topology topology = tpu::initialize_tpu_system();
  TPUStrategy strategy(two_cores_per_replica(topology));
  EXPECT_EQ(strategy.num_replicas_in_sync(), 4);
  EXPECT_EQ(strategy.num_logical_devices_per_replica(), 2);
  // Replicas take the chips in ring order (0,0) (1,0) (1,1) (0,1); chip (x, y)
  // holds CPU devices 2 * (x + 2 * y) and that + 1.
  const std::vector<std::vector<int>> expected = {{0, 1}, {2, 3}, {6, 7}, {4, 5}};
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(strategy.logical_devices(r).size(), 2u);
    EXPECT_EQ(strategy.logical_devices(r)[0]->name(), cpu(expected[r][0])) << "replica " << r;
    EXPECT_EQ(strategy.logical_devices(r)[1]->name(), cpu(expected[r][1])) << "replica " << r;
  }
  EXPECT_EQ(strategy.extended().worker_devices(),
            (std::vector<std::string>{cpu(0), cpu(2), cpu(6), cpu(4)}));
}

TEST_F(TPUStrategyTest, OneReplicaOfEightLogicalDevicesOnA1x2x2x2MeshSplitsImages) {
  // The seed example: 8 logical devices x 1 replica, computation_shape [1, 2, 2, 2].
  ::setenv("STRATA_TPU_TOPOLOGY", "1x2x2x2", 1);
  tpu::Topology topology = tpu::initialize_tpu_system();
  ::unsetenv("STRATA_TPU_TOPOLOGY");
  TPUStrategy strategy(tpu::DeviceAssignment::build(topology, {.computation_shape = {1, 2, 2, 2}}));
  EXPECT_EQ(strategy.num_replicas_in_sync(), 1);
  EXPECT_EQ(strategy.num_logical_devices_per_replica(), 8);
  // Logical core k on the k / 2-th chip of the (y, z) ring (0,0) (1,0) (1,1) (0,1);
  // ordinal c + 2 * (y + 2 * z).
  const std::vector<int> expected = {0, 1, 2, 3, 6, 7, 4, 5};
  for (int k = 0; k < 8; ++k) EXPECT_EQ(strategy.logical_devices(0)[k]->name(), cpu(expected[k]));
  std::vector<float> pixels(2 * 4 * 8 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i);
  Tensor images = constant(pixels, {2, 4, 8, 3});
  PerReplica<Tensor> out = strategy.run([&] {
    Tensor split = strategy.experimental_split_to_logical_devices(images, {1, 2, 4, 1});
    EXPECT_EQ(tpu::sharding_of(split)->tile_index(6), (std::vector<int64_t>{0, 1, 2, 0}));
    EXPECT_EQ(strategy.experimental_assign_to_logical_device(images, 7).device(), cpu(5));
    return split;
  });
  EXPECT_EQ(out.values()[0].to_vector<float>(), pixels);
  EXPECT_EQ(tpu::sharding_of(out.values()[0])->to_string(), "{devices=[1,2,4,1]0,1,2,3,4,5,6,7}");
}

TEST_F(TPUStrategyTest, AnAssignmentOverAnotherTopologyIsInvalid) {
  tpu::initialize_tpu_system();
  tpu::Topology other = tpu::local_topology("1x2x2x2", 8);
  expect_error_containing(
      [&] { TPUStrategy strategy(two_cores_per_replica(other)); }, ErrorCode::INVALID_ARGUMENT,
      "expected a device assignment over the initialized TPU system's topology");
}

TEST_F(TPUStrategyTest, RunExecutesEachReplicaOnItsLogicalDeviceZeroWithItsReplicaId) {
  tpu::Topology topology = tpu::initialize_tpu_system();
  TPUStrategy strategy(two_cores_per_replica(topology));
  PerReplica<std::string> devices =
      strategy.run([] { return constant(1.f).device(); }, std::tuple{},
                   RunOptions{.experimental_enable_dynamic_batch_size = false});
  PerReplica<int> ids =
      strategy.run([] { return get_replica_context()->replica_id_in_sync_group(); });
  PerReplica<std::thread::id> threads = strategy.run([] { return std::this_thread::get_id(); });
  EXPECT_EQ(devices.values(), (std::vector<std::string>{cpu(0), cpu(2), cpu(6), cpu(4)}));
  EXPECT_EQ(ids.values(), (std::vector<int>{0, 1, 2, 3}));
  for (const std::thread::id& id : threads.values()) EXPECT_NE(id, std::this_thread::get_id());
}

TEST_F(TPUStrategyTest, AssignToLogicalDevicePlacesTheValueAndAnnotatesMaximal) {
  tpu::Topology topology = tpu::initialize_tpu_system();
  TPUStrategy strategy(two_cores_per_replica(topology));
  PerReplica<Tensor> out = strategy.run([&] {
    Tensor t = strategy.experimental_assign_to_logical_device(constant({1.f, 2.f}), 1);
    return t;
  });
  const std::vector<int> logical_one = {1, 3, 7, 5};
  for (int r = 0; r < 4; ++r) {
    const Tensor& t = out.values()[r];
    EXPECT_EQ(t.device(), cpu(logical_one[r])) << "replica " << r;
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.f, 2.f}));
    ASSERT_NE(tpu::sharding_of(t), nullptr);
    EXPECT_EQ(*tpu::sharding_of(t), tpu::Sharding::maximal(1, 2));
  }
}

TEST_F(TPUStrategyTest, GradientsFlowThroughTheLogicalDeviceAnnotations) {
  tpu::Topology topology = tpu::initialize_tpu_system();
  TPUStrategy strategy(two_cores_per_replica(topology));
  PerReplica<Tensor> grads = strategy.run([&] {
    Tensor x = constant({1.f, 2.f, 3.f, 4.f}, {2, 2});
    GradientTape tape;
    tape.watch(x);
    Tensor y = multiply(strategy.experimental_assign_to_logical_device(x, 1), constant(3.f));
    y = strategy.experimental_replicate_to_logical_devices(y);
    y = strategy.experimental_split_to_logical_devices(y, {2, 1});
    return tape.gradient(reduce_sum(y), x);
  });
  for (const Tensor& g : grads.values()) {
    ASSERT_TRUE(g.defined());
    EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{3.f, 3.f, 3.f, 3.f}));
  }
}

TEST_F(TPUStrategyTest, AssignToALogicalDeviceOutOfRangeIsInvalid) {
  tpu::Topology topology = tpu::initialize_tpu_system();
  TPUStrategy strategy(two_cores_per_replica(topology));
  for (int bad : {2, -1}) {
    expect_error_containing(
        [&] {
          strategy.run([&] { strategy.experimental_assign_to_logical_device(constant(1.f), bad); });
        },
        ErrorCode::INVALID_ARGUMENT,
        "`logical_core_id` to assign must be lower then total number of logical devices per "
        "replica. Received logical device id " +
            std::to_string(bad) + " but there are only total of 2 logical devices in replica.");
  }
}

TEST_F(TPUStrategyTest, AssignToLogicalDeviceIsForbiddenInSpmdMode) {
  tpu::Topology topology = tpu::initialize_tpu_system();
  TPUStrategy strategy(two_cores_per_replica(topology),
                       /*experimental_spmd_xla_partitioning=*/true);
  expect_error_containing(
      [&] {
        strategy.run([&] { strategy.experimental_assign_to_logical_device(constant(1.f), 0); });
      },
      ErrorCode::INVALID_ARGUMENT, "Cannot assign a tensor to a logical device in SPMD mode");
}

TEST_F(TPUStrategyTest, ReplicateToLogicalDevicesAnnotatesReplicatedAndKeepsTheValue) {
  tpu::Topology topology = tpu::initialize_tpu_system();
  TPUStrategy strategy(two_cores_per_replica(topology));
  PerReplica<Tensor> out = strategy.run([&] {
    return strategy.experimental_replicate_to_logical_devices(constant({3.f, 4.f}));
  });
  for (int r = 0; r < 4; ++r) {
    const Tensor& t = out.values()[r];
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{3.f, 4.f}));
    ASSERT_NE(tpu::sharding_of(t), nullptr);
    EXPECT_EQ(*tpu::sharding_of(t), tpu::Sharding::replicated(2));
  }
}

TEST_F(TPUStrategyTest, SplitToLogicalDevicesAnnotatesTheTiledSharding) {
  tpu::Topology topology = tpu::initialize_tpu_system();
  TPUStrategy strategy(two_cores_per_replica(topology));
  PerReplica<Tensor> out = strategy.run([&] {
    Tensor x = strategy.experimental_split_to_logical_devices(
        constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f}, {2, 4}), {1, 2});
    return x;
  });
  for (int r = 0; r < 4; ++r) {
    const Tensor& t = out.values()[r];
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f}));
    ASSERT_NE(tpu::sharding_of(t), nullptr);
    EXPECT_TRUE(tpu::sharding_of(t)->is_tiled());
    EXPECT_EQ(tpu::sharding_of(t)->partition_dimensions(), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(tpu::sharding_of(t)->to_string(), "{devices=[1,2]0,1}");
  }
}

TEST_F(TPUStrategyTest, SplitToLogicalDevicesValidatesRankDivisibilityAndProduct) {
  tpu::Topology topology = tpu::initialize_tpu_system();
  TPUStrategy strategy(two_cores_per_replica(topology));
  Tensor x = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  auto split = [&](std::vector<int64_t> dims) {
    strategy.run([&] { strategy.experimental_split_to_logical_devices(x, dims); });
  };
  expect_error_containing([&] { split({2}); }, ErrorCode::INVALID_ARGUMENT,
                          "Length of `partition_dimensions` must equal to the rank of "
                          "`tensor.shape`");
  expect_error_containing(
      [&] {
        split({1, 2});
      },
      ErrorCode::INVALID_ARGUMENT, "must be divisible by corresponding value");
  expect_error_containing(
      [&] {
        split({1, 1});
      },
      ErrorCode::INVALID_ARGUMENT,
      "The product of `partition_dimensions` should be the same as the "
      "number of logical devices");
}

TEST_F(TPUStrategyTest, LogicalDeviceApisOutsideAReplicaOfThisStrategyAreFailedPreconditions) {
  tpu::Topology topology = tpu::initialize_tpu_system();
  TPUStrategy strategy(two_cores_per_replica(topology));
  TPUStrategy other(two_cores_per_replica(topology));
  MirroredStrategy mirrored({"CPU:0", "CPU:1"});
  Tensor x = constant({1.f, 2.f});
  const std::string expected = "expected to be called in a replica context of this TPUStrategy";
  auto all_three = [&] {
    return std::vector<std::function<void()>>{
        [&] { strategy.experimental_assign_to_logical_device(x, 0); },
        [&] { strategy.experimental_replicate_to_logical_devices(x); },
        [&] { strategy.experimental_split_to_logical_devices(x, {2}); }};
  };
  for (const auto& call : all_three()) {
    // The default replica context (outside every scope).
    expect_error_containing(call, ErrorCode::FAILED_PRECONDITION, expected);
    // Cross-replica context of this strategy.
    {
      auto scope = strategy.scope();
      expect_error_containing(call, ErrorCode::FAILED_PRECONDITION, "got a cross-replica context");
    }
    // A replica of another TPUStrategy and of a MirroredStrategy.
    expect_error_containing([&] { other.run(call); }, ErrorCode::FAILED_PRECONDITION,
                            "got the replica context of another strategy");
    expect_error_containing([&] { mirrored.run(call); }, ErrorCode::FAILED_PRECONDITION, expected);
  }
}

// sharded::shard(strategy, t): the calling replica's logical devices, by the
// tensor's annotation (an unannotated tensor stays maximal on device 0).
TEST_F(TPUStrategyTest, ShardOfAnAnnotatedTensorUsesTheReplicasLogicalDevices) {
  namespace sh = strata::tpu::sharded;
  tpu::Topology topology = tpu::initialize_tpu_system();
  TPUStrategy strategy(two_cores_per_replica(topology));
  Tensor images = random::normal({2, 8, 8, 3}, {.seed = 51});
  PerReplica<std::vector<std::string>> placed = strategy.run([&] {
    sh::ShardedTensor s =
        sh::shard(strategy, strategy.experimental_split_to_logical_devices(images, {1, 2, 1, 1}));
    sh::ShardedTensor unannotated = sh::shard(strategy, images);
    EXPECT_TRUE(unannotated.sharding().is_maximal());
    return std::vector<std::string>{s.shard(0).device(), s.shard(1).device()};
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(placed.values()[static_cast<size_t>(r)][0], strategy.logical_devices(r)[0]->name());
    EXPECT_EQ(placed.values()[static_cast<size_t>(r)][1], strategy.logical_devices(r)[1]->name());
  }
  EXPECT_THROW(sh::shard(strategy, images), FailedPreconditionError);
}

// The seed page's set-up, statement by statement:
//   resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu='')
//   tf.config.experimental_connect_to_cluster(resolver)
//   topology = tf.tpu.experimental.initialize_tpu_system(resolver)
//   device_assignment = tf.tpu.experimental.DeviceAssignment.build(
//       topology, computation_shape=[1, 1, 1, 2], num_replicas=4)
//   strategy = tf.distribute.TPUStrategy(
//       resolver, experimental_device_assignment=device_assignment)
//   strategy.cluster_resolver is resolver
//   tf.tpu.experimental.shutdown_tpu_system(resolver)
TEST_F(TPUStrategyTest, TheSeedsFrontDoorReadsAsThePage) {
  ::unsetenv("TF_CONFIG");
  namespace cr = cluster_resolver;
  cr::TPUClusterResolver resolver("");
  config::experimental_connect_to_cluster(resolver);
  EXPECT_TRUE(config::is_connected_to_cluster());
  tpu::Topology topology = tpu::initialize_tpu_system(resolver);
  EXPECT_EQ(topology.mesh_shape(), (std::vector<int>{2, 2, 1, 2}));
  tpu::DeviceAssignment device_assignment = tpu::DeviceAssignment::build(
      topology, {.computation_shape = {1, 1, 1, 2}, .num_replicas = 4});
  TPUStrategy strategy(resolver, device_assignment);
  EXPECT_EQ(strategy.num_replicas_in_sync(), 4);
  EXPECT_EQ(strategy.num_logical_devices_per_replica(), 2);
  EXPECT_EQ(strategy.cluster_resolver(), &resolver);
  EXPECT_EQ(strategy.cluster_resolver()->master(), "");

  // tf.distribute.TPUStrategy(resolver): every core a replica.
  TPUStrategy all(resolver);
  EXPECT_EQ(all.num_replicas_in_sync(), 8);
  EXPECT_EQ(all.cluster_resolver(), &resolver);
  // A pointer or a shared resolver reads the same.
  TPUStrategy by_pointer(&resolver, device_assignment);
  EXPECT_EQ(by_pointer.cluster_resolver(), &resolver);
  auto shared = std::make_shared<cr::TPUClusterResolver>("local");
  TPUStrategy by_shared(shared);
  EXPECT_EQ(by_shared.cluster_resolver(), shared.get());
  // tf.distribute.TPUStrategy() makes its own local resolver.
  TPUStrategy own;
  ASSERT_NE(own.cluster_resolver(), nullptr);
  EXPECT_EQ(dynamic_cast<const cr::TPUClusterResolver&>(*own.cluster_resolver()).tpu(), "local");

  tpu::shutdown_tpu_system(resolver);
  EXPECT_FALSE(tpu::is_tpu_system_initialized());
  expect_error_containing([&] { strategy.run([] { return 1; }); }, ErrorCode::FAILED_PRECONDITION,
                          "has not been initialized");
}

TEST_F(TPUStrategyTest, AResolverOfAPodIsUnimplemented) {
  namespace cr = cluster_resolver;
  cr::TPUClusterResolver pod("10.0.0.1:8470,10.0.0.2:8470");
  expect_error_containing([&] { config::experimental_connect_to_cluster(pod); },
                          ErrorCode::UNIMPLEMENTED, "10.0.0.1:8470,10.0.0.2:8470");
  expect_error_containing([&] { tpu::initialize_tpu_system(pod); }, ErrorCode::UNIMPLEMENTED,
                          "multi-host TPU pods are not supported yet");
  EXPECT_FALSE(tpu::is_tpu_system_initialized());
  tpu::initialize_tpu_system();
  expect_error_containing([&] { TPUStrategy strategy(pod); }, ErrorCode::UNIMPLEMENTED,
                          "multi-host TPU pods are not supported yet");
  // A cluster of remote tasks would need remote eager execution.
  cr::SimpleClusterResolver remote(train::ClusterSpec({{"worker", {"10.0.0.1:2222"}}}));
  expect_error_containing([&] { config::experimental_connect_to_cluster(remote); },
                          ErrorCode::UNIMPLEMENTED, "remote eager execution");
  cr::SimpleClusterResolver local{train::ClusterSpec()};
  config::experimental_connect_to_cluster(local);
}

// with strategy.extended.experimental_logical_device(1):
//   v = tf.Variable(...)        # in strategy.scope(): each replica's copy on its logical device 1
//   y = tf.add(x, x)            # inside strategy.run: on the replica's logical device 1
TEST_F(TPUStrategyTest, ExperimentalLogicalDevicePlacesVariablesAndOps) {
  tpu::Topology topology = tpu::initialize_tpu_system();
  TPUStrategy strategy(two_cores_per_replica(topology));
  // Replica r spans logical devices {CPU:0, CPU:1}, {CPU:2, CPU:3}, {CPU:6, CPU:7}, {CPU:4, CPU:5}.
  Variable on_one;
  Variable on_zero;
  {
    auto scope = strategy.scope();
    {
      auto logical = strategy.extended().experimental_logical_device(1);
      on_one = Variable(constant(1.f));
    }
    on_zero = Variable(constant(2.f));
  }
  std::vector<std::string> one_devices;
  std::vector<std::string> zero_devices;
  for (const Variable& c : distributed_components(on_one)) one_devices.push_back(c.device());
  for (const Variable& c : distributed_components(on_zero)) zero_devices.push_back(c.device());
  EXPECT_EQ(one_devices, (std::vector<std::string>{cpu(1), cpu(3), cpu(7), cpu(5)}));
  EXPECT_EQ(zero_devices, (std::vector<std::string>{cpu(0), cpu(2), cpu(6), cpu(4)}));

  PerReplica<std::string> placed = strategy.run([&] {
    Tensor x = constant(3.f);
    auto logical = strategy.extended().experimental_logical_device(1);
    return add(x, x).device();
  });
  EXPECT_EQ(placed.values(), (std::vector<std::string>{cpu(1), cpu(3), cpu(7), cpu(5)}));

  expect_error_containing([&] { auto s = strategy.extended().experimental_logical_device(2); },
                          ErrorCode::INVALID_ARGUMENT,
                          "`logical_device_id` not in range (was 2, but there are only 2 logical "
                          "devices per replica).");
  EXPECT_TRUE(strategy.extended().experimental_require_static_shapes());
}

// From TensorFlow's "Use TPUs" guide:
//   tf.config.list_logical_devices('TPU')     # the TPU system's cores
//   a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
//   b = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
//   with tf.device('/TPU:0'):
//     c = tf.matmul(a, b)
//   print("c device: ", c.device)             # .../device:TPU:0
//   print(c)                                  # [[22. 28.] [49. 64.]]
TEST_F(TPUStrategyTest, TheInitializedSystemsCoresAreTPUDevices) {
  EXPECT_TRUE(config::list_logical_devices("TPU").empty());
  tpu::initialize_tpu_system();
  const std::vector<config::LogicalDevice> tpus = config::list_logical_devices("TPU");
  ASSERT_EQ(tpus.size(), 8u);
  for (size_t k = 0; k < tpus.size(); ++k) {
    EXPECT_EQ(tpus[k].name, "/job:localhost/replica:0/task:0/device:TPU:" + std::to_string(k));
    EXPECT_EQ(tpus[k].device_type, "TPU");
  }
  EXPECT_EQ(config::list_logical_devices("CPU").size(), 8u);
  EXPECT_EQ(config::list_logical_devices().size(), 16u);
  EXPECT_EQ(local_devices().size(), 8u);  // replicas still run on the CPU devices

  Tensor a = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  Tensor b = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {3, 2});
  Tensor c;
  {
    auto scope = strata::device("/TPU:0");
    c = matmul(a, b);
  }
  EXPECT_EQ(c.device(), "/job:localhost/replica:0/task:0/device:TPU:0");
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{22.f, 28.f, 49.f, 64.f}));
  // TPU ordinal k runs on the CPU device that backs it.
  EXPECT_EQ(find_device("/TPU:3").backing_device().name(), cpu(3));

  tpu::shutdown_tpu_system();
  EXPECT_TRUE(config::list_logical_devices("TPU").empty());
  expect_error_containing([] { (void)find_device("/TPU:0"); }, ErrorCode::NOT_FOUND, "TPU:0");
}

}  // namespace
}  // namespace strata::distribute
