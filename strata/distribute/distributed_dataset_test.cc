#include "strata/distribute/distributed_dataset.h"

#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/operators.h"
#include "strata/testing/logical_devices.h"

namespace strata::distribute {
namespace {

using strata::testing::cpu_device_names;

using data::Dataset;
using data::Element;

class DistributedDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(4); }
};

// The int64 values of every replica's first component, step by step.
std::vector<std::vector<std::vector<int64_t>>> steps_of(const DistributedDataset& dd) {
  std::vector<std::vector<std::vector<int64_t>>> steps;
  for (const PerReplica<Element>& step : dd) {
    std::vector<std::vector<int64_t>> replicas;
    for (const Element& e : step.values()) replicas.push_back(e[0].to_vector<int64_t>());
    steps.push_back(replicas);
  }
  return steps;
}

TEST_F(DistributedDatasetTest, GlobalBatchesAreSplitAmongReplicasIncludingThePartialLastBatch) {
  MirroredStrategy strategy(cpu_device_names(2));
  auto dd = strategy.experimental_distribute_dataset(Dataset::range(14).batch(8));
  using V = std::vector<std::vector<std::vector<int64_t>>>;
  EXPECT_EQ(steps_of(dd), (V{{{0, 1, 2, 3}, {4, 5, 6, 7}}, {{8, 9, 10, 11}, {12, 13}}}));
}

TEST_F(DistributedDatasetTest, TheSeedsSixExampleBatchSplitsFourAndTwo) {
  MirroredStrategy strategy(cpu_device_names(2));
  auto dd = strategy.experimental_distribute_dataset(Dataset::range(6).batch(8));
  using V = std::vector<std::vector<std::vector<int64_t>>>;
  EXPECT_EQ(steps_of(dd), (V{{{0, 1, 2, 3}, {4, 5}}}));
}

// The "Distributed input" guide's partial batch:
//   dataset = tf.data.Dataset.range(6).batch(4, drop_remainder=False)
//   dist_dataset = strategy.experimental_distribute_dataset(dataset)   # 2 replicas
// Current TensorFlow (input_lib's rebatch_fn: a known batch size of 4 gives
// batch_sizes_for_worker(4, 1, 2, 0) == [2, 2], and RebatchDatasetV2 fills each
// piece before starting the next) gives [4, 5] to replica 0 and an empty batch
// to replica 1; the guide's text ([4] and [5]) is the legacy RebatchDataset's
// split, which TF keeps for inputs whose batch size it cannot tell.
TEST_F(DistributedDatasetTest, ThePartialLastBatchFillsTheFirstReplicaAsCurrentTensorFlowDoes) {
  MirroredStrategy strategy(cpu_device_names(2));
  auto dd = strategy.experimental_distribute_dataset(Dataset::range(6).batch(4));
  using V = std::vector<std::vector<std::vector<int64_t>>>;
  EXPECT_EQ(steps_of(dd), (V{{{0, 1}, {2, 3}}, {{4, 5}, {}}}));
}

TEST_F(DistributedDatasetTest, IndivisibleBatchesGiveSizesDifferingByAtMostOne) {
  MirroredStrategy strategy(cpu_device_names(3));
  auto dd = strategy.experimental_distribute_dataset(Dataset::range(7).batch(7));
  using V = std::vector<std::vector<std::vector<int64_t>>>;
  EXPECT_EQ(steps_of(dd), (V{{{0, 1, 2}, {3, 4}, {5, 6}}}));
}

TEST_F(DistributedDatasetTest, ReplicasBeyondTheBatchGetEmptyBatches) {
  MirroredStrategy strategy(cpu_device_names(4));
  auto dd = strategy.experimental_distribute_dataset(Dataset::range(4).batch(2));
  int steps = 0;
  for (const PerReplica<Element>& step : dd) {
    ASSERT_EQ(step.num_components(), 4);
    EXPECT_EQ(step.values()[0][0].shape(), (TensorShape{1}));
    EXPECT_EQ(step.values()[1][0].shape(), (TensorShape{1}));
    EXPECT_EQ(step.values()[2][0].shape(), (TensorShape{0}));
    EXPECT_EQ(step.values()[3][0].shape(), (TensorShape{0}));
    ++steps;
  }
  EXPECT_EQ(steps, 2);
}

