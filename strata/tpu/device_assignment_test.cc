#include "strata/tpu/device_assignment.h"

#include <array>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/tpu/internal/test_util.h"
#include "strata/tpu/local_topology.h"

// Expected placements are worked out by hand from TensorFlow's algorithm (the
// comments show the arithmetic); the larger ones were re-derived with the
// independent Python model in testdata/device_assignment_reference.py.

namespace strata::tpu::experimental {
namespace {

using ::strata::tpu::testing::message_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Assignment = std::vector<std::vector<Coordinates>>;

// A full single-task topology of `mesh`, ordinals core fastest, then x, y, z.
Topology full(std::vector<int> mesh) {
  std::vector<std::vector<int>> devices;
  for (int z = 0; z < mesh[2]; ++z)
    for (int y = 0; y < mesh[1]; ++y)
      for (int x = 0; x < mesh[0]; ++x)
        for (int c = 0; c < mesh[3]; ++c) devices.push_back({x, y, z, c});
  return Topology(mesh, {devices});
}

TEST(DeviceAssignment, SeedExampleFourReplicasOfTwoCoresTakeOneChipEachInRingOrder) {
  // 2x2x1x2 (8 cores), computation_shape [1,1,1,2], 4 replicas: replica_counts
  // (2,2,1,1), max 4 = num_replicas and the block uses both cores of its chip,
  // so TF's ring tiling applies; the outer ring over the 2x2 chips is
  // (0,0) (1,0) (1,1) (0,1).
  auto da = DeviceAssignment::build(full({2, 2, 1, 2}),
                                    {.computation_shape = {1, 1, 1, 2}, .num_replicas = 4});
  EXPECT_EQ(da.num_replicas(), 4);
  EXPECT_EQ(da.num_cores_per_replica(), 2);
  EXPECT_EQ(da.core_assignment(), (Assignment{{{0, 0, 0, 0}, {0, 0, 0, 1}},
                                              {{1, 0, 0, 0}, {1, 0, 0, 1}},
                                              {{1, 1, 0, 0}, {1, 1, 0, 1}},
                                              {{0, 1, 0, 0}, {0, 1, 0, 1}}}));
  EXPECT_EQ(da.coordinates(2, 1), (Coordinates{1, 1, 0, 1}));
  // Ordinals of full(): c + 2 * (x + 2 * y).
  EXPECT_EQ(da.tpu_ordinal(2, 1), 7);
  EXPECT_EQ(da.tpu_ordinal(3, 0), 4);
  EXPECT_EQ(da.tpu_device(2, 1, "worker"), "/job:worker/task:0/device:TPU:7");
  EXPECT_EQ(da.tpu_device(1, 0), "/task:0/device:TPU:2");
  EXPECT_EQ(da.host_device(3, 1, "worker"), "/job:worker/task:0/device:CPU:0");
  EXPECT_EQ(da.host_device(), "/task:0/device:CPU:0");
  EXPECT_THAT(da.lookup_replicas(0, 1), ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(da.topology(), full({2, 2, 1, 2}));
}

TEST(DeviceAssignment, SeedExampleOneReplicaOfTwoCoresUsesChipZero) {
  // max 4 > 1 replica: no ring; replica grid (1,1,1,1), offset 0.
  auto da = DeviceAssignment::build(full({2, 2, 1, 2}), {.computation_shape = {1, 1, 1, 2}});
  EXPECT_EQ(da.core_assignment(), (Assignment{{{0, 0, 0, 0}, {0, 0, 0, 1}}}));
}

TEST(DeviceAssignment, SeedExampleEightLogicalDevicesOnA1x2x2x2Mesh) {
  // computation_shape [1,2,2,2] fills the whole 1x2x2x2 mesh: 1 replica = max,
  // ring tiling; the inner ring over the (y, z) chips is (0,0) (1,0) (1,1) (0,1),
  // and logical core k sits on chip k / 2, core k % 2.
  auto da = DeviceAssignment::build(full({1, 2, 2, 2}), {.computation_shape = {1, 2, 2, 2}});
  EXPECT_EQ(da.num_replicas(), 1);
  EXPECT_EQ(da.num_cores_per_replica(), 8);
  EXPECT_EQ(da.core_assignment(), (Assignment{{{0, 0, 0, 0},
                                               {0, 0, 0, 1},
                                               {0, 1, 0, 0},
                                               {0, 1, 0, 1},
                                               {0, 1, 1, 0},
                                               {0, 1, 1, 1},
                                               {0, 0, 1, 0},
                                               {0, 0, 1, 1}}}));
}

TEST(DeviceAssignment, EightSingleCoreReplicasPutBothCoresOfAChipSideBySide) {
  // spec §8.3: replica_counts (2,2,1,2); visit order z, core, x, y gives the
  // replica grid (2,2,1,2); not a ring (core dim 1 != 2); r in mixed radix with
  // the core digit first.
  auto da = DeviceAssignment::build(full({2, 2, 1, 2}), {.num_replicas = 8});
  EXPECT_EQ(da.core_assignment(), (Assignment{{{0, 0, 0, 0}},
                                              {{0, 0, 0, 1}},
                                              {{1, 0, 0, 0}},
                                              {{1, 0, 0, 1}},
                                              {{0, 1, 0, 0}},
                                              {{0, 1, 0, 1}},
                                              {{1, 1, 0, 0}},
                                              {{1, 1, 0, 1}}}));
}

TEST(DeviceAssignment, PartialReplicationUsesTheMixedRadixOrder) {
  // 2 replicas of [1,1,1,2] on 2x2x1x2: replica grid: core 1, z 1, x 2, y 1.
  auto da = DeviceAssignment::build(full({2, 2, 1, 2}),
                                    {.computation_shape = {1, 1, 1, 2}, .num_replicas = 2});
  EXPECT_EQ(da.core_assignment(),
            (Assignment{{{0, 0, 0, 0}, {0, 0, 0, 1}}, {{1, 0, 0, 0}, {1, 0, 0, 1}}}));
}

TEST(DeviceAssignment, MeshOrderModeDisablesTheRing) {
  // Same as the seed example but MESH: replica grid (2,2,1,1), r = x + 2 y.
  auto da =
      DeviceAssignment::build(full({2, 2, 1, 2}), {.computation_shape = {1, 1, 1, 2},
                                                   .num_replicas = 4,
                                                   .device_order_mode = DeviceOrderMode::MESH});
  EXPECT_EQ(da.core_assignment(), (Assignment{{{0, 0, 0, 0}, {0, 0, 0, 1}},
                                              {{1, 0, 0, 0}, {1, 0, 0, 1}},
                                              {{0, 1, 0, 0}, {0, 1, 0, 1}},
                                              {{1, 1, 0, 0}, {1, 1, 0, 1}}}));
}

TEST(DeviceAssignment, RingOrderModeWhereTheTilingAppliesEqualsAuto) {
  const Topology t = full({2, 2, 1, 2});
  auto ring = DeviceAssignment::build(t, {.computation_shape = {1, 1, 1, 2},
                                          .num_replicas = 4,
                                          .device_order_mode = DeviceOrderMode::RING});
  auto aut = DeviceAssignment::build(t, {.computation_shape = {1, 1, 1, 2}, .num_replicas = 4});
  EXPECT_EQ(ring.core_assignment(), aut.core_assignment());
  EXPECT_EQ(ring.coordinates(2, 0), (Coordinates{1, 1, 0, 0}));
}

TEST(DeviceAssignment, RingOrderModeWhereTheTilingDoesNotApplyIsAnError) {
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        DeviceAssignment::build(full({2, 2, 1, 2}),
                                {.num_replicas = 8, .device_order_mode = DeviceOrderMode::RING});
      }),
      HasSubstr("device_order_mode=DeviceOrderMode.RING is not compatible with the 3D tiling"));
}

