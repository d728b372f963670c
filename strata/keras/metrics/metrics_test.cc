#include "strata/keras/metrics/metrics.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/testing/logical_devices.h"

namespace strata::keras {
namespace {

float result_of(const metrics::Metric& m) { return m.result().item<float>(); }

TEST(Mean, AccumulatesAcrossCallsWithAndWithoutWeights) {
  auto m = metrics::Mean();
  EXPECT_EQ(m->name(), "mean");
  EXPECT_EQ(result_of(*m), 0.0f);  // nothing counted yet: divide_no_nan
  m->update_state(constant<float>({1, 3, 5, 7}));
  EXPECT_FLOAT_EQ(result_of(*m), 4.0f);
  m->update_state(constant<float>({2}), constant<float>({3}));  // total 16 + 6, count 4 + 3
  EXPECT_FLOAT_EQ(result_of(*m), 22.0f / 7.0f);
  m->update_state(constant(10));  // an int scalar is cast to float32
  EXPECT_FLOAT_EQ(result_of(*m), 32.0f / 8.0f);
  ASSERT_EQ(m->variables().size(), 2u);
  EXPECT_EQ(m->variables()[0].name(), "mean/total");
  EXPECT_EQ(m->variables()[1].name(), "mean/count");
  EXPECT_EQ(m->variables()[0].synchronization(), VariableSynchronization::ON_READ);
  EXPECT_EQ(m->variables()[0].aggregation(), VariableAggregation::SUM);
  m->reset_state();
  EXPECT_EQ(result_of(*m), 0.0f);
  m->update_state(constant<float>({5}));
  EXPECT_FLOAT_EQ(result_of(*m), 5.0f);
}

TEST(Mean, WeightsOfLowerRankAreExpandedAndBroadcast) {
  auto m = metrics::Mean();
  // values [2, 3], weights [2] -> [2, 1] -> broadcast: total 1*(1+2+3) + 2*(4+5+6), count 3 + 6.
  m->update_state(constant<float>({1, 2, 3, 4, 5, 6}, {2, 3}), constant<float>({1, 2}));
  EXPECT_FLOAT_EQ(result_of(*m), 36.0f / 9.0f);
}

TEST(Mean, ValuesAreAveragedDownToTheWeightsRankWhenTheyCannotBroadcast) {
  auto m = metrics::Mean();
  // values [2, 2, 2], weights [2]: values become their per-row means 2.5 and 6.5.
  m->update_state(constant<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}), constant<float>({1, 3}));
  EXPECT_FLOAT_EQ(result_of(*m), (2.5f + 3 * 6.5f) / 4.0f);
  EXPECT_THROW(m->update_state(constant<float>({1, 2}), constant<float>({1, 2, 3})),
               InvalidArgumentError);
}

TEST(Mean, TheYTrueYPredFormIsAnError) {
  auto m = metrics::Mean();
  metrics::Metric& base = *m;
  EXPECT_THROW(base.update_state(constant<float>({1}), constant<float>({1})), InvalidArgumentError);
}

TEST(Sum, AddsWeightedValues) {
  auto s = metrics::Sum({.name = "total_loss"});
  s->update_state(constant<float>({1, 2, 3}));
  s->update_state(constant<float>({4, 5}), constant<float>({0.5f, 2}));
  EXPECT_FLOAT_EQ(result_of(*s), 6.0f + 2.0f + 10.0f);
  EXPECT_EQ(s->variables().size(), 1u);
  s->reset_state();
  EXPECT_EQ(result_of(*s), 0.0f);
}

TEST(Accuracy, ExactMatchesOverSeveralBatches) {
  auto acc = metrics::Accuracy();
  acc->update_state(constant<int64_t>({1, 2, 3, 4}), constant<float>({1, 2, 0, 4}));
  EXPECT_FLOAT_EQ(result_of(*acc), 0.75f);
  acc->update_state(constant<int64_t>({1, 1}), constant<float>({0, 0}), constant<float>({1, 3}));
  EXPECT_FLOAT_EQ(result_of(*acc), 3.0f / 8.0f);
  acc->reset_state();
  acc->update_state(constant<float>({1}, {1, 1}), constant<float>({1}));  // y_true [1, 1] squeezed
  EXPECT_FLOAT_EQ(result_of(*acc), 1.0f);
}