TEST_F(DistributedDatasetTest, WhenDataEndsMidStepTheRestGetEmptyBatchesThenIterationEnds) {
  MirroredStrategy strategy(cpu_device_names(2));
  // Per-replica batches of 2 from a function: 3 batches, so step 2 has data for replica 0 only.
  auto dd = strategy.experimental_distribute_datasets_from_function([](const InputContext& ctx) {
    return Dataset::range(6).batch(ctx.get_per_replica_batch_size(4));
  });
  auto it = dd.iter();
  auto first = it.get_next();
  EXPECT_EQ(first.values()[0][0].to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(first.values()[1][0].to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
  auto second = it.get_next();
  EXPECT_EQ(second.values()[0][0].to_vector<int64_t>(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(second.values()[1][0].shape(), (TensorShape{0}));
  EXPECT_EQ(second.values()[1][0].dtype(), int64);
  EXPECT_FALSE(it.get_next_as_optional().has_value());
  EXPECT_THROW(it.get_next(), OutOfRangeError);
}

TEST_F(DistributedDatasetTest, BatchesArePlacedOnTheirReplicasDevices) {
  MirroredStrategy strategy(cpu_device_names(3));
  auto it = strategy.experimental_distribute_dataset(Dataset::range(6).batch(6)).iter();
  auto step = it.get_next();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step.values()[i][0].placement().index(), i);
}

TEST_F(DistributedDatasetTest, FunctionDatasetsGetTheInputContext) {
  MirroredStrategy strategy(cpu_device_names(2));
  std::vector<std::string> seen;
  auto dd = strategy.experimental_distribute_datasets_from_function([&](const InputContext& ctx) {
    seen.push_back(ctx.to_string());
    EXPECT_EQ(ctx.num_replicas_in_sync(), 2);
    return Dataset::from_tensors({constant({1.f}, {1, 1})})
        .repeat(4)
        .unbatch()
        .batch(ctx.get_per_replica_batch_size(2));
  });
  EXPECT_EQ(
      seen,
      (std::vector<std::string>{"tf.distribute.InputContext(input pipeline id 0, total: 1)"}));
  int steps = 0;
  for (const auto& step : dd) {
    EXPECT_EQ(step.values()[0][0].shape(), (TensorShape{1, 1}));
    ++steps;
  }
  EXPECT_EQ(steps, 2);
  EXPECT_THROW(strategy.experimental_distribute_datasets_from_function([](const InputContext& ctx) {
    return Dataset::range(3).batch(ctx.get_per_replica_batch_size(3));
  }),
               InvalidArgumentError);
}

// TensorFlow:
//   def dataset_fn(ctx):
//     b = ctx.get_per_replica_batch_size(4)                  # 2
//     return tf.data.Dataset.range(6).batch(b).shard(
//         ctx.num_input_pipelines, ctx.input_pipeline_id)
//   dd = strategy.distribute_datasets_from_function(dataset_fn)   # 2 replicas, one worker
// One pipeline (id 0 of 1): replicas take its batches in turn: [0 1] | [2 3], then [4 5] | [].
TEST_F(DistributedDatasetTest, DistributeDatasetsFromFunctionIsTheCurrentNameOfTheFunctionForm) {
  MirroredStrategy strategy(cpu_device_names(2));
  auto dataset_fn = [](const InputContext& ctx) {
    const int64_t b = ctx.get_per_replica_batch_size(4);
    return Dataset::range(6).batch(b).shard(ctx.num_input_pipelines(), ctx.input_pipeline_id());
  };
  auto dd = strategy.distribute_datasets_from_function(dataset_fn);
  using V = std::vector<std::vector<std::vector<int64_t>>>;
  EXPECT_EQ(steps_of(dd), (V{{{0, 1}, {2, 3}}, {{4, 5}, {}}}));
  EXPECT_EQ(steps_of(strategy.experimental_distribute_datasets_from_function(dataset_fn)),
            steps_of(dd));
}

// TensorFlow:
//   options = tf.distribute.InputOptions(
//       experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA)
//   dd = strategy.distribute_datasets_from_function(dataset_fn, options)
// dataset_fn runs once per replica with InputContext(input pipeline id r, total: 2); with the
// same dataset_fn as above, replica 0 reads range(6).batch(2).shard(2, 0) = [0 1], [4 5] and
// replica 1 reads shard(2, 1) = [2 3] alone.
TEST_F(DistributedDatasetTest, PerReplicaModeCallsTheFunctionOncePerReplicaOnItsDevice) {
  MirroredStrategy strategy(cpu_device_names(2));
  std::vector<std::string> seen;
  std::vector<int> devices;
  auto dd = strategy.distribute_datasets_from_function(
      [&](const InputContext& ctx) {
        seen.push_back(ctx.to_string());
        devices.push_back(current_device().index());
        const int64_t b = ctx.get_per_replica_batch_size(4);
        return Dataset::range(6).batch(b).shard(ctx.num_input_pipelines(), ctx.input_pipeline_id());
      },
      {.experimental_replication_mode = InputReplicationMode::PER_REPLICA});
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "tf.distribute.InputContext(input pipeline id 0, total: 2)",
                      "tf.distribute.InputContext(input pipeline id 1, total: 2)"}));
  EXPECT_EQ(devices, (std::vector<int>{0, 1}));
  using V = std::vector<std::vector<std::vector<int64_t>>>;
  EXPECT_EQ(steps_of(dd), (V{{{0, 1}, {2, 3}}, {{4, 5}, {}}}));
  auto step = dd.iter().get_next();
  EXPECT_EQ(step.values()[1][0].placement().index(), 1);
  // Replica pipelines of different static batch leave that dimension unknown in the spec.
  auto uneven = strategy.distribute_datasets_from_function(
      [](const InputContext& ctx) {
        return Dataset::range(8).batch(ctx.input_pipeline_id() + 1, /*drop_remainder=*/true);
      },
      {.experimental_replication_mode = InputReplicationMode::PER_REPLICA});
  EXPECT_EQ(uneven.element_spec()[0].shape, (TensorShape{-1}));
}

