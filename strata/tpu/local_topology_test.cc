#include "strata/tpu/local_topology.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/testing/logical_devices.h"
#include "strata/tpu/internal/test_util.h"

namespace strata::tpu::experimental {
namespace {

using ::strata::tpu::testing::message_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(LocalTopology, DefaultMeshShapeFollowsTheDocumentedRule) {
  // Even N: chips of 2 cores in a flat, most-square block; odd N: 1-core chips.
  EXPECT_THAT(default_mesh_shape(1), ElementsAre(1, 1, 1, 1));
  EXPECT_THAT(default_mesh_shape(2), ElementsAre(1, 1, 1, 2));
  EXPECT_THAT(default_mesh_shape(3), ElementsAre(3, 1, 1, 1));
  EXPECT_THAT(default_mesh_shape(4), ElementsAre(2, 1, 1, 2));
  EXPECT_THAT(default_mesh_shape(6), ElementsAre(3, 1, 1, 2));
  EXPECT_THAT(default_mesh_shape(8), ElementsAre(2, 2, 1, 2));  // TPU v3-8
  EXPECT_THAT(default_mesh_shape(9), ElementsAre(3, 3, 1, 1));
  EXPECT_THAT(default_mesh_shape(16), ElementsAre(4, 2, 1, 2));
  EXPECT_THAT(default_mesh_shape(32), ElementsAre(4, 4, 1, 2));  // TPU v3-32
}

TEST(LocalTopology, DefaultMeshShapeGridsTheTasksBlocks) {
  // 4 hosts of 8 cores: 2x2-chip blocks in a 2x2 grid.
  EXPECT_THAT(default_mesh_shape(8, 4), ElementsAre(4, 4, 1, 2));
  EXPECT_THAT(default_mesh_shape(8, 2), ElementsAre(4, 2, 1, 2));
  EXPECT_THAT(default_mesh_shape(3, 2), ElementsAre(6, 1, 1, 1));
  EXPECT_THAT(message_of<InvalidArgumentError>([] { default_mesh_shape(0); }),
              HasSubstr("expected num_local_devices >= 1, got 0"));
  EXPECT_THAT(message_of<InvalidArgumentError>([] { default_mesh_shape(2, 0); }),
              HasSubstr("expected num_tasks >= 1, got 0"));
}

TEST(LocalTopology, EightDevicesMakeTheV3_8MeshWithCoreFastestOrdinals) {
  Topology t = local_topology("", 8);
  EXPECT_THAT(t.mesh_shape(), ElementsAre(2, 2, 1, 2));
  EXPECT_EQ(t.num_tasks(), 1);
  EXPECT_EQ(t.num_tpus_per_task(), 8);
  EXPECT_THAT(t.device_coordinates()[0],
              ElementsAre(Coordinates{0, 0, 0, 0}, Coordinates{0, 0, 0, 1}, Coordinates{1, 0, 0, 0},
                          Coordinates{1, 0, 0, 1}, Coordinates{0, 1, 0, 0}, Coordinates{0, 1, 0, 1},
                          Coordinates{1, 1, 0, 0}, Coordinates{1, 1, 0, 1}));
  EXPECT_TRUE(t.missing_devices().empty());
}

TEST(LocalTopology, SpecSetsTheMeshShape) {
  Topology t = local_topology("1x2x2x2", 8);
  EXPECT_THAT(t.mesh_shape(), ElementsAre(1, 2, 2, 2));
  // Ordinals: core fastest, then x, y, z: (0,1,1,1) = 1 + 2 * (0 + 1 * (1 + 2 * 1)) = 7.
  EXPECT_EQ(t.tpu_device_ordinal_at_coordinates({0, 1, 1, 1}), 7);
  EXPECT_EQ(t.tpu_device_ordinal_at_coordinates({0, 0, 1, 0}), 4);
}

TEST(LocalTopology, SpecNeedingFewerCoresUsesTheFirstDevices) {
  Topology t = local_topology("1x1x1x2", 8);
  EXPECT_EQ(t.num_tpus_per_task(), 2);
  EXPECT_EQ(backing_device_at_coordinates(t, {0, 0, 0, 1}), (BackingDevice{0, 1}));
}

TEST(LocalTopology, TooFewDevicesForTheSpecIsAnErrorNamingBothNumbers) {
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] { local_topology("2x2x1x2", 4); }),
      HasSubstr(
          "the mesh [2, 2, 1, 2] (STRATA_TPU_TOPOLOGY=2x2x1x2) needs 8 cores, 8 per task over "
          "1 task; expected at least 8 local devices per task, got 4"));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] { local_topology("4x4x1x2", 8, 2); }),
      HasSubstr(
          "needs 32 cores, 16 per task over 2 tasks; expected at least 16 local devices per task, "
          "got 8"));
}

TEST(LocalTopology, MalformedSpecsAreRejectedQuotingTheValue) {
  for (const char* bad : {"2x2", "2x2x1x2x1", "2x0x1x2", "axbxcxd", "2X2x1x2", " 2x2x1x2", "2x2x1x",
                          "x2x1x2", "2x2x1x2 ", "-2x2x1x2", "99999999x1x1x1", "1024x1024x2x1"}) {
    EXPECT_THAT(message_of<InvalidArgumentError>([&] { local_topology(bad, 8); }),
                HasSubstr(std::string("STRATA_TPU_TOPOLOGY: expected ")))
        << bad;
    EXPECT_THAT(message_of<InvalidArgumentError>([&] { parse_mesh_shape(bad); }),
                HasSubstr(std::string("got \"") + bad + "\""))
        << bad;
  }
  EXPECT_THAT(parse_mesh_shape("16x8x4x2"), ElementsAre(16, 8, 4, 2));
}

