#include "strata/tpu/topology.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/tpu/internal/test_util.h"

namespace strata::tpu::experimental {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// TPU v3-8's layout: one task, 4 chips of 2 cores; ordinals core fastest, then x, y.
Topology v3_8() {
  return Topology({2, 2, 1, 2}, {{{0, 0, 0, 0},
                                  {0, 0, 0, 1},
                                  {1, 0, 0, 0},
                                  {1, 0, 0, 1},
                                  {0, 1, 0, 0},
                                  {0, 1, 0, 1},
                                  {1, 1, 0, 0},
                                  {1, 1, 0, 1}}});
}

// Two tasks, each owning one row (y) of a 2x2x1x2 mesh.
Topology two_tasks() {
  return Topology({2, 2, 1, 2}, {{{0, 0, 0, 0}, {0, 0, 0, 1}, {1, 0, 0, 0}, {1, 0, 0, 1}},
                                 {{0, 1, 0, 0}, {0, 1, 0, 1}, {1, 1, 0, 0}, {1, 1, 0, 1}}});
}

std::string bytes(std::initializer_list<int> values) {
  std::string s;
  for (int v : values) s.push_back(static_cast<char>(v));
  return s;
}

using ::strata::tpu::testing::message_of;

TEST(Topology, ExposesMeshShapeRankTasksAndCoordinates) {
  Topology t = two_tasks();
  EXPECT_THAT(t.mesh_shape(), ElementsAre(2, 2, 1, 2));
  EXPECT_EQ(t.mesh_rank(), 4);
  EXPECT_EQ(t.num_tasks(), 2);
  EXPECT_EQ(t.num_tpus_per_task(), 4);
  EXPECT_EQ(t.num_mesh_cores(), 8);
  ASSERT_EQ(t.device_coordinates().size(), 2u);
  EXPECT_EQ(t.device_coordinates()[1][2], (Coordinates{1, 1, 0, 0}));
  EXPECT_TRUE(t.missing_devices().empty());
}

TEST(Topology, MapsCoordinatesToTaskAndTpuOrdinal) {
  Topology t = two_tasks();
  EXPECT_EQ(t.task_ordinal_at_coordinates({0, 0, 0, 1}), 0);
  EXPECT_EQ(t.tpu_device_ordinal_at_coordinates({0, 0, 0, 1}), 1);
  EXPECT_EQ(t.task_ordinal_at_coordinates({1, 1, 0, 1}), 1);
  EXPECT_EQ(t.tpu_device_ordinal_at_coordinates({1, 1, 0, 1}), 3);
}

TEST(Topology, NamesDevicesAsTensorFlowDoes) {
  Topology t = two_tasks();
  EXPECT_EQ(t.tpu_device_name_at_coordinates({1, 1, 0, 0}, "worker"),
            "/job:worker/task:1/device:TPU:2");
  EXPECT_EQ(t.tpu_device_name_at_coordinates({1, 1, 0, 0}), "/task:1/device:TPU:2");
  EXPECT_EQ(t.cpu_device_name_at_coordinates({1, 0, 0, 1}, "worker"),
            "/job:worker/task:0/device:CPU:0");
  EXPECT_EQ(t.cpu_device_name_at_coordinates({0, 1, 0, 0}), "/task:1/device:CPU:0");
}

TEST(Topology, LookupsOutsideTheMeshAreInvalidArguments) {
  Topology t = v3_8();
  EXPECT_THAT(message_of<InvalidArgumentError>([&] {
                t.task_ordinal_at_coordinates({2, 0, 0, 0});
              }),
              HasSubstr("expected coordinates inside the mesh [2, 2, 1, 2], got [2, 0, 0, 0]"));
  EXPECT_THROW(t.tpu_device_ordinal_at_coordinates({0, 0, 0, -1}), InvalidArgumentError);
  EXPECT_THROW(t.tpu_device_name_at_coordinates({0, 0, 1, 0}), InvalidArgumentError);
  EXPECT_THROW(t.cpu_device_name_at_coordinates({0, 2, 0, 0}), InvalidArgumentError);
}

TEST(Topology, DegradedSliceReportsMissingDevicesAndMinusOneOrdinals) {
  // Chip (1, 0) is missing: 2 of 6 cores have no device.
  Topology t({2, 1, 1, 2}, {{{0, 0, 0, 0}, {0, 0, 0, 1}}});
  EXPECT_THAT(t.missing_devices(), ElementsAre(Coordinates{1, 0, 0, 0}, Coordinates{1, 0, 0, 1}));
  EXPECT_EQ(t.task_ordinal_at_coordinates({1, 0, 0, 1}), -1);
  EXPECT_EQ(t.tpu_device_ordinal_at_coordinates({1, 0, 0, 0}), -1);
  EXPECT_THAT(message_of<NotFoundError>([&] {
                t.tpu_device_name_at_coordinates({1, 0, 0, 0});
              }),
              HasSubstr("expected a device at [1, 0, 0, 0], got none"));
  EXPECT_THROW(t.cpu_device_name_at_coordinates({1, 0, 0, 1}), NotFoundError);
}

TEST(Topology, RejectsMeshShapesThatAreNotFourPositiveEntries) {
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        Topology({2, 2, 2}, {});
      }),
      HasSubstr("expected `mesh_shape` to be a sequence of 4 positive entries, got [2, 2, 2]"));
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                Topology({2, 0, 1, 2}, {});
              }),
              HasSubstr("got [2, 0, 1, 2]"));
}