TEST(DeviceAssignment, SingleCoreChipsFormASnakeRing) {
  // 4x2x1x1: cores_per_chip 1, so single-core replicas are whole-chip blocks;
  // full replication -> ring_3d(4, 2, 1): (0,0) then the open ring
  // (1,0) (2,0) (3,0) (3,1) (2,1) (1,1) then back up column 0: (0,1).
  auto da = DeviceAssignment::build(full({4, 2, 1, 1}), {.num_replicas = 8});
  EXPECT_EQ(da.core_assignment(), (Assignment{{{0, 0, 0, 0}},
                                              {{1, 0, 0, 0}},
                                              {{2, 0, 0, 0}},
                                              {{3, 0, 0, 0}},
                                              {{3, 1, 0, 0}},
                                              {{2, 1, 0, 0}},
                                              {{1, 1, 0, 0}},
                                              {{0, 1, 0, 0}}}));
}

TEST(DeviceAssignment, ThreeDimensionalRingAlternatesPlanesAndReturnsDownColumnZero) {
  // ring_3d(2, 2, 2): (0,0,0), z=0 open ring (1,0,0) (1,1,0) (0,1,0), z=1 open
  // ring reversed (0,1,1) (1,1,1) (1,0,1), then (0,0,1).
  auto da = DeviceAssignment::build(full({2, 2, 2, 1}), {.num_replicas = 8});
  EXPECT_EQ(da.core_assignment(), (Assignment{{{0, 0, 0, 0}},
                                              {{1, 0, 0, 0}},
                                              {{1, 1, 0, 0}},
                                              {{0, 1, 0, 0}},
                                              {{0, 1, 1, 0}},
                                              {{1, 1, 1, 0}},
                                              {{1, 0, 1, 0}},
                                              {{0, 0, 1, 0}}}));
}

