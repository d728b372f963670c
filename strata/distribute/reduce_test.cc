#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/collective/collectives.h"
#include "strata/core/config.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/distribute/reduce_op.h"
#include "strata/ops/array_ops.h"
#include "strata/testing/logical_devices.h"

namespace strata::distribute {
namespace {

TEST(ReduceOp, ConvertsToTheCollectiveOpOfTheSameName) {
  EXPECT_EQ(to_collective(ReduceOp::SUM), collective::ReduceOp::SUM);
  EXPECT_EQ(to_collective(ReduceOp::MEAN), collective::ReduceOp::MEAN);
}

class ReduceTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(2); }
};

// The spec's worked example (§3.2): global batch 8 on 2 replicas, values 0..7.
TEST_F(ReduceTest, SumAndMeanWithAndWithoutAxisMatchTheWorkedExample) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  PerReplica<Tensor> v({constant({0.f, 1.f, 2.f, 3.f}), constant({4.f, 5.f, 6.f, 7.f})});
  EXPECT_EQ(strategy.reduce(ReduceOp::SUM, v, std::nullopt).to_vector<float>(),
            (std::vector<float>{4, 6, 8, 10}));
  EXPECT_EQ(strategy.reduce(ReduceOp::MEAN, v, std::nullopt).to_vector<float>(),
            (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(strategy.reduce(ReduceOp::SUM, v, 0).item<float>(), 28.f);
  EXPECT_EQ(strategy.reduce(ReduceOp::MEAN, v, 0).item<float>(), 3.5f);
  EXPECT_EQ(strategy.reduce(ReduceOp::MEAN, v, -1).item<float>(), 3.5f);
}

TEST_F(ReduceTest, MeanAlongTheBatchWeighsUnequalReplicaBatchesCorrectly) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  // The seed's last partial batch of 6 split 4 + 2: mean 15 / 6, not the mean of means.
  PerReplica<Tensor> v({constant({0.f, 1.f, 2.f, 3.f}), constant({4.f, 5.f})});
  EXPECT_FLOAT_EQ(strategy.reduce(ReduceOp::MEAN, v, 0).item<float>(), 2.5f);
  EXPECT_THROW(strategy.reduce(ReduceOp::SUM, v, std::nullopt), InvalidArgumentError);
  // An empty replica batch contributes nothing to numerator or denominator.
  PerReplica<Tensor> with_empty({constant({1.f, 3.f}), zeros({0})});
  EXPECT_FLOAT_EQ(strategy.reduce(ReduceOp::MEAN, with_empty, 0).item<float>(), 2.f);
  // Integer values: true division.
  PerReplica<Tensor> ints({constant({1, 2}), constant({4})});
  Tensor mean = strategy.reduce(ReduceOp::MEAN, ints, 0);
  EXPECT_EQ(mean.dtype(), float64);
  EXPECT_DOUBLE_EQ(mean.item<double>(), 7.0 / 3.0);
}