TEST(Topology, RejectsMeshesTooLargeToIndex) {
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        Topology({4096, 4096, 2, 1}, {});
      }),
      HasSubstr(
          "expected a mesh of at most 16777216 cores, got [4096, 4096, 2, 1] (33554432 cores)"));
  // The same check guards parse(): mesh_shape packed, 4096 = 0x80 0x20.
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                Topology::parse(bytes({0x0a, 0x06, 0x80, 0x20, 0x80, 0x20, 0x02, 0x01}));
              }),
              HasSubstr("at most 16777216 cores"));
}

TEST(Topology, RejectsCoordinatesWithTheWrongMinorDimension) {
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        Topology({1, 1, 1, 2}, {{{0, 0, 0}, {0, 0, 1}}});
      }),
      HasSubstr("minor dimension equal to the mesh shape rank (4), got 3 coordinates [0, 0, 0]"));
}

TEST(Topology, RejectsTasksWithDifferentDeviceCounts) {
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                Topology({1, 1, 1, 2}, {{{0, 0, 0, 0}}, {{0, 0, 0, 1}, {0, 0, 0, 1}}});
              }),
              HasSubstr("with 1 devices for every task, got 2 devices for task 1"));
}

TEST(Topology, RejectsCoordinatesOutsideTheMesh) {
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        Topology({1, 1, 1, 2}, {{{0, 0, 0, 0}, {0, 0, 0, 2}}});
      }),
      HasSubstr(
          "coordinates of task 0 device 1 to lie inside the mesh [1, 1, 1, 2], got [0, 0, 0, 2]"));
}

TEST(Topology, RejectsTwoDevicesAtTheSameCoordinates) {
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        Topology({1, 1, 1, 2}, {{{0, 0, 0, 1}}, {{0, 0, 0, 1}}});
      }),
      HasSubstr("expected distinct device coordinates, got [0, 0, 0, 1] for both task 0 device 0 "
                "and task 1 device 0"));
}

TEST(Topology, SerializesToTheTopologyProtoWireBytes) {
  // Worked by hand from the proto: field 1 packed (tag 0x0a, 4 bytes), field 2
  // varint (tag 0x10), field 3 varint (tag 0x18), field 4 packed (tag 0x22, 8 bytes).
  Topology t({1, 1, 1, 2}, {{{0, 0, 0, 0}, {0, 0, 0, 1}}});
  EXPECT_EQ(t.serialized(), bytes({0x0a, 0x04, 1, 1, 1, 2, 0x10, 0x01, 0x18, 0x02,
                                   0x22, 0x08, 0, 0, 0, 0, 0,    0,    0,    1}));
}

TEST(Topology, SerializationWritesMultiByteVarintsAndOmitsZeroScalars) {
  // mesh x = 200 = 0xc8 0x01 as a varint; no devices: num_tasks = 0 and the
  // empty coordinates field are omitted, as protobuf does.
  Topology t({200, 1, 1, 1}, {});
  EXPECT_EQ(t.serialized(), bytes({0x0a, 0x05, 0xc8, 0x01, 1, 1, 1}));
  Topology back = Topology::parse(t.serialized());
  EXPECT_EQ(back.num_tasks(), 0);
  EXPECT_EQ(back.missing_devices().size(), 200u);
}

TEST(Topology, SerializationRoundTrips) {
  for (const Topology& t :
       {v3_8(), two_tasks(), Topology({2, 1, 1, 2}, {{{1, 0, 0, 1}, {0, 0, 0, 0}}})}) {
    Topology back = Topology::parse(t.serialized());
    EXPECT_EQ(back, t);
    EXPECT_EQ(back.serialized(), t.serialized());
    EXPECT_EQ(back.num_tpus_per_task(), t.num_tpus_per_task());
  }
}

TEST(Topology, ParseAcceptsUnpackedRepeatedFieldsAndSplitOccurrences) {
  // mesh_shape as four unpacked varints (tag 0x08); coordinates in two packed
  // pieces; num_tasks written twice (the last one wins).
  std::string s = bytes({0x08, 1,    0x08, 1, 0x08, 1, 0x08, 2, 0x10, 0x07, 0x10, 0x01, 0x18, 0x02,
                         0x22, 0x04, 0,    0, 0,    1, 0x20, 0, 0x22, 0x03, 0,    0,    0});
  Topology t = Topology::parse(s);
  EXPECT_THAT(t.mesh_shape(), ElementsAre(1, 1, 1, 2));
  EXPECT_EQ(t.num_tasks(), 1);
  EXPECT_EQ(t.device_coordinates()[0][0], (Coordinates{0, 0, 0, 1}));
  EXPECT_EQ(t.device_coordinates()[0][1], (Coordinates{0, 0, 0, 0}));
}