TEST(DeviceAssignment, SixteenTwoCoreReplicasOnA4x4MeshFollowTheOpenRing) {
  // ring_3d(4, 4, 1) (TF's docstring picture): row 0 left to right, rows 1-2
  // and 3 snaking from x=3 to x=1, back up column 0.
  auto da = DeviceAssignment::build(full({4, 4, 1, 2}),
                                    {.computation_shape = {1, 1, 1, 2}, .num_replicas = 16});
  const std::vector<std::array<int, 2>> chips = {{0, 0}, {1, 0}, {2, 0}, {3, 0}, {3, 1}, {2, 1},
                                                 {1, 1}, {1, 2}, {2, 2}, {3, 2}, {3, 3}, {2, 3},
                                                 {1, 3}, {0, 3}, {0, 2}, {0, 1}};
  ASSERT_EQ(da.num_replicas(), 16);
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(da.coordinates(r, 0), (Coordinates{chips[r][0], chips[r][1], 0, 0}))
        << "replica " << r;
    EXPECT_EQ(da.coordinates(r, 1), (Coordinates{chips[r][0], chips[r][1], 0, 1}))
        << "replica " << r;
  }
}

TEST(DeviceAssignment, MultiChipBlocksUseAnInnerRing) {
  // [2,1,1,2] on 4x2x1x2: replica_counts (2,2,1,1), 4 = max: ring. Outer ring
  // over 2x2 blocks (0,0) (1,0) (1,1) (0,1), block offset = outer * (2, 1, 1);
  // inner ring_3d(2,1,1) = (0,0,0) (1,0,0).
  auto da = DeviceAssignment::build(full({4, 2, 1, 2}),
                                    {.computation_shape = {2, 1, 1, 2}, .num_replicas = 4});
  EXPECT_EQ(da.core_assignment(),
            (Assignment{{{0, 0, 0, 0}, {0, 0, 0, 1}, {1, 0, 0, 0}, {1, 0, 0, 1}},
                        {{2, 0, 0, 0}, {2, 0, 0, 1}, {3, 0, 0, 0}, {3, 0, 0, 1}},
                        {{2, 1, 0, 0}, {2, 1, 0, 1}, {3, 1, 0, 0}, {3, 1, 0, 1}},
                        {{0, 1, 0, 0}, {0, 1, 0, 1}, {1, 1, 0, 0}, {1, 1, 0, 1}}}));
}

TEST(DeviceAssignment, MultiChipBlocksWithoutFullReplicationEnumerateRowMajor) {
  // [1,2,1,2] on 2x2x1x2 with 1 of 2 replicas: mesh path, logical core k =
  // 2 y + c (core fastest).
  auto da = DeviceAssignment::build(full({2, 2, 1, 2}), {.computation_shape = {1, 2, 1, 2}});
  EXPECT_EQ(da.core_assignment(),
            (Assignment{{{0, 0, 0, 0}, {0, 0, 0, 1}, {0, 1, 0, 0}, {0, 1, 0, 1}}}));
}