TEST_F(ReduceTest, AxisOutOfRangeAndNonDistributedSumAreErrors) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  PerReplica<Tensor> v({constant({1.f}), constant({2.f})});
  try {
    strategy.reduce(ReduceOp::SUM, v, 1);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("`axis` = 1 out of range for `value` with rank 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(strategy.reduce(ReduceOp::SUM, constant(1.f), std::nullopt), InvalidArgumentError);
  EXPECT_EQ(strategy.reduce(ReduceOp::MEAN, constant(5.f), std::nullopt).item<float>(), 5.f);
  EXPECT_THROW(strategy.reduce(ReduceOp::MEAN, constant({1.f, 2.f}), 3), InvalidArgumentError);
  EXPECT_EQ(default_strategy().reduce(ReduceOp::SUM, constant({1.f, 2.f}), 0).item<float>(), 3.f);
}

// TensorFlow (2 replicas; replica 0: [[0, 1, 2], [3, 4, 5]], replica 1: [[6, 7, 8]]):
//   strategy.reduce("SUM", v, axis=(0, 1))    # 0 + 1 + ... + 8 = 36
//   strategy.reduce("MEAN", v, axis=[0, 1])   # 36 / (6 + 3) = 4
//   strategy.reduce("sum", v, axis=0)         # column sums [9, 12, 15]
//   strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=0)   # [9, 12, 15] / 3 = [3, 4, 5]
TEST_F(ReduceTest, AxisMayBeATupleOfAxesAndTheOpItsName) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  PerReplica<Tensor> v(
      {constant({0.f, 1.f, 2.f, 3.f, 4.f, 5.f}, {2, 3}), constant({6.f, 7.f, 8.f}, {1, 3})});
  EXPECT_EQ(strategy.reduce("SUM", v, {0, 1}).item<float>(), 36.f);
  EXPECT_EQ(strategy.reduce("MEAN", v, std::vector<int64_t>{0, 1}).item<float>(), 4.f);
  EXPECT_EQ(strategy.reduce("sum", v, 0).to_vector<float>(), (std::vector<float>{9, 12, 15}));
  EXPECT_EQ(strategy.reduce(ReduceOp::MEAN, v, 0).to_vector<float>(),
            (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(strategy.reduce(std::string("Mean"), v, {-1, 0}).item<float>(), 4.f);
  EXPECT_THROW(strategy.reduce("MAX", v, 0), InvalidArgumentError);
  EXPECT_THROW(strategy.reduce("SUM", v, {0, 0}), InvalidArgumentError);
  EXPECT_THROW(strategy.reduce("SUM", v, {0, 2}), InvalidArgumentError);
  // A plain tensor on one replica: MEAN along both axes of [[1, 2], [3, 6]] is 3.
  EXPECT_EQ(default_strategy()
                .reduce("MEAN", constant({1.f, 2.f, 3.f, 6.f}, {2, 2}), {0, 1})
                .item<float>(),
            3.f);
  // ReplicaContext.all_reduce takes the op's name too.
  auto r = strategy.run([] { return get_replica_context()->all_reduce("MEAN", constant(2.f)); });
  EXPECT_EQ(r.values()[1].item<float>(), 2.f);
}

// TensorFlow:
//   m = Mirrored value 4. on both replicas (e.g. strategy.extended.update's result)
//   strategy.reduce("MEAN", m, axis=None)   # 4.: the value itself
//   strategy.reduce("SUM", m, axis=None)    # 8.: the copies add up
//   strategy.reduce("MEAN", mirrored [1, 3], axis=0)   # 2.
TEST_F(ReduceTest, AMirroredValueReducesAsTensorFlowDoes) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  Mirrored<Tensor> m({constant(4.f), constant(4.f)});
  EXPECT_EQ(strategy.reduce("MEAN", m, std::nullopt).item<float>(), 4.f);
  EXPECT_EQ(strategy.reduce(ReduceOp::SUM, m, std::nullopt).item<float>(), 8.f);
  Mirrored<Tensor> rows({constant({1.f, 3.f}), constant({1.f, 3.f})});
  EXPECT_EQ(strategy.reduce("MEAN", rows, 0).item<float>(), 2.f);
  EXPECT_EQ(strategy.reduce("SUM", rows, 0).item<float>(), 8.f);
}

TEST_F(ReduceTest, ReduceOfRunResultsCombinesEveryReplica) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  auto r = strategy.run([] {
    return constant(static_cast<float>(get_replica_context()->replica_id_in_sync_group() + 1));
  });
  EXPECT_EQ(strategy.reduce(ReduceOp::SUM, r, std::nullopt).item<float>(), 3.f);
  EXPECT_EQ(strategy.reduce(ReduceOp::MEAN, r, std::nullopt).item<float>(), 1.5f);
  EXPECT_THROW(strategy.run([&] { strategy.reduce(ReduceOp::SUM, r, std::nullopt); }),
               FailedPreconditionError);
}

}  // namespace
}  // namespace strata::distribute