TEST(LocalTopology, TasksOwnSquareChipBlocksNumberedXFirst) {
  // 4 tasks of 8 devices: mesh 4x4x1x2; each task owns a 2x2-chip block.
  Topology t = local_topology("", 8, 4);
  EXPECT_THAT(t.mesh_shape(), ElementsAre(4, 4, 1, 2));
  EXPECT_EQ(t.num_tasks(), 4);
  EXPECT_EQ(t.num_tpus_per_task(), 8);
  EXPECT_EQ(t.task_ordinal_at_coordinates({1, 1, 0, 1}), 0);
  EXPECT_EQ(t.task_ordinal_at_coordinates({2, 0, 0, 0}), 1);
  EXPECT_EQ(t.task_ordinal_at_coordinates({0, 2, 0, 0}), 2);
  EXPECT_EQ(t.task_ordinal_at_coordinates({3, 3, 0, 1}), 3);
  // Inside task 3's block (x 2-3, y 2-3): (3,3,0,1) = 1 + 2 * (1 + 2 * 1) = 7.
  EXPECT_EQ(t.tpu_device_ordinal_at_coordinates({3, 3, 0, 1}), 7);
  EXPECT_EQ(t.tpu_device_name_at_coordinates({2, 2, 0, 1}, "worker"),
            "/job:worker/task:3/device:TPU:1");
  EXPECT_EQ(backing_device_at_coordinates(t, {3, 2, 0, 0}), (BackingDevice{3, 2}));
}

TEST(LocalTopology, TasksOfASpecMeshPreferFlatBlocks) {
  // 2x2x2x1 over 2 tasks: each takes a z plane (2x2x1) rather than a 2x1x2 box.
  Topology t = local_topology("2x2x2x1", 4, 2);
  for (int x = 0; x < 2; ++x) {
    for (int y = 0; y < 2; ++y) {
      EXPECT_EQ(t.task_ordinal_at_coordinates({x, y, 0, 0}), 0);
      EXPECT_EQ(t.task_ordinal_at_coordinates({x, y, 1, 0}), 1);
    }
  }
}

TEST(LocalTopology, MeshesThatDoNotSplitIntoWholeChipsPerTaskAreRejected) {
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] { local_topology("1x1x1x2", 1, 2); }),
      HasSubstr("to split into 2 tasks of whole chips (2 cores each), got 2 cores for 2 tasks"));
  EXPECT_THAT(message_of<InvalidArgumentError>([] { local_topology("3x1x1x1", 2, 2); }),
              HasSubstr("got 3 cores for 2 tasks"));
  // Whole chips per task always tile the mesh (each prime factor of a task's chip
  // count fits in some dimension), e.g. 1-chip blocks here.
  EXPECT_NO_THROW(local_topology("2x2x1x1", 1, 4));
  EXPECT_THAT(message_of<InvalidArgumentError>([] { local_topology("", 0); }),
              HasSubstr("expected num_local_devices >= 1, got 0"));
  EXPECT_THAT(message_of<InvalidArgumentError>([] { local_topology("", 2, 0); }),
              HasSubstr("expected num_tasks >= 1, got 0"));
}

TEST(LocalTopology, BackingDeviceOfAMissingCoreIsNotFound) {
  Topology t({2, 1, 1, 1}, {{{1, 0, 0, 0}}});
  EXPECT_EQ(backing_device_at_coordinates(t, {1, 0, 0, 0}), (BackingDevice{0, 0}));
  EXPECT_THROW(backing_device_at_coordinates(t, {0, 0, 0, 0}), NotFoundError);
  EXPECT_THROW(backing_device_at_coordinates(t, {2, 0, 0, 0}), InvalidArgumentError);
}

class LocalTopologyFromEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("STRATA_TPU_TOPOLOGY");
    saved_ = old ? std::optional<std::string>(old) : std::nullopt;
    strata::testing::use_logical_cpus(4);
  }
  void TearDown() override {
    if (saved_) {
      setenv("STRATA_TPU_TOPOLOGY", saved_->c_str(), 1);
    } else {
      unsetenv("STRATA_TPU_TOPOLOGY");
    }
    internal::reset_runtime_for_testing();
  }
  std::optional<std::string> saved_;
};

TEST_F(LocalTopologyFromEnvironment, UsesTheLogicalCpuDevicesWhenTheVariableIsUnset) {
  unsetenv("STRATA_TPU_TOPOLOGY");
  EXPECT_THAT(local_topology_from_environment().mesh_shape(), ElementsAre(2, 1, 1, 2));
}

TEST_F(LocalTopologyFromEnvironment, UsesTheVariableWhenSet) {
  setenv("STRATA_TPU_TOPOLOGY", "1x1x2x2", 1);
  EXPECT_THAT(local_topology_from_environment().mesh_shape(), ElementsAre(1, 1, 2, 2));
  setenv("STRATA_TPU_TOPOLOGY", "2x2x1x2", 1);
  EXPECT_THAT(message_of<InvalidArgumentError>([] { local_topology_from_environment(); }),
              HasSubstr("got 4"));
  setenv("STRATA_TPU_TOPOLOGY", "2by2", 1);
  EXPECT_THAT(message_of<InvalidArgumentError>([] { local_topology_from_environment(); }),
              HasSubstr("got \"2by2\""));
}

}  // namespace
}  // namespace strata::tpu::experimental