TEST(DeviceAssignment, StridesInterleaveReplicas) {
  // [1,1,1,1] stride [2,1,1,1] on 2x2x1x2: footprint (2,1,1,1), block_counts
  // (1,2,1,2), replica_counts (2,2,1,2), 4 < 8 replicas -> grid (2,1,1,2).
  // r=2: digits core 0, x 1 -> offset x = (1 / 2) * 2 + 1 % 2 = 1.
  auto da = DeviceAssignment::build(full({2, 2, 1, 2}),
                                    {.computation_stride = {2, 1, 1, 1}, .num_replicas = 4});
  EXPECT_EQ(da.core_assignment(),
            (Assignment{{{0, 0, 0, 0}}, {{0, 0, 0, 1}}, {{1, 0, 0, 0}}, {{1, 0, 0, 1}}}));
}

TEST(DeviceAssignment, StridedBlocksSpreadTheirLogicalCores) {
  // [2,1,1,1] stride [2,1,1,1] on 4x1x1x2: footprint (4,1,1,1), replica_counts
  // (2,1,1,2), 4 replicas = max but the stride forbids the ring. Grid
  // (2,1,1,2): r = core + 2 * x; x offset = (x / 2) * 4 + x % 2; logical cores
  // at x offset + {0, 2}.
  auto da = DeviceAssignment::build(
      full({4, 1, 1, 2}),
      {.computation_shape = {2, 1, 1, 1}, .computation_stride = {2, 1, 1, 1}, .num_replicas = 4});
  EXPECT_EQ(da.core_assignment(), (Assignment{{{0, 0, 0, 0}, {2, 0, 0, 0}},
                                              {{0, 0, 0, 1}, {2, 0, 0, 1}},
                                              {{1, 0, 0, 0}, {3, 0, 0, 0}},
                                              {{1, 0, 0, 1}, {3, 0, 0, 1}}}));
}

TEST(DeviceAssignment, TwoCoreBlocksWithAnXStride) {
  // [1,1,1,2] stride [2,1,1,1] on 4x1x1x2 (reference script case): footprint
  // (2,1,1,2), replica_counts (4,1,1,1); x offsets (x/2)*2 + x%2 = 0,1,2,3.
  auto da = DeviceAssignment::build(
      full({4, 1, 1, 2}),
      {.computation_shape = {1, 1, 1, 2}, .computation_stride = {2, 1, 1, 1}, .num_replicas = 4});
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(da.coordinates(r, 0), (Coordinates{r, 0, 0, 0}));
    EXPECT_EQ(da.coordinates(r, 1), (Coordinates{r, 0, 0, 1}));
  }
}

TEST(DeviceAssignment, MatchesTheReferenceModelOnGeneratedCases) {
  // testdata/device_assignment_cases.txt: 300 seeded random full-mesh cases
  // written by the independent Python model (device_assignment_reference.py
  // --fixture); each line gives the arguments and every replica's cores.
  std::ifstream in(std::string(STRATA_TPU_TESTDATA) + "/device_assignment_cases.txt");
  ASSERT_TRUE(in.good()) << "cannot open " << STRATA_TPU_TESTDATA << "/device_assignment_cases.txt";
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    std::istringstream is(line);
    std::string word;
    std::vector<int> mesh(4), shape(4), stride(4);
    int replicas = 0;
    is >> word;
    for (int& v : mesh) is >> v;
    is >> word;
    for (int& v : shape) is >> v;
    is >> word;
    for (int& v : stride) is >> v;
    is >> word >> replicas >> word;
    ASSERT_EQ(word, ":") << line;
    Assignment expected(1);
    while (is >> word) {
      if (word == "|") {
        expected.emplace_back();
        continue;
      }
      Coordinates c{std::stoi(word), 0, 0, 0};
      is >> c[1] >> c[2] >> c[3];
      expected.back().push_back(c);
    }
    auto da = DeviceAssignment::build(
        full(mesh),
        {.computation_shape = shape, .computation_stride = stride, .num_replicas = replicas});
    EXPECT_EQ(da.core_assignment(), expected) << line;
    ++cases;
  }
  EXPECT_EQ(cases, 300);
}

TEST(DeviceAssignment, ComputationShapeAndStrideMustHaveTheMeshRank) {
  const Topology t = full({2, 2, 1, 2});
  EXPECT_THAT(message_of<InvalidArgumentError>([&] {
                DeviceAssignment::build(t, {.computation_shape = {1, 1, 2}});
              }),
              HasSubstr("computation_shape must have shape [4]; got [3]"));
  EXPECT_THAT(message_of<InvalidArgumentError>([&] {
                DeviceAssignment::build(t, {.computation_stride = {1, 1, 1, 1, 1}});
              }),
              HasSubstr("computation_stride must have shape [4]; got [5]"));
}