// TensorFlow:
//   ds = tf.data.Dataset.from_tensor_slices(tf.zeros([16, 3])).batch(8, drop_remainder=True)
//   strategy.experimental_distribute_dataset(ds).element_spec
//   # PerReplicaSpec(TensorSpec(shape=(4, 3), dtype=tf.float32), TensorSpec(shape=(4, 3), ...))
// Without drop_remainder (or with a global batch the replicas cannot split evenly) the
// per-replica batch dimension is None.
TEST_F(DistributedDatasetTest, ElementSpecKeepsTheStaticPerReplicaBatchOfADroppedRemainder) {
  MirroredStrategy strategy(cpu_device_names(2));
  const Dataset rows = Dataset::from_tensor_slices({zeros({16, 3})});
  auto dd = strategy.experimental_distribute_dataset(rows.batch(8, /*drop_remainder=*/true));
  EXPECT_EQ(dd.element_spec()[0].shape, (TensorShape{4, 3}));
  int steps = 0;
  for (const PerReplica<Element>& step : dd) {
    for (const Element& e : step.values()) EXPECT_EQ(e[0].shape(), (TensorShape{4, 3}));
    ++steps;
  }
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(strategy.experimental_distribute_dataset(rows.batch(8)).element_spec()[0].shape,
            (TensorShape{-1, 3}));
  EXPECT_EQ(strategy.experimental_distribute_dataset(rows.batch(7, true)).element_spec()[0].shape,
            (TensorShape{-1, 3}));
}

// TensorFlow:
//   dd = strategy.experimental_distribute_dataset(tf.data.Dataset.range(14).batch(8))
//   dd.cardinality()                        # 2 steps: [0..3] | [4..7], then [8..11] | [12 13]
//   dd.reduce(tf.constant(0, tf.int64),
//             lambda state, x: state + strategy.reduce("SUM", x, axis=0))   # 0 + ... + 13 = 91
TEST_F(DistributedDatasetTest, CardinalityCountsStepsAndReduceFoldsThem) {
  MirroredStrategy strategy(cpu_device_names(2));
  auto dd = strategy.experimental_distribute_dataset(Dataset::range(14).batch(8));
  EXPECT_EQ(dd.cardinality(), 2);
  const Tensor total =
      dd.reduce(constant(int64_t{0}), [&](const Tensor& state, const PerReplica<Element>& x) {
        std::vector<Tensor> firsts;
        for (const Element& e : x.values()) firsts.push_back(e[0]);
        return state + strategy.reduce("SUM", PerReplica<Tensor>(firsts), 0);
      });
  EXPECT_EQ(total.item<int64_t>(), 91);
  int64_t steps =
      dd.reduce(int64_t{0}, [](int64_t n, const PerReplica<Element>&) { return n + 1; });
  EXPECT_EQ(steps, dd.cardinality());
  // Endless and data-dependent inputs.
  EXPECT_EQ(
      strategy.experimental_distribute_dataset(Dataset::range(14).batch(8).repeat()).cardinality(),
      data::INFINITE_CARDINALITY);
  auto filtered = Dataset::range(14).filter([](const Element&) { return true; }).batch(8);
  EXPECT_EQ(strategy.experimental_distribute_dataset(filtered).cardinality(),
            data::UNKNOWN_CARDINALITY);
  // The function form: 3 per-replica batches of 2 over 2 replicas is 2 steps (the second
  // partial); per replica, the longest pipeline's 2 batches.
  auto from_fn = strategy.distribute_datasets_from_function(
      [](const InputContext&) { return Dataset::range(6).batch(2); });
  EXPECT_EQ(from_fn.cardinality(), 2);
  auto per_replica = strategy.distribute_datasets_from_function(
      [](const InputContext& ctx) {
        return Dataset::range(6).batch(2).shard(ctx.num_input_pipelines(), ctx.input_pipeline_id());
      },
      {.experimental_replication_mode = InputReplicationMode::PER_REPLICA});
  EXPECT_EQ(per_replica.cardinality(), 2);
}

