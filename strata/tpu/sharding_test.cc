#include "strata/tpu/sharding.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/core/device.h"
#include "strata/testing/logical_devices.h"
#include "strata/tpu/internal/test_util.h"

namespace strata::tpu::experimental {
namespace {

using ::strata::tpu::testing::message_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// 0, 1, 2, ... as float32 of `shape`.
Tensor iota(const TensorShape& shape) {
  std::vector<float> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return constant(v, shape);
}

TEST(Sharding, SplitToLogicalDevicesNumbersTilesRowMajor) {
  // The seed: 8 logical devices, image (B, W, H, C) with [1, 2, 4, 1]: tile
  // (w_i, h_j) goes to device i * 4 + j.
  auto s = Sharding::split_to_logical_devices(TensorShape{2, 8, 16, 3}, {1, 2, 4, 1}, 8);
  EXPECT_TRUE(s.is_tiled());
  EXPECT_EQ(s.type(), Sharding::Type::OTHER);
  EXPECT_EQ(s.num_logical_devices(), 8);
  EXPECT_THAT(s.partition_dimensions(), ElementsAre(1, 2, 4, 1));
  EXPECT_EQ(s.shard_shape(TensorShape{2, 8, 16, 3}), (TensorShape{2, 4, 4, 3}));
  EXPECT_THAT(s.tile_index(6), ElementsAre(0, 1, 2, 0));
  EXPECT_THAT(s.tile_index(3), ElementsAre(0, 0, 3, 0));
  const std::vector<int64_t> tile{0, 1, 2, 0};
  EXPECT_EQ(s.logical_device_at_tile(tile), 6);
  EXPECT_THAT(s.shard_offset(TensorShape{2, 8, 16, 3}, 6), ElementsAre(0, 4, 8, 0));
  EXPECT_THAT(s.tile_assignment_dimensions(), ElementsAre(1, 2, 4, 1));
  EXPECT_THAT(s.tile_assignment_devices(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_EQ(s.to_string(), "{devices=[1,2,4,1]0,1,2,3,4,5,6,7}");
  for (int d = 0; d < 8; ++d) EXPECT_TRUE(s.holds_shard(d));
}

TEST(Sharding, SplitValidationFollowsTensorFlowsOrderAndText) {
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        Sharding::split_to_logical_devices(TensorShape{2, 8, 16, 3}, {2, 4, 1}, 8);
      }),
      HasSubstr("Length of `partition_dimensions` must equal to the rank of `tensor.shape` (4). "
                "Received len(partition_dimensions)=3."));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        Sharding::split_to_logical_devices(TensorShape{2, 6, 16, 3}, {1, 4, 2, 1}, 8);
      }),
      HasSubstr(
          "Tensor shape at `partition_dimensions[1]` must be divisible by corresponding value "
          "specified by `partition_dimensions` (4). Received: 6."));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        Sharding::split_to_logical_devices(TensorShape{2, 8, 16, 3}, {1, 2, 2, 1}, 8);
      }),
      HasSubstr(
          "The product of `partition_dimensions` should be the same as the number of logical "
          "devices (=8). Received `partition_dimensions`=[1, 2, 2, 1],and their product is 4."));
  // The rank is checked before divisibility, divisibility before the product.
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                Sharding::split_to_logical_devices(TensorShape{3, 3}, {2, 2, 2}, 4);
              }),
              HasSubstr("Length of `partition_dimensions`"));
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                Sharding::split_to_logical_devices(TensorShape{3, 4}, {2, 2}, 8);
              }),
              HasSubstr("divisible"));
  EXPECT_THAT(message_of<InvalidArgumentError>([] {
                Sharding::split_to_logical_devices(TensorShape{4, 4}, {0, 2}, 0);
              }),
              HasSubstr("expected every entry of `partition_dimensions` >= 1, got [0, 2]"));
}

TEST(Sharding, UnknownDimensionsAreNotCheckedForDivisibility) {
  auto s = Sharding::split_to_logical_devices(TensorShape{-1, 8}, {2, 2}, 4);
  EXPECT_EQ(s.shard_shape(TensorShape{-1, 8}), (TensorShape{-1, 4}));
}

TEST(Sharding, MaximalNamesOneDeviceAndChecksTheRange) {
  auto s = Sharding::maximal(1, 2);
  EXPECT_TRUE(s.is_maximal());
  EXPECT_EQ(s.maximal_device(), 1);
  EXPECT_FALSE(s.holds_shard(0));
  EXPECT_TRUE(s.holds_shard(1));
  EXPECT_THAT(s.tile_assignment_dimensions(), ElementsAre(1));
  EXPECT_THAT(s.tile_assignment_devices(), ElementsAre(1));
  EXPECT_EQ(s.to_string(), "{maximal device=1}");
  EXPECT_EQ(s.shard_shape(TensorShape{3, 5}), (TensorShape{3, 5}));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] { Sharding::maximal(2, 2); }),
      HasSubstr(
          "`logical_core_id` to assign must be lower then total number of logical devices per "
          "replica. Received logical device id 2 but there are only total of 2 logical devices in "
          "replica."));
  EXPECT_THROW(Sharding::maximal(-1, 2), InvalidArgumentError);
}