TEST(Topology, ParseSkipsUnknownFields) {
  Topology t({1, 1, 1, 2}, {{{0, 0, 0, 0}, {0, 0, 0, 1}}});
  // Field 5 varint, field 6 length-delimited, field 7 fixed64, field 8 fixed32.
  std::string s = t.serialized() + bytes({0x28, 0x96, 0x01, 0x32, 0x02, 'h',  'i', 0x39, 1, 2, 3,
                                          4,    5,    6,    7,    8,    0x45, 1,   2,    3, 4});
  EXPECT_EQ(Topology::parse(s), t);
}

TEST(Topology, ParseOfMalformedBytesIsDataLoss) {
  const std::string good = Topology({1, 1, 1, 2}, {{{0, 0, 0, 0}, {0, 0, 0, 1}}}).serialized();
  EXPECT_THAT(message_of<DataLossError>([] { Topology::parse(bytes({0x80})); }),
              HasSubstr("corrupt TopologyProto at byte offset 0: tag varint runs past the end"));
  EXPECT_THAT(
      message_of<DataLossError>([&] { Topology::parse(good.substr(0, good.size() - 1)); }),
      HasSubstr("at byte offset 11: packed device_coordinates of 8 bytes runs past the end"));
  EXPECT_THAT(message_of<DataLossError>([] {
                Topology::parse(bytes(
                    {0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x81, 0x01}));
              }),
              HasSubstr("num_tasks varint is longer than 10 bytes"));
  EXPECT_THAT(message_of<DataLossError>([] {
                Topology::parse(bytes({0x10, 0x80, 0x80, 0x80, 0x80, 0x10}));
              }),
              HasSubstr("num_tasks value 4294967296 is outside the int32 range"));
  EXPECT_THAT(message_of<DataLossError>([] {
                Topology::parse(bytes({0x0d, 1, 0, 0, 0}));
              }),
              HasSubstr("field mesh_shape has wire type 5, expected 0 or 2"));
  EXPECT_THAT(message_of<DataLossError>([] {
                Topology::parse(bytes({0x12, 0x01, 0x00}));
              }),
              HasSubstr("field num_tasks has wire type 2, expected 0"));
  EXPECT_THAT(message_of<DataLossError>([] { Topology::parse(bytes({0x03})); }),
              HasSubstr("invalid field number 0"));
  EXPECT_THAT(message_of<DataLossError>([] { Topology::parse(bytes({0x2b})); }),
              HasSubstr("field 5 has unsupported wire type 3"));
  EXPECT_THAT(message_of<DataLossError>([] {
                Topology::parse(bytes({0x32, 0x05, 'a'}));
              }),
              HasSubstr("unknown field 6"));
  EXPECT_THAT(message_of<DataLossError>([] {
                Topology::parse(bytes({0x45, 1, 2}));
              }),
              HasSubstr("unknown fixed32 field 8 of 4 bytes runs past the end"));
}

TEST(Topology, ParseOfAnInvalidTopologyIsInvalidArgument) {
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] { Topology::parse(""); }),
      HasSubstr("expected `mesh_shape` to be a vector of size 4 with positive entries, got []"));
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                Topology::parse(bytes({0x0a, 0x03, 1, 1, 2}));
              }),
              HasSubstr("got [1, 1, 2]"));
  // num_tasks = -1: ten-byte sign-extended varint.
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                Topology::parse(bytes({0x0a, 0x04, 1, 1, 1, 2, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0x01}));
              }),
              HasSubstr("expected `num_tasks` >= 0, got -1"));
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                Topology::parse(bytes({0x0a, 0x04, 1, 1, 1, 2, 0x10, 1, 0x18, 0xfe, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
              }),
              HasSubstr("expected `num_tpu_devices_per_task` >= 0, got -2"));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        Topology::parse(bytes({0x0a, 0x04, 1, 1, 1, 2, 0x10, 1, 0x18, 2, 0x22, 0x04, 0, 0, 0, 0}));
      }),
      HasSubstr(
          "num_tasks (1) * num_tpu_devices_per_task (2) * len(mesh_shape) (4) = 8 entries, got 4"));
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                Topology::parse(bytes({0x0a, 0x04, 1,    1,    1,    2,    0x10, 1,    0x18,
                                       1,    0x20, 0,    0x20, 0,    0x20, 0,    0x20, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
              }),
              HasSubstr("expected `device_coordinates` >= 0, got -1 at index 3"));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        Topology::parse(bytes({0x0a, 0x04, 1, 1, 1, 2, 0x10, 1, 0x18, 1, 0x22, 0x04, 0, 0, 0, 5}));
      }),
      HasSubstr("to lie inside the mesh [1, 1, 1, 2], got [0, 0, 0, 5]"));
}

}  // namespace
}  // namespace strata::tpu::experimental