TEST(BinaryAccuracy, ThresholdsPredictionsAndAveragesTheLastAxis) {
  auto acc = metrics::BinaryAccuracy();
  EXPECT_EQ(acc->threshold(), 0.5);
  // row 0: (1 vs 0.9 -> 1) ok, (0 vs 0.5 -> 0) ok; row 1: (1 vs 0.2) no, (1 vs 0.6) ok
  acc->update_state(constant<float>({1, 0, 1, 1}, {2, 2}),
                    constant<float>({0.9f, 0.5f, 0.2f, 0.6f}, {2, 2}));
  EXPECT_FLOAT_EQ(result_of(*acc), 0.75f);
  // weights per row: row 0 mean 1.0 weight 0, row 1 mean 0.5 weight 1 -> cumulative (1.5 + 0.5) /
  // (2 + 1)
  acc->update_state(constant<float>({1, 0, 1, 1}, {2, 2}),
                    constant<float>({0.9f, 0.5f, 0.2f, 0.6f}, {2, 2}), constant<float>({0, 1}));
  EXPECT_FLOAT_EQ(result_of(*acc), 2.0f / 3.0f);
  auto logits = metrics::BinaryAccuracy({.threshold = 0.0});
  logits->update_state(constant<float>({1, 0}, {2, 1}), constant<float>({0.3f, -2.0f}, {2, 1}));
  EXPECT_FLOAT_EQ(result_of(*logits), 1.0f);
}

TEST(CategoricalAccuracy, ComparesArgmaxes) {
  auto acc = metrics::CategoricalAccuracy();
  acc->update_state(constant<float>({0, 1, 0, 1, 0, 0}, {2, 3}),
                    constant<float>({0.1f, 0.7f, 0.2f, 0.1f, 0.8f, 0.1f}, {2, 3}));
  EXPECT_FLOAT_EQ(result_of(*acc), 0.5f);
  acc->update_state(constant<float>({0, 0, 1}, {1, 3}), constant<float>({0.f, 1.f, 2.f}, {1, 3}),
                    constant<float>({2}));
  EXPECT_FLOAT_EQ(result_of(*acc), 3.0f / 4.0f);
}

TEST(SparseCategoricalAccuracy, LabelsOfShapeBatchOrBatchByOne) {
  auto acc = metrics::SparseCategoricalAccuracy();
  EXPECT_EQ(acc->name(), "sparse_categorical_accuracy");
  Tensor logits = constant<float>({0.1f, 2.0f, -1.0f, 3.0f, 0.0f, 0.5f, 0.2f, 0.1f, 0.9f}, {3, 3});
  acc->update_state(constant<int64_t>({1, 0, 0}), logits);  // argmax 1, 0, 2
  EXPECT_FLOAT_EQ(result_of(*acc), 2.0f / 3.0f);
  acc->update_state(constant<int32_t>({1, 1, 2}, {3, 1}), logits);  // [b, 1] int32 labels: 2 of 3
  EXPECT_FLOAT_EQ(result_of(*acc), 4.0f / 6.0f);
  // float labels; matches 0, 1, 1 weighted 1, 0, 5
  acc->update_state(constant<float>({2.0f, 0.0f, 2.0f}), logits, constant<float>({1, 0, 5}));
  EXPECT_FLOAT_EQ(result_of(*acc), 9.0f / 12.0f);
  acc->reset_state();
  EXPECT_EQ(result_of(*acc), 0.0f);
  EXPECT_THROW(acc->update_state(constant<int64_t>({1, 0}), logits), InvalidArgumentError);
}

TEST(MetricCall, UpdatesThenReturnsTheResultAsKerasMetricCall) {
  // eval_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name='eval_accuracy')
  // eval_accuracy(labels, predictions)   -> 2/3 (argmaxes 1, 0, 2 against 1, 0, 0)
  // eval_accuracy(labels2, predictions)  -> 3/6, accumulated across calls
  auto eval_accuracy = metrics::SparseCategoricalAccuracy({.name = "eval_accuracy"});
  Tensor predictions =
      constant<float>({0.1f, 2.0f, -1.0f, 3.0f, 0.0f, 0.5f, 0.2f, 0.1f, 0.9f}, {3, 3});
  Tensor first = (*eval_accuracy)(constant<int64_t>({1, 0, 0}), predictions);
  EXPECT_FLOAT_EQ(first.item<float>(), 2.0f / 3.0f);
  Tensor second = (*eval_accuracy)(constant<int64_t>({0, 1, 2}), predictions);
  EXPECT_FLOAT_EQ(second.item<float>(), 3.0f / 6.0f);
  EXPECT_FLOAT_EQ(result_of(*eval_accuracy), 3.0f / 6.0f);
  // eval_accuracy(labels, predictions, sample_weight=[0, 0, 1])  -> (3 + 1) / (6 + 1)
  Tensor weighted =
      (*eval_accuracy)(constant<int64_t>({0, 0, 2}), predictions, constant<float>({0, 0, 1}));
  EXPECT_FLOAT_EQ(weighted.item<float>(), 4.0f / 7.0f);
  // Through the base class, as a compiled metric is held.
  metrics::Metric& base = *eval_accuracy;
  EXPECT_FLOAT_EQ(
      base(constant<int64_t>({1}), constant<float>({0.f, 1.f, 0.f}, {1, 3})).item<float>(),
      5.0f / 8.0f);

  // train_loss = tf.keras.metrics.Mean(name='train_loss')
  // train_loss(2.0); train_loss(4.0)      -> 3.0
  // train_loss([1.0, 9.0], sample_weight=[1, 0])  -> (2 + 4 + 1) / 3
  auto train_loss = metrics::Mean({.name = "train_loss"});
  EXPECT_FLOAT_EQ((*train_loss)(constant(2.0f)).item<float>(), 2.0f);
  EXPECT_FLOAT_EQ((*train_loss)(constant(4.0f)).item<float>(), 3.0f);
  EXPECT_FLOAT_EQ(
      (*train_loss)(constant<float>({1.0f, 9.0f}), constant<float>({1, 0})).item<float>(),
      7.0f / 3.0f);
  // total = tf.keras.metrics.Sum(); total([1., 2.]); total(3.)  -> 6.0
  auto total = metrics::Sum();
  (*total)(constant<float>({1.0f, 2.0f}));
  EXPECT_FLOAT_EQ((*total)(constant(3.0f)).item<float>(), 6.0f);
}