TEST_F(DistributedDatasetTest, UnbatchedDatasetsCannotBeRebatched) {
  MirroredStrategy strategy(cpu_device_names(2));
  try {
    strategy.experimental_distribute_dataset(Dataset::range(4));
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Cannot rebatch dataset"), std::string::npos) << e.what();
  }
  EXPECT_THROW(strategy.experimental_distribute_dataset(
                   Dataset::range(4).batch(2),
                   {.experimental_replication_mode = InputReplicationMode::PER_REPLICA}),
               UnimplementedError);
}

TEST_F(DistributedDatasetTest, OneReplicaGetsTheDatasetAsItIs) {
  auto dd = default_strategy().experimental_distribute_dataset(Dataset::range(5).batch(2));
  using V = std::vector<std::vector<std::vector<int64_t>>>;
  EXPECT_EQ(steps_of(dd), (V{{{0, 1}}, {{2, 3}}, {{4}}}));
}

TEST_F(DistributedDatasetTest, MakeNumpyDatasetSlicesTheArray) {
  MirroredStrategy strategy(cpu_device_names(2));
  Dataset ds = strategy.experimental_make_numpy_dataset(constant(std::vector<float>(10, 1.f)));
  EXPECT_EQ(ds.element_spec()[0].shape, TensorShape{});
  auto dd = strategy.experimental_distribute_dataset(ds.batch(2));
  int steps = 0;
  for (const auto& step : dd) {
    EXPECT_EQ(step.values()[0][0].to_vector<float>(), std::vector<float>{1.f});
    EXPECT_EQ(step.values()[1][0].to_vector<float>(), std::vector<float>{1.f});
    ++steps;
  }
  EXPECT_EQ(steps, 5);
}

// dataset = tf.data.Dataset.from_tensor_slices({"feature": x, "label": y}).batch(4)
// dist_dataset = strategy.experimental_distribute_dataset(dataset)
// def step_fn(inputs):
//   return inputs["feature"] + inputs["label"]
// for inputs in dist_dataset: strategy.run(step_fn, args=(inputs,))
TEST_F(DistributedDatasetTest, DictElementsKeepTheirNamesOnEveryReplica) {
  MirroredStrategy strategy(cpu_device_names(2));
  const Tensor x = constant(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  const Tensor y = constant(std::vector<int64_t>{10, 11, 12, 13, 14, 15, 16, 17});
  auto dataset = Dataset::from_tensor_slices({{"feature", x}, {"label", y}}).batch(4);
  auto dist_dataset = strategy.experimental_distribute_dataset(dataset);
  std::vector<std::vector<int64_t>> sums;
  for (const PerReplica<Element>& inputs : dist_dataset) {
    PerReplica<Tensor> out =
        strategy.run([](const Element& in) { return in["feature"] + in["label"]; }, inputs);
    for (const Tensor& t : strategy.experimental_local_results(out))
      sums.push_back(t.to_vector<int64_t>());
  }
  EXPECT_EQ(sums, (std::vector<std::vector<int64_t>>{{10, 12}, {14, 16}, {18, 20}, {22, 24}}));

  // A replica left without data gets a dummy batch under the same names.
  auto short_dd = strategy.experimental_distribute_dataset(
      Dataset::from_tensor_slices({{"feature", x}, {"label", y}}).take(1).batch(1));
  auto it = short_dd.iter();
  PerReplica<Element> step = it.get_next();
  EXPECT_EQ(step.values()[0]["label"].to_vector<int64_t>(), std::vector<int64_t>{10});
  EXPECT_EQ(step.values()[1]["label"].shape(), TensorShape({0}));

  // distribute_datasets_from_function: each pipeline's dict elements as they are.
  auto from_fn = strategy.distribute_datasets_from_function([&](const InputContext& ctx) {
    return Dataset::from_tensor_slices({{"feature", x}, {"label", y}})
        .batch(ctx.get_per_replica_batch_size(4));
  });
  PerReplica<Element> first = from_fn.iter().get_next();
  EXPECT_EQ(first.values()[1].names(), (std::vector<std::string>{"feature", "label"}));
}

}  // namespace
}  // namespace strata::distribute