TEST(DeviceAssignment, ComputationShapeAndStrideMustBePositive) {
  const Topology t = full({2, 2, 1, 2});
  EXPECT_THAT(message_of<InvalidArgumentError>([&] {
                DeviceAssignment::build(t, {.computation_shape = {1, 0, 1, 2}});
              }),
              HasSubstr("computation_shape must be positive; got computation_shape=[1, 0, 1, 2]"));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([&] {
        DeviceAssignment::build(t, {.computation_stride = {1, 1, -1, 1}});
      }),
      HasSubstr("computation_stride must be positive; got computation_stride=[1, 1, -1, 1]"));
}

TEST(DeviceAssignment, AFootprintLargerThanTheMeshIsRejected) {
  // The seed's [1,2,2,2] needs z = 2; TPU v3-8's 2x2x1x2 has z = 1.
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        DeviceAssignment::build(full({2, 2, 1, 2}), {.computation_shape = {1, 2, 2, 2}});
      }),
      HasSubstr(
          "computation footprint [1, 2, 2, 2] does not fit in TPU topology shape [2, 2, 1, 2]"));
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                DeviceAssignment::build(full({2, 2, 1, 2}), {.computation_shape = {1, 1, 1, 2},
                                                             .computation_stride = {1, 1, 1, 2}});
              }),
              HasSubstr("computation footprint [1, 1, 1, 4] does not fit"));
}

TEST(DeviceAssignment, MoreReplicasThanFitAreRejected) {
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                DeviceAssignment::build(full({2, 2, 1, 2}), {.num_replicas = 9});
              }),
              HasSubstr("requested 9 replicas but only 8 replicas with shape [1, 1, 1, 1] and "
                        "computation_stride [1, 1, 1, 1] fit in a TPU mesh of shape [2, 2, 1, 2]"));
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                DeviceAssignment::build(full({2, 2, 1, 2}),
                                        {.computation_shape = {1, 1, 1, 2}, .num_replicas = 5});
              }),
              HasSubstr("requested 5 replicas but only 4 replicas"));
}

TEST(DeviceAssignment, NumReplicasMustBePositive) {
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                DeviceAssignment::build(full({2, 2, 1, 2}), {.num_replicas = 0});
              }),
              HasSubstr("expected num_replicas >= 1, got 0"));
}

// 2x1x1x2 with chip (0, 0) missing and the other chip's cores on two tasks.
Topology degraded() { return Topology({2, 1, 1, 2}, {{{1, 0, 0, 1}}, {{1, 0, 0, 0}}}); }

TEST(DeviceAssignment, DegradedSlicesAreFilledInTaskOrder) {
  // Logical id r * cores + k -> task id / 1, device id % 1.
  auto da = DeviceAssignment::build(degraded(), {.num_replicas = 2});
  EXPECT_EQ(da.core_assignment(), (Assignment{{{1, 0, 0, 1}}, {{1, 0, 0, 0}}}));
  auto one = DeviceAssignment::build(degraded(), {.computation_shape = {1, 1, 1, 2}});
  EXPECT_EQ(one.core_assignment(), (Assignment{{{1, 0, 0, 1}, {1, 0, 0, 0}}}));
  EXPECT_EQ(one.tpu_device(0, 1, "worker"), "/job:worker/task:1/device:TPU:0");
}

TEST(DeviceAssignment, DegradedSlicesRejectStridesAndTooManyCores) {
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                DeviceAssignment::build(degraded(), {.computation_stride = {2, 1, 1, 1}});
              }),
              HasSubstr("expected computation_stride of all ones on a slice with missing devices"));
  // 3 replicas fit the mesh (max 4) but the slice has only 2 devices.
  EXPECT_THAT(message_of<InvalidArgumentError>(
                  [] { DeviceAssignment::build(degraded(), {.num_replicas = 3}); }),
              HasSubstr("expected at most 2 cores (the devices of this degraded slice), got 3 "
                        "replicas of 1 cores"));
}