TEST(SparseCategoricalAccuracy, PerExampleFunctionKeepsTheLabelShape) {
  Tensor m = metrics::sparse_categorical_accuracy(constant<float>({1, 0}, {2, 1}),
                                                  constant<float>({0, 1, 1, 0}, {2, 2}));
  EXPECT_EQ(m.shape(), (TensorShape{2, 1}));
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{1, 1}));
}

TEST(SparseTopKCategoricalAccuracy, TargetAmongTheKHighestScores) {
  auto top2 = metrics::SparseTopKCategoricalAccuracy({.k = 2});
  EXPECT_EQ(top2->k(), 2);
  // row 0 scores 0.1 0.5 0.4 label 2: rank 2 -> in; row 1 0.6 0.3 0.1 label 2: rank 3 -> out;
  // row 2 ties 0.2 0.4 0.4 label 1: nothing strictly larger -> in.
  Tensor scores = constant<float>({0.1f, 0.5f, 0.4f, 0.6f, 0.3f, 0.1f, 0.2f, 0.4f, 0.4f}, {3, 3});
  top2->update_state(constant<int64_t>({2, 2, 1}), scores);
  EXPECT_FLOAT_EQ(result_of(*top2), 2.0f / 3.0f);
  auto top1 = metrics::SparseTopKCategoricalAccuracy({.k = 1});
  top1->update_state(constant<int64_t>({1, 0, 2}, {3, 1}),
                     scores);  // ties: label 2 in row 2 counts
  EXPECT_FLOAT_EQ(result_of(*top1), 1.0f);
  auto top5 = metrics::SparseTopKCategoricalAccuracy();
  EXPECT_EQ(top5->k(), 5);
  top5->update_state(constant<int64_t>({2, 0}),
                     constant<float>({0.f, 1.f, NAN, 0.f, 0.f, 0.f}, {2, 3}));
  EXPECT_FLOAT_EQ(result_of(*top5), 0.5f);  // a non-finite row never matches
  EXPECT_THROW(metrics::SparseTopKCategoricalAccuracy({.k = 0}), InvalidArgumentError);
}

TEST(MeanSquaredErrorMetric, RunningMeanOfPerExampleErrors) {
  auto mse = metrics::MeanSquaredError();
  mse->update_state(constant<float>({0, 1, 2, 2}, {2, 2}),
                    constant<float>({1, 1, 2, 0}, {2, 2}));  // 0.5, 2
  EXPECT_FLOAT_EQ(result_of(*mse), 1.25f);
  mse->update_state(constant<float>({0, 0}, {1, 2}), constant<float>({3, 3}, {1, 2}),
                    constant<float>({2}));  // 9 x2
  EXPECT_FLOAT_EQ(result_of(*mse), (0.5f + 2.0f + 18.0f) / 4.0f);
  auto mae = metrics::MeanAbsoluteError();
  mae->update_state(constant<float>({0, 0}, {1, 2}), constant<float>({-1, 3}, {1, 2}));
  EXPECT_FLOAT_EQ(result_of(*mae), 2.0f);
  mae->reset_state();
  EXPECT_EQ(result_of(*mae), 0.0f);
}

// TF 2.x guides reset metrics between epochs with the older name:
//   train_accuracy.reset_states()
TEST(MeanSquaredErrorMetric, ResetStatesIsTheOlderNameOfResetState) {
  auto mse = metrics::MeanSquaredError();
  mse->update_state(constant<float>({1, 2}, {1, 2}), constant<float>({3, 2}, {1, 2}));
  EXPECT_FLOAT_EQ(result_of(*mse), 2.f);
  mse->reset_states();
  EXPECT_EQ(result_of(*mse), 0.0f);
  mse->update_state(constant<float>({1}, {1, 1}), constant<float>({2}, {1, 1}));
  EXPECT_FLOAT_EQ(result_of(*mse), 1.f);
}