TEST(Sharding, ReplicatedCoversEveryDevice) {
  auto s = Sharding::replicated(4);
  EXPECT_TRUE(s.is_replicated());
  EXPECT_EQ(s.to_string(), "{replicated}");
  EXPECT_TRUE(s.tile_assignment_devices().empty());
  EXPECT_TRUE(s.tile_index(3).empty());
  EXPECT_THAT(s.shard_offset(TensorShape{2, 2}, 3), ElementsAre(0, 0));
  EXPECT_THAT(message_of<InvalidArgumentError>([&] { s.maximal_device(); }),
              HasSubstr("expected a MAXIMAL sharding, got {replicated}"));
  EXPECT_THAT(message_of<InvalidArgumentError>([&] { s.tile_index(4); }),
              HasSubstr("expected a logical device in [0, 4), got 4"));
  EXPECT_THROW(Sharding::replicated(0), InvalidArgumentError);
}

TEST(Sharding, TileLookupsRejectBadIndices) {
  auto s = Sharding::tiled({2, 3});
  EXPECT_EQ(s.num_logical_devices(), 6);
  const std::vector<int64_t> outside{1, 3}, short_index{1};
  EXPECT_THAT(message_of<InvalidArgumentError>([&] { s.logical_device_at_tile(outside); }),
              HasSubstr("expected a tile index inside [2, 3], got [1, 3]"));
  EXPECT_THAT(message_of<InvalidArgumentError>([&] { s.logical_device_at_tile(short_index); }),
              HasSubstr("expected a tile index of rank 2, got [1]"));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        Sharding::tiled({2, -1});
      }),
      HasSubstr(
          "Sharding::tiled: expected every entry of `partition_dimensions` >= 1, got [2, -1]"));
}

TEST(Sharding, SplitCutsTilesAndAssembleJoinsThem) {
  // [4, 6] split [2, 3]: device d = 3 i + j holds rows 2i..2i+1, columns 2j..2j+1.
  Tensor full = iota({4, 6});
  auto s = Sharding::tiled({2, 3});
  std::vector<Tensor> shards = split(full, s);
  ASSERT_EQ(shards.size(), 6u);
  EXPECT_EQ(shards[0].shape(), (TensorShape{2, 2}));
  EXPECT_EQ(shards[0].to_vector<float>(), (std::vector<float>{0, 1, 6, 7}));
  EXPECT_EQ(shards[2].to_vector<float>(), (std::vector<float>{4, 5, 10, 11}));
  EXPECT_EQ(shards[4].to_vector<float>(), (std::vector<float>{14, 15, 20, 21}));
  Tensor back = assemble(shards, s);
  EXPECT_EQ(back.shape(), (TensorShape{4, 6}));
  EXPECT_EQ(back.to_vector<float>(), full.to_vector<float>());
}

TEST(Sharding, SplitOfAFourDimensionalImageMatchesTheSeedsLayout) {
  // [1, 4, 8, 2] with [1, 2, 4, 1]: device 6 = (w 1, h 2) starts at w 2, h 4.
  Tensor full = iota({1, 4, 8, 2});
  auto s = Sharding::split_to_logical_devices(full.shape(), {1, 2, 4, 1}, 8);
  auto shards = split(full, s);
  EXPECT_EQ(shards[6].shape(), (TensorShape{1, 2, 2, 2}));
  // element (0, w, h, c) = (w * 8 + h) * 2 + c.
  std::vector<float> expected;
  for (int w = 2; w < 4; ++w)
    for (int h = 4; h < 6; ++h)
      for (int c = 0; c < 2; ++c) expected.push_back(static_cast<float>((w * 8 + h) * 2 + c));
  EXPECT_EQ(shards[6].to_vector<float>(), expected);
  EXPECT_EQ(assemble(shards, s).to_vector<float>(), full.to_vector<float>());
}

