#include "strata/distribute/partitioners.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "strata/base/errors.h"
#include "strata/testing/expect_error.h"

namespace strata::distribute {
namespace {

using Parts = std::vector<int64_t>;

// Runs `fn`, expects InvalidArgumentError whose message contains every one of `needles`.
using testing::expect_invalid_argument;

TEST(PartitionerTest, FixedShardsCapsAtTheFirstDimension) {
  EXPECT_EQ(FixedShardsPartitioner(2)({10, 3}, DType::float32), (Parts{2, 1}));  // TF's doc
  EXPECT_EQ(FixedShardsPartitioner(5)({3, 4}, DType::float32), (Parts{3, 1}));
  EXPECT_EQ(FixedShardsPartitioner(3)({7}, DType::int64), (Parts{3}));
  EXPECT_EQ(FixedShardsPartitioner(4)({8, 2, 2}, DType::string), (Parts{4, 1, 1}));
  EXPECT_EQ(FixedShardsPartitioner(1)({8, 2}, DType::float32), (Parts{1, 1}));
  // 0 rows: min(k, 0) = 0, which the strategy refuses (as TF).
  EXPECT_EQ(FixedShardsPartitioner(2)({0, 4}, DType::float32), (Parts{0, 1}));
}

TEST(PartitionerTest, MinSizeGivesAsManyShardsAsTheMinimumSizeAllows) {
  // TF's doc examples: [6, 1] float32 = 24 bytes, ceil(24 / 4) = 6.
  EXPECT_EQ(MinSizePartitioner(4, 2)({6, 1}, DType::float32), (Parts{2, 1}));
  EXPECT_EQ(MinSizePartitioner(4, 10)({6, 1}, DType::float32), (Parts{6, 1}));
  // [1024, 1024] float32 = 4 MiB = 16 x 256 KiB; the default max_shards is 1.
  EXPECT_EQ(MinSizePartitioner()({1024, 1024}, DType::float32), (Parts{1, 1}));
  EXPECT_EQ(MinSizePartitioner(256 << 10, 32)({1024, 1024}, DType::float32), (Parts{16, 1}));
  EXPECT_EQ(MinSizePartitioner(256 << 10, 8)({1024, 1024}, DType::float32), (Parts{8, 1}));
  // ceil: 28 bytes / 10 = 2.8 -> 3.
  EXPECT_EQ(MinSizePartitioner(10, 100)({7, 1}, DType::float32), (Parts{3, 1}));
  // int64 counts 8 bytes: 96 / 16 = 6, capped by the 4 rows.
  EXPECT_EQ(MinSizePartitioner(16, 100)({4, 3}, DType::int64), (Parts{4, 1}));
  // rank 3: 400 bytes / 100 = 4.
  EXPECT_EQ(MinSizePartitioner(100, 8)({4, 5, 5}, DType::float32), (Parts{4, 1, 1}));
  // Less than one shard's worth of bytes still gives 1 shard.
  EXPECT_EQ(MinSizePartitioner(1000, 8)({4, 5}, DType::float32), (Parts{1, 1}));
  EXPECT_EQ(MinSizePartitioner(4, 8)({0, 5}, DType::float32), (Parts{1, 1}));
}

TEST(PartitionerTest, MinSizeCountsBytesPerStringForStrings) {
  // 10 strings x 16 bytes = 160 / 16 = 10, capped by 5 rows.
  EXPECT_EQ(MinSizePartitioner(16, 10)({5, 2}, DType::string), (Parts{5, 1}));
  // 10 strings x 4 bytes = 40 / 16 = 2.5 -> 3.
  EXPECT_EQ(MinSizePartitioner(16, 10, 4)({5, 2}, DType::string), (Parts{3, 1}));
}

TEST(PartitionerTest, MaxSizeKeepsShardsBelowTheMaximumSize) {
  // TF's doc examples: a [6, 1] float32 slice is 4 bytes.
  EXPECT_EQ(MaxSizePartitioner(4)({6, 1}, DType::float32), (Parts{6, 1}));
  EXPECT_EQ(MaxSizePartitioner(4, 2)({6, 1}, DType::float32), (Parts{2, 1}));
  EXPECT_EQ(MaxSizePartitioner(1024)({6, 1}, DType::float32), (Parts{1, 1}));
  // slice = 3 x 4 = 12 bytes; floor(100 / 12) = 8 slices per shard; ceil(10 / 8) = 2.
  EXPECT_EQ(MaxSizePartitioner(100)({10, 3}, DType::float32), (Parts{2, 1}));
  // One slice above the maximum: still one slice per shard.
  EXPECT_EQ(MaxSizePartitioner(1)({10, 3}, DType::float32), (Parts{10, 1}));
  EXPECT_EQ(MaxSizePartitioner(1, 4)({10, 3}, DType::float32), (Parts{4, 1}));
  // float64 slice = 2 x 5 x 8 = 80 bytes; floor(200 / 80) = 2; ceil(9 / 2) = 5.
  EXPECT_EQ(MaxSizePartitioner(200)({9, 2, 5}, DType::float64), (Parts{5, 1, 1}));
  // A rank-1 variable: a slice is one element.
  EXPECT_EQ(MaxSizePartitioner(12)({10}, DType::int32), (Parts{4}));
  // No elements: 1 shard (TF divides by zero).
  EXPECT_EQ(MaxSizePartitioner(8)({0, 3}, DType::float32), (Parts{1, 1}));
  EXPECT_EQ(MaxSizePartitioner(8)({5, 0}, DType::float32), (Parts{1, 1}));
}

TEST(PartitionerTest, MaxSizeCountsBytesPerStringForStrings) {
  // slice = 2 x 16 = 32 bytes; 64 / 32 = 2 per shard; ceil(10 / 2) = 5.
  EXPECT_EQ(MaxSizePartitioner(64)({10, 2}, DType::string), (Parts{5, 1}));
  // slice = 2 x 8 = 16 bytes; 4 per shard; ceil(10 / 4) = 3.
  EXPECT_EQ(MaxSizePartitioner(64, std::nullopt, 8)({10, 2}, DType::string), (Parts{3, 1}));
}

TEST(PartitionerTest, ConstructorsRefuseNonPositiveArgumentsNamingThem) {
  expect_invalid_argument([] { FixedShardsPartitioner(0); }, {"`num_shards`", "Received: 0"});
  expect_invalid_argument([] { FixedShardsPartitioner(-2); }, {"`num_shards`", "-2"});
  expect_invalid_argument([] { MinSizePartitioner(0); }, {"`min_shard_bytes`", "Received: 0"});
  expect_invalid_argument([] { MinSizePartitioner(16, 0); }, {"`max_shards`", "Received: 0"});
  expect_invalid_argument([] { MinSizePartitioner(16, 2, -1); }, {"`bytes_per_string`", "-1"});
  expect_invalid_argument([] { MaxSizePartitioner(0); }, {"`max_shard_bytes`", "Received 0"});
  expect_invalid_argument([] { MaxSizePartitioner(-5); }, {"`max_shard_bytes`", "-5"});
  expect_invalid_argument([] { MaxSizePartitioner(16, 0); }, {"`max_shards`", "Received 0"});
  expect_invalid_argument([] { MaxSizePartitioner(16, -3); }, {"`max_shards`", "-3"});
  expect_invalid_argument([] { MaxSizePartitioner(16, std::nullopt, 0); },
                          {"`bytes_per_string`", "0"});
  // The defaults themselves are valid and TF's.
  const MinSizePartitioner min_default;
  EXPECT_EQ(min_default.min_shard_bytes(), 256 << 10);
  EXPECT_EQ(min_default.max_shards(), 1);
  EXPECT_EQ(min_default.bytes_per_string(), 16);
  const MaxSizePartitioner max_default(64);
  EXPECT_FALSE(max_default.max_shards().has_value());
  EXPECT_EQ(max_default.bytes_per_string(), 16);
}

TEST(PartitionerTest, PartitionersRefuseScalarAndUndefinedShapes) {
  const std::vector<VariablePartitioner> all = {FixedShardsPartitioner(2), MinSizePartitioner(4, 2),
                                                MaxSizePartitioner(4)};
  const std::vector<std::string> names = {"FixedShardsPartitioner", "MinSizePartitioner",
                                          "MaxSizePartitioner"};
  for (size_t i = 0; i < all.size(); ++i) {
    expect_invalid_argument([&] { all[i](TensorShape{}, DType::float32); },
                            {names[i], "[]", "rank 0"});
    expect_invalid_argument(
        [&] {
          all[i](TensorShape{-1, 3}, DType::float32);
        },
        {names[i], "fully defined", "[None, 3]"});
  }
}

TEST(PartitionerTest, NumPartitionsAppliesTheStrategyRules) {
  EXPECT_EQ(num_partitions(FixedShardsPartitioner(5), {13, 4}, DType::float32), 5);
  EXPECT_EQ(num_partitions(FixedShardsPartitioner(5), {3, 4}, DType::float32), 3);
  EXPECT_EQ(num_partitions({}, {13, 4}, DType::float32), 1);
  // A custom partitioner may ask for more shards than rows: capped at rows.
  auto greedy = [](const TensorShape&, DType) { return Parts{7, 1}; };
  EXPECT_EQ(num_partitions(greedy, {3, 2}, DType::float32), 3);
  // Rank 0 is never partitioned; the partitioner is not even called.
  bool called = false;
  auto spy = [&called](const TensorShape&, DType) {
    called = true;
    return Parts{};
  };
  EXPECT_EQ(num_partitions(spy, TensorShape{}, DType::float32), 1);
  EXPECT_FALSE(called);
  // MinSize on zero rows says 1.
  EXPECT_EQ(num_partitions(MinSizePartitioner(4, 4), {0, 4}, DType::float32), 1);
}

TEST(PartitionerTest, NumPartitionsRefusesResultsOtherThanFirstAxisOnly) {
  auto returning = [](const Parts& p) { return [p](const TensorShape&, DType) { return p; }; };
  for (const Parts& bad : {Parts{2, 2}, Parts{}, Parts{0, 1}, Parts{-1, 1}, Parts{1, 3}}) {
    expect_invalid_argument(
        [&] {
          num_partitions(returning(bad), {8, 4}, DType::float32);
        },
        {"variable_partitioner must return a list whose elements are 1", str_cat("got: ", bad),
         "[8, 4]"});
  }
  // FixedShards on zero rows gives 0 shards, which TF's strategy refuses too.
  expect_invalid_argument(
      [] {
        num_partitions(FixedShardsPartitioner(2), {0, 4}, DType::float32);
      },
      {"got: [0, 1]"});
}

TEST(PartitionerTest, DivLayoutGivesTheFirstShardsOneExtraRow) {
  EXPECT_EQ(div_layout(13, 5), (Parts{3, 3, 3, 2, 2}));  // spec §9
  EXPECT_EQ(div_layout(10, 3), (Parts{4, 3, 3}));
  EXPECT_EQ(div_layout(10, 4), (Parts{3, 3, 2, 2}));  // TF's comment example
  EXPECT_EQ(div_layout(6, 3), (Parts{2, 2, 2}));
  EXPECT_EQ(div_layout(3, 3), (Parts{1, 1, 1}));
  EXPECT_EQ(div_layout(7, 1), (Parts{7}));
  EXPECT_EQ(div_layout(0, 1), (Parts{0}));
  expect_invalid_argument([] { div_layout(5, 0); }, {"num_shards 0", "5 rows"});
  expect_invalid_argument([] { div_layout(3, 5); }, {"num_shards 5", "3 rows"});
  expect_invalid_argument([] { div_layout(-1, 1); }, {"rows >= 0", "-1"});
}

TEST(PartitionerTest, TensorFlowSpellingNamesTheSameClasses) {
  experimental::partitioners::Partitioner p = experimental::partitioners::MaxSizePartitioner(4, 3);
  EXPECT_EQ(p({6, 1}, DType::float32), (Parts{3, 1}));
}

}  // namespace
}  // namespace strata::distribute