TEST(DeviceAssignment, ExplicitCoreAssignmentIsValidatedAndUsedAsGiven) {
  auto da = DeviceAssignment(full({2, 2, 1, 2}), {{{1, 1, 0, 1}, {0, 0, 0, 0}}});
  EXPECT_EQ(da.num_replicas(), 1);
  EXPECT_EQ(da.num_cores_per_replica(), 2);
  EXPECT_EQ(da.tpu_ordinal(0, 0), 7);
  EXPECT_EQ(da.tpu_ordinal(0, 1), 0);
}

TEST(DeviceAssignment, ExplicitCoreAssignmentErrors) {
  const Topology t = full({2, 2, 1, 2});
  EXPECT_THAT(
      message_of<InvalidArgumentError>([&] { DeviceAssignment(t, {}); }),
      HasSubstr(
          "expected core_assignment of shape [num_replicas >= 1, num_cores_per_replica >= 1, 4], "
          "got 0 replicas"));
  EXPECT_THAT(message_of<InvalidArgumentError>([&] {
                DeviceAssignment(t, {{{0, 0, 0, 0}}, {}});
              }),
              HasSubstr("with 1 logical cores for every replica, got 0 for replica 1"));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([&] {
        DeviceAssignment(t, {{{0, 0, 0}}});
      }),
      HasSubstr(
          "minor dimension of core_assignment to have size equal to topology rank (4), got 3"));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([&] {
        DeviceAssignment(t, {{{0, 2, 0, 0}}});
      }),
      HasSubstr(
          "expected coordinates inside the mesh [2, 2, 1, 2], got [0, 2, 0, 0] for replica 0"));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([&] {
        DeviceAssignment(t, {{{0, 0, 0, 1}}, {{0, 0, 0, 1}}});
      }),
      HasSubstr(
          "expected every physical core used once, got [0, 0, 0, 1] for both replica 0 logical "
          "core 0 and replica 1 logical core 0"));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        DeviceAssignment(degraded(), {{{0, 0, 0, 0}}});
      }),
      HasSubstr("expected a device at [0, 0, 0, 0] for replica 0 logical core 0, got none"));
}

TEST(DeviceAssignment, DefaultAssignmentMakesEveryCoreAReplicaInDeviceOrder) {
  // Two tasks of 4 devices on 4x2x1x1 (task t owns row y = t, x descending):
  // replicas go task by task, ordinal by ordinal.
  Topology t({4, 2, 1, 1}, {{{3, 0, 0, 0}, {2, 0, 0, 0}, {1, 0, 0, 0}, {0, 0, 0, 0}},
                            {{3, 1, 0, 0}, {2, 1, 0, 0}, {1, 1, 0, 0}, {0, 1, 0, 0}}});
  auto da = DeviceAssignment::default_assignment(t);
  EXPECT_EQ(da.num_replicas(), 8);
  EXPECT_EQ(da.num_cores_per_replica(), 1);
  EXPECT_EQ(da.coordinates(0, 0), (Coordinates{3, 0, 0, 0}));
  EXPECT_EQ(da.coordinates(5, 0), (Coordinates{2, 1, 0, 0}));
  EXPECT_EQ(da.tpu_device(5, 0, "worker"), "/job:worker/task:1/device:TPU:1");
  EXPECT_THAT(da.lookup_replicas(1, 0), ElementsAre(4, 5, 6, 7));
}

TEST(DeviceAssignment, LookupReplicasOnAMultiTaskMesh) {
  // local_topology("", 4, 2): mesh 4x1x1x2, task 0 owns x 0-1, task 1 x 2-3.
  // The seed's 4 x [1,1,1,2] (ring over x): replica r on chip x = r.
  auto da = DeviceAssignment::build(local_topology("", 4, 2),
                                    {.computation_shape = {1, 1, 1, 2}, .num_replicas = 4});
  EXPECT_THAT(da.lookup_replicas(0, 0), ElementsAre(0, 1));
  EXPECT_THAT(da.lookup_replicas(1, 1), ElementsAre(2, 3));
  EXPECT_EQ(da.host_device(3, 0, "worker"), "/job:worker/task:1/device:CPU:0");
  EXPECT_EQ(da.tpu_device(3, 1, "worker"), "/job:worker/task:1/device:TPU:3");
  EXPECT_THAT(message_of<InvalidArgumentError>([&] { da.lookup_replicas(2, 0); }),
              HasSubstr("Can not find any replica in task: 2 contains logical_core: 0"));
  EXPECT_THAT(message_of<InvalidArgumentError>([&] { da.lookup_replicas(0, 2); }),
              HasSubstr("Can not find any replica in task: 0 contains logical_core: 2"));
}

