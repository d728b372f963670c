// CommunicationOptions.deterministic_reduction's building blocks: the fixed
// pairwise tree, the all-reduce that sums in it, and the contiguous input
// blocks across workers (TensorFlow has none of them; docs/determinism.md).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/data/dataset.h"
#include "strata/distribute/distributed_dataset.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/distribute/reduce_op.h"
#include "strata/testing/expect_error.h"
#include "strata/testing/logical_devices.h"

namespace strata::distribute {
namespace {

// In float32 1e8 + 1 == 1e8: the order of the additions decides the result.
TEST(PairwiseSum, AddsInTheFixedTreeNotLeftToRight) {
  const std::vector<Tensor> four = {constant(1e8f), constant(1.f), constant(-1e8f), constant(1.f)};
  // (1e8 + 1) + (-1e8 + 1) = 1e8 + -1e8 = 0; left to right would give 1.
  EXPECT_EQ(pairwise_sum(four).item<float>(), 0.f);
  // Three values: mid = 1, so 1e8 + (-1e8 + 1) = 1e8 + -1e8 = 0 (left to right: 1).
  const std::vector<Tensor> three = {constant(1e8f), constant(-1e8f), constant(1.f)};
  EXPECT_EQ(pairwise_sum(three).item<float>(), 0.f);
  EXPECT_EQ(pairwise_sum(std::vector<Tensor>{constant(2.5)}).item<double>(), 2.5);
}

TEST(PairwiseSum, UndefinedOnlyAllOrNothingAndNeverEmpty) {
  EXPECT_FALSE(pairwise_sum(std::vector<Tensor>{Tensor(), Tensor()}).defined());
  testing::expect_invalid_argument([] { pairwise_sum(std::vector<Tensor>{}); }, {"at least one"});
  testing::expect_invalid_argument(
      [] {
        pairwise_sum(std::vector<Tensor>{constant(1.f), Tensor()});
      },
      {"value 1 is undefined", "value 0 is defined"});
}

class DeterministicReductionTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(4); }
  // The strategy turns op determinism on for the process; later tests start without it.
  void TearDown() override { config::disable_op_determinism(); }
};

TEST_F(DeterministicReductionTest, AllReduceSumsInReplicaOrderWithTheTreeOnEveryReplica) {
  MirroredStrategy s({"CPU:0", "CPU:1", "CPU:2", "CPU:3"},
                     {.deterministic_reduction = true, .deterministic_micro_batches = 4});
  EXPECT_EQ(s.deterministic_micro_batches(), 4);
  EXPECT_TRUE(config::is_op_determinism_enabled());
  const std::vector<float> contributions = {1e8f, 1.f, -1e8f, 1.f};
  auto results = s.run([&] {
    ReplicaContext& ctx = *get_replica_context();
    const float mine = contributions[size_t(ctx.replica_id_in_sync_group())];
    // A float list packed together, a float64 and an int64 (summed exactly).
    const std::vector<Tensor> out = ctx.all_reduce(
        ReduceOp::SUM, {constant(std::vector<float>{mine, 2 * mine}, TensorShape({2})),
                        constant(double(mine)), constant(int64_t{3}), constant(mine)});
    return std::vector<double>{out[0].to_vector<float>()[0], out[0].to_vector<float>()[1],
                               out[1].item<double>(), double(out[2].item<int64_t>()),
                               out[3].item<float>()};
  });
  for (const std::vector<double>& r : s.experimental_local_results(results)) {
    // float32: (1e8 + 1) + (-1e8 + 1) = 0 and (2e8 + 2) + (-2e8 + 2) = 0;
    // float64 is exact: 2; int64: 3 * 4 = 12.
    EXPECT_EQ(r, (std::vector<double>{0.0, 0.0, 2.0, 12.0, 0.0}));
  }
  auto means = s.run([] {
    ReplicaContext& ctx = *get_replica_context();
    return ctx.all_reduce(ReduceOp::MEAN, constant(float(ctx.replica_id_in_sync_group())))
        .item<float>();
  });
  for (float m : s.experimental_local_results(means)) EXPECT_EQ(m, 1.5f);  // (0+1+2+3) / 4
}

TEST_F(DeterministicReductionTest, MicroBatchesMustBeAMultipleOfTheReplicas) {
  testing::expect_invalid_argument(
      [] {
        MirroredStrategy s({"CPU:0", "CPU:1", "CPU:2", "CPU:3"},
                           {.deterministic_reduction = true, .deterministic_micro_batches = 2});
      },
      {"multiple of the 4 replicas", "got 2"});
  MirroredStrategy plain({"CPU:0", "CPU:1"});
  EXPECT_EQ(plain.deterministic_micro_batches(), 0);
}

// Worker w of W keeps rows [w B / W, (w + 1) B / W) of every global batch and
// cuts them for its replicas: global replica g gets what it gets in one process.
TEST_F(DeterministicReductionTest, WorkersKeepContiguousBlocksOfEveryGlobalBatch) {
  const data::Dataset global = data::Dataset::range(16).batch(8);
  std::vector<std::vector<int64_t>> batches;
  for (const data::Element& e : distribute_dataset_for_worker(
           global, /*num_workers=*/2, /*worker_index=*/1,
           /*replicas_per_worker=*/2, /*contiguous_worker_blocks=*/true)) {
    batches.push_back(e[0].to_vector<int64_t>());
  }
  EXPECT_EQ(batches, (std::vector<std::vector<int64_t>>{{4, 5}, {6, 7}, {12, 13}, {14, 15}}));
  data::Options files;
  files.experimental_distribute.auto_shard_policy = data::AutoShardPolicy::FILE;
  testing::expect_error(
      [&] { distribute_dataset_for_worker(global.with_options(files), 2, 0, 2, true); },
      ErrorCode::UNIMPLEMENTED, {"every worker to read every global batch", "FILE"});
}

}  // namespace
}  // namespace strata::distribute
