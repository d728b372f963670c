#include "strata/data/graph.h"

#include <gtest/gtest.h>

#include <fstream>

#include "strata/base/errors.h"
#include "strata/testing/files.h"

namespace strata::data {
namespace {

using Ints = std::vector<int64_t>;

std::vector<Ints> rows(const Dataset& ds) {
  std::vector<Ints> out;
  for (const Element& e : ds) out.push_back(e[0].to_vector<int64_t>());
  return out;
}
std::vector<std::string> strings(const Dataset& ds) {
  std::vector<std::string> out;
  for (const Element& e : ds) out.push_back(e[0].item<std::string>());
  return out;
}

class DatasetGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 4; ++i) {
      files_.push_back(dir_.file("f" + std::to_string(i) + ".txt"));
      std::ofstream(files_.back()) << "line" << i << "a\nline" << i << "b\n";
    }
  }
  Dataset file_pipeline() const {
    return Dataset::list_files(dir_.file("*.txt"), {.shuffle = false})
        .interleave([](const Element& f) { return TextLineDataset({f[0].item<std::string>()}); },
                    {.cycle_length = 1})
        .map([](const Element& e) { return e; })
        .batch(2)
        .prefetch(AUTOTUNE);
  }
  strata::testing::TempDir dir_{"strata_graph_test"};
  std::vector<std::string> files_;
};

TEST_F(DatasetGraph, SourceFilesWalkThroughTransformationsAndInterleave) {
  EXPECT_EQ(source_files(file_pipeline()), files_);
  auto direct = TextLineDataset({files_[0], files_[1]}).shuffle(3).take(2);
  EXPECT_EQ(source_files(direct), (std::vector<std::string>{files_[0], files_[1]}));
  EXPECT_TRUE(source_files(Dataset::range(3).batch(2)).empty());
}

TEST_F(DatasetGraph, StaticBatchSizeIsTheNearestBatch) {
  EXPECT_EQ(static_batch_size(file_pipeline()), 2);
  auto info = find_batch(Dataset::range(10).padded_batch(4, {.drop_remainder = true}).repeat());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->kind, NodeKind::kPaddedBatch);
  EXPECT_EQ(info->batch_size, 4);
  EXPECT_TRUE(info->drop_remainder);
  EXPECT_EQ(static_batch_size(Dataset::range(10)), -1);
  EXPECT_FALSE(find_batch(Dataset::range(10).batch(4).unbatch()).has_value());
  // Without a batch node: the common static leading dimension of the spec.
  EXPECT_EQ(static_batch_size(Dataset::from_tensors({Tensor::allocate(float32, {3, 2})})), 3);
}

TEST_F(DatasetGraph, FileShardingGivesEachWorkerEveryNthFile) {
  auto mine = shard_by_files(file_pipeline(), 2, 1);
  EXPECT_EQ(source_files(mine), (std::vector<std::string>{files_[1], files_[3]}));
  std::vector<std::string> lines;
  for (const Element& e : mine)
    for (const auto& s : e[0].to_vector<std::string>()) lines.push_back(s);
  EXPECT_EQ(lines, (std::vector<std::string>{"line1a", "line1b", "line3a", "line3b"}));
  EXPECT_EQ(mine.kind(), NodeKind::kPrefetch);
  // The original dataset is untouched.
  EXPECT_EQ(source_files(file_pipeline()), files_);
}

TEST_F(DatasetGraph, FileShardingOfAReaderReplacesItsFileList) {
  auto ds = TextLineDataset(files_).batch(3);
  EXPECT_EQ(source_files(shard_by_files(ds, 3, 0)),
            (std::vector<std::string>{files_[0], files_[3]}));
  EXPECT_EQ(source_files(shard_by_files(ds, 1, 0)), files_);
}

TEST_F(DatasetGraph, AWorkerWithoutFilesFailsWhenIterated) {
  auto ds = shard_by_files(TextLineDataset({files_[0]}), 2, 1);
  try {
    strings(ds);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("# elems = 1, # shards = 2"), std::string::npos)
        << e.what();
  }
}

TEST_F(DatasetGraph, FileShardingOfAnUnshardableSourceIsNotFound) {
  try {
    shard_by_files(Dataset::range(8).batch(2), 2, 0);
    FAIL();
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("Found an unshardable source dataset: RangeDataset"),
              std::string::npos);
  }
}

TEST_F(DatasetGraph, AutoFallsBackToDataSharding) {
  auto ds = Dataset::range(8).batch(2).prefetch(1);
  auto w1 = auto_shard(ds, AutoShardPolicy::AUTO, 2, 1, 2);
  EXPECT_EQ(rows(w1), (std::vector<Ints>{{2, 3}, {6, 7}}));
  EXPECT_EQ(w1.kind(), NodeKind::kPrefetch);
  EXPECT_EQ(rows(auto_shard(ds, AutoShardPolicy::OFF, 2, 1, 2)).size(), 4u);
  EXPECT_THROW(auto_shard(ds, AutoShardPolicy::FILE, 2, 1, 2), NotFoundError);
  EXPECT_THROW(auto_shard(ds, AutoShardPolicy::AUTO, 2, 2, 2), InvalidArgumentError);
}

TEST_F(DatasetGraph, DataShardingRewritesTheRebatchToTheLegacyForm) {
  // Spec §5.3c: B=4 on 3 replicas is [2, 1, 1] under OFF/FILE but [2, 2, 0] under DATA.
  auto ds = Dataset::range(4).batch(4).rebatch({2, 1, 1}).prefetch(2);
  EXPECT_EQ(rows(ds), (std::vector<Ints>{{0, 1}, {2}, {3}}));
  auto data = shard_by_data(ds, 1, 0, 3);
  EXPECT_EQ(rows(data), (std::vector<Ints>{{0, 1}, {2, 3}, {}}));
}

TEST_F(DatasetGraph, DataShardingRequiresAnElementPerShard) {
  EXPECT_THROW(rows(shard_by_data(Dataset::range(1).batch(1), 2, 1, 0)), InvalidArgumentError);
}

TEST_F(DatasetGraph, HintShardingRewritesShardHints) {
  auto ds = Dataset::range(6).shard(SHARD_HINT, 0).batch(10);
  EXPECT_EQ(rows(auto_shard(ds, AutoShardPolicy::HINT, 3, 2, 3)), (std::vector<Ints>{{2, 5}}));
}

TEST_F(DatasetGraph, RewriteReplacesNodesBottomUp) {
  auto ds = Dataset::range(10).take(5).batch(2);
  auto doubled_take = rewrite(ds, [](const Dataset& d) -> std::optional<Dataset> {
    if (d.kind() == NodeKind::kTake) return d.inputs()[0].take(8);
    return std::nullopt;
  });
  EXPECT_EQ(rows(doubled_take), (std::vector<Ints>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(rows(ds).size(), 3u);
  auto rebatched =
      apply_before_prefetch(ds.prefetch(1), [](const Dataset& d) { return d.rebatch({1}); });
  EXPECT_EQ(rebatched.kind(), NodeKind::kPrefetch);
  EXPECT_EQ(rebatched.inputs()[0].kind(), NodeKind::kRebatch);
  EXPECT_EQ(node_rebatch_sizes(rebatched.inputs()[0]), (Ints{1}));
}

}  // namespace
}  // namespace strata::data