TEST(DeviceAssignment, AccessorsRejectOutOfRangeIndices) {
  auto da = DeviceAssignment::build(full({2, 2, 1, 2}),
                                    {.computation_shape = {1, 1, 1, 2}, .num_replicas = 4});
  EXPECT_THAT(message_of<InvalidArgumentError>([&] { da.coordinates(4, 0); }),
              HasSubstr("DeviceAssignment.coordinates: expected replica in [0, 4), got 4"));
  EXPECT_THAT(message_of<InvalidArgumentError>([&] { da.tpu_ordinal(0, 2); }),
              HasSubstr("DeviceAssignment.tpu_ordinal: expected logical_core in [0, 2), got 2"));
  EXPECT_THROW(da.host_device(-1, 0), InvalidArgumentError);
  EXPECT_THROW(da.tpu_device(0, -1), InvalidArgumentError);
}

TEST(RingOrder, OpenRing2dMatchesTensorFlowsFourByFourPicture) {
  // TF's docstring numbers the 4x4 ring row by row: 0 1 2 3 / 15 6 5 4 /
  // 14 7 8 9 / 13 12 11 10; the open ring leaves out position 0.
  const std::vector<std::array<int, 3>> expected = {
      {1, 0, 5}, {2, 0, 5}, {3, 0, 5}, {3, 1, 5}, {2, 1, 5}, {1, 1, 5}, {1, 2, 5}, {2, 2, 5},
      {3, 2, 5}, {3, 3, 5}, {2, 3, 5}, {1, 3, 5}, {0, 3, 5}, {0, 2, 5}, {0, 1, 5}};
  EXPECT_EQ(open_ring_2d(4, 4, 5), expected);
}

TEST(RingOrder, Ring3dMatchesTensorFlowsFourCubedPicture) {
  // TF's docstring, z == 1 plane: 63 30 29 28 / 16 25 26 27 / 17 24 23 22 / 18 19 20 21.
  const auto ring = ring_3d(4, 4, 4);
  ASSERT_EQ(ring.size(), 64u);
  const int z1[4][4] = {{63, 30, 29, 28}, {16, 25, 26, 27}, {17, 24, 23, 22}, {18, 19, 20, 21}};
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 4; ++x) {
      EXPECT_EQ(ring[z1[y][x]], (std::array<int, 3>{x, y, 1})) << "x=" << x << " y=" << y;
    }
  }
  EXPECT_EQ(ring[0], (std::array<int, 3>{0, 0, 0}));
  EXPECT_EQ(ring[62], (std::array<int, 3>{0, 0, 2}));
}

TEST(RingOrder, Ring3dLinesAndOddDimensions) {
  EXPECT_EQ(ring_3d(1, 1, 3), (std::vector<std::array<int, 3>>{{0, 0, 0}, {0, 0, 1}, {0, 0, 2}}));
  EXPECT_EQ(ring_3d(1, 2, 1), (std::vector<std::array<int, 3>>{{0, 0, 0}, {0, 1, 0}}));
  // 3x2x1: odd -> x fastest row-major.
  EXPECT_EQ(ring_3d(3, 2, 1),
            (std::vector<std::array<int, 3>>{
                {0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {0, 1, 0}, {1, 1, 0}, {2, 1, 0}}));
  // 2x1x2: a ring in the x-z plane: (0,0,0) (1,0,0) (1,0,1) (0,0,1).
  EXPECT_EQ(ring_3d(2, 1, 2),
            (std::vector<std::array<int, 3>>{{0, 0, 0}, {1, 0, 0}, {1, 0, 1}, {0, 0, 1}}));
  // 1x2x2: a ring in the y-z plane.
  EXPECT_EQ(ring_3d(1, 2, 2),
            (std::vector<std::array<int, 3>>{{0, 0, 0}, {0, 1, 0}, {0, 1, 1}, {0, 0, 1}}));
}

}  // namespace
}  // namespace strata::tpu::experimental