TEST(Sharding, SplitAndAssembleKeepIntegerAndStringElements) {
  Tensor ints = constant(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, TensorShape{6});
  auto s = Sharding::tiled({3});
  auto shards = split(ints, s);
  EXPECT_EQ(shards[1].to_vector<int64_t>(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(assemble(shards, s).to_vector<int64_t>(), ints.to_vector<int64_t>());

  Tensor words = constant(std::vector<std::string>{"a", "bb", "ccc", "dddd"}, TensorShape{2, 2});
  auto ws = Sharding::tiled({1, 2});
  auto wshards = split(words, ws);
  EXPECT_EQ(wshards[1].to_vector<std::string>(), (std::vector<std::string>{"bb", "dddd"}));
  EXPECT_EQ(assemble(wshards, ws).to_vector<std::string>(), words.to_vector<std::string>());
}

TEST(Sharding, ScalarsSplitOverOneDevice) {
  Tensor x = constant(3.f);
  auto s = Sharding::split_to_logical_devices(x.shape(), {}, 1);
  auto shards = split(x, s);
  ASSERT_EQ(shards.size(), 1u);
  EXPECT_EQ(shards[0].item<float>(), 3.f);
  EXPECT_EQ(assemble(shards, s).item<float>(), 3.f);
}

TEST(Sharding, ReplicatedAndMaximalSplitsShareTheValue) {
  Tensor full = iota({2, 3});
  auto r = split(full, Sharding::replicated(3));
  ASSERT_EQ(r.size(), 3u);
  for (const Tensor& t : r) EXPECT_EQ(t.buffer(), full.buffer());
  EXPECT_EQ(assemble(r, Sharding::replicated(3)).to_vector<float>(), full.to_vector<float>());

  auto m = split(full, Sharding::maximal(1, 2));
  EXPECT_FALSE(m[0].defined());
  ASSERT_TRUE(m[1].defined());
  EXPECT_EQ(m[1].buffer(), full.buffer());
  EXPECT_EQ(assemble(m, Sharding::maximal(1, 2)).to_vector<float>(), full.to_vector<float>());
}

TEST(Sharding, AssembleRejectsMismatchedShards) {
  auto s = Sharding::tiled({2});
  Tensor a = iota({2}), b = iota({3});
  EXPECT_THAT(message_of<InvalidArgumentError>([&] { assemble(std::vector<Tensor>{a}, s); }),
              HasSubstr("expected 2 shards (one per logical device of {devices=[2]0,1}), got 1"));
  EXPECT_THAT(message_of<InvalidArgumentError>([&] {
                assemble(std::vector<Tensor>{a, b}, s);
              }),
              HasSubstr("expected every shard of shape [2], got [3] for logical device 1"));
  Tensor c = constant(std::vector<int32_t>{1, 2}, TensorShape{2});
  EXPECT_THAT(message_of<InvalidArgumentError>([&] {
                assemble(std::vector<Tensor>{a, c}, s);
              }),
              HasSubstr("expected every shard of dtype float32, got int32 for logical device 1"));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([&] {
        assemble(std::vector<Tensor>{a, Tensor()}, s);
      }),
      HasSubstr(
          "expected a shard for logical device 1 of {devices=[2]0,1}, got an undefined tensor"));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([&] {
        assemble(std::vector<Tensor>{a, Tensor()}, Sharding::maximal(1, 2));
      }),
      HasSubstr(
          "expected the shard of logical device 1 of {maximal device=1}, got an undefined tensor"));
}

TEST(Sharding, SplitRejectsShapesThatDoNotSuitTheSharding) {
  EXPECT_THAT(message_of<InvalidArgumentError>([] { split(iota({5}), Sharding::tiled({2})); }),
              HasSubstr("Tensor shape at `partition_dimensions[0]` must be divisible"));
  EXPECT_THAT(
      message_of<InvalidArgumentError>([] {
        split(iota({4, 2}), Sharding::tiled({2}));
      }),
      HasSubstr("Length of `partition_dimensions` must equal to the rank of `tensor.shape` (2)"));
}

TEST(Sharding, TensorsCarryTheirSharding) {
  Tensor t = iota({4, 2});
  EXPECT_EQ(sharding_of(t), nullptr);
  Tensor annotated = with_sharding(t, Sharding::tiled({2, 1}));
  ASSERT_NE(sharding_of(annotated), nullptr);
  EXPECT_EQ(*sharding_of(annotated), Sharding::tiled({2, 1}));
  EXPECT_EQ(annotated.to_vector<float>(), t.to_vector<float>());
  EXPECT_THROW(with_sharding(t, Sharding::tiled({3, 1})), InvalidArgumentError);
}

class ShardingOnDevices : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(2); }
  void TearDown() override { internal::reset_runtime_for_testing(); }
};

TEST_F(ShardingOnDevices, ShardsArePlacedOnTheGivenDevices) {
  const Device* devs[] = {&find_device("CPU:1"), &find_device("CPU:0")};
  Tensor full = iota({2, 2});
  auto s = Sharding::tiled({2, 1});
  auto shards = split(full, s, devs);
  EXPECT_THAT(shards[0].device(), HasSubstr("CPU:1"));
  EXPECT_THAT(shards[1].device(), HasSubstr("CPU:0"));
  Tensor back = assemble(shards, s, &find_device("CPU:0"));
  EXPECT_THAT(back.device(), HasSubstr("CPU:0"));
  EXPECT_EQ(back.to_vector<float>(), full.to_vector<float>());
  const Device* one[] = {&find_device("CPU:0")};
  EXPECT_THAT(
      message_of<InvalidArgumentError>([&] { split(full, s, one); }),
      HasSubstr("split: expected 2 devices (one per logical device of {devices=[2,1]0,1}), got 1"));
}

}  // namespace
}  // namespace strata::tpu::experimental