TEST(MetricsGet, ResolvesCompileStringsToFreshMetricsNamedByTheString) {
  auto a = metrics::get("sparse_categorical_accuracy");
  auto b = metrics::get("sparse_categorical_accuracy");
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(a->name(), "sparse_categorical_accuracy");
  EXPECT_EQ(metrics::get("mse")->name(), "mse");
  EXPECT_NE(dynamic_cast<metrics::MeanSquaredErrorMetric*>(metrics::get("mse").get()), nullptr);
  EXPECT_EQ(metrics::get("acc")->name(), "acc");
  EXPECT_NE(dynamic_cast<metrics::AccuracyMetric*>(metrics::get("accuracy").get()), nullptr);
  EXPECT_EQ(metrics::get("SparseCategoricalAccuracy")->name(), "sparse_categorical_accuracy");
  EXPECT_NE(dynamic_cast<metrics::MeanAbsoluteErrorMetric*>(metrics::get("mae").get()), nullptr);
  EXPECT_THROW(metrics::get("f1"), InvalidArgumentError);
}

}  // namespace
}  // namespace strata::keras

namespace strata::keras {
namespace {

TEST(MetricUnderStrategy, ReplicasAccumulateLocallyAndTheCrossReplicaResultSumsThem) {
  strata::testing::use_logical_cpus(2);
  distribute::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  std::shared_ptr<metrics::SparseCategoricalAccuracyMetric> acc;
  {
    auto scope = strategy.scope();
    acc = metrics::SparseCategoricalAccuracy();
    EXPECT_TRUE(distribute::is_sync_on_read_variable(acc->variables()[0]));
    // Replica 0 sees 2 of 2 correct, replica 1 1 of 2: together 3 of 4.
    strategy.run([&] {
      const int r = distribute::get_replica_context()->replica_id_in_sync_group();
      Tensor labels = r == 0 ? constant<int64_t>({1, 0}) : constant<int64_t>({1, 1});
      acc->update_state(labels, constant<float>({0, 1, 1, 0}, {2, 2}));
    });
    EXPECT_FLOAT_EQ(acc->result().item<float>(), 0.75f);
    acc->reset_state();
    EXPECT_EQ(acc->result().item<float>(), 0.0f);
  }
}

}  // namespace
}  // namespace strata::keras

namespace strata::keras {
namespace {

TEST(MetricsGet, AccuracyForCompileIsChosenFromTheShapes) {
  auto sparse = metrics::get("accuracy", TensorShape{32}, TensorShape{32, 10});
  EXPECT_NE(dynamic_cast<metrics::SparseCategoricalAccuracyMetric*>(sparse.get()), nullptr);
  EXPECT_EQ(sparse->name(), "accuracy");
  EXPECT_NE(dynamic_cast<metrics::SparseCategoricalAccuracyMetric*>(
                metrics::get("acc", TensorShape{32, 1}, TensorShape{32, 10}).get()),
            nullptr);
  EXPECT_NE(dynamic_cast<metrics::BinaryAccuracyMetric*>(
                metrics::get("accuracy", TensorShape{32, 1}, TensorShape{32, 1}).get()),
            nullptr);
  EXPECT_NE(dynamic_cast<metrics::CategoricalAccuracyMetric*>(
                metrics::get("accuracy", TensorShape{32, 10}, TensorShape{32, 10}).get()),
            nullptr);
  // Other identifiers ignore the shapes.
  EXPECT_NE(dynamic_cast<metrics::MeanSquaredErrorMetric*>(
                metrics::get("mse", TensorShape{32, 1}, TensorShape{32, 1}).get()),
            nullptr);
}

TEST(MetricsGet, CrossentropyMetricsAverageTheLossFunction) {
  auto ce = metrics::get("ce", TensorShape{2}, TensorShape{2, 2});
  EXPECT_EQ(ce->name(), "ce");
  ce->update_state(constant<int64_t>({0, 1}), constant<float>({0.5f, 0.5f, 0.2f, 0.8f}, {2, 2}));
  EXPECT_NEAR(ce->result().item<float>(), (std::log(2.0) - std::log(0.8)) / 2, 1e-6);
  auto bce = metrics::get("binary_crossentropy");
  bce->update_state(constant<float>({1}, {1, 1}), constant<float>({0.5f}, {1, 1}));
  EXPECT_NEAR(bce->result().item<float>(), -std::log(0.5 + 1e-7), 1e-6);
  EXPECT_EQ(metrics::get("categorical_crossentropy")->name(), "categorical_crossentropy");
}

}  // namespace
}  // namespace strata::keras
