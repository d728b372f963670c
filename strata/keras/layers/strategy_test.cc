// The layers under tf.distribute.MirroredStrategy: weights become distributed
// variables through the variable-creator stack, and BatchNormalization's
// moving statistics are per-replica (ON_READ) and averaged when read.
#include <gtest/gtest.h>

#include <cmath>

#include "strata/autodiff/gradient_tape.h"
#include "strata/core/config.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/layers/layers.h"
#include "strata/keras/layers/testing/layer_test_util.h"
#include "strata/keras/optimizers/optimizers.h"
#include "strata/keras/sequential.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/testing/logical_devices.h"

namespace strata::keras::layers {
namespace {

namespace sd = strata::distribute;
using testing_util::all_close;
using testing_util::as_doubles;

class LayersUnderStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(2); }
};

// Replica r's batch: feature 0 = 1, 3 shifted by 4 r (mean 2 + 4 r, variance 1);
// feature 1 = r, r + 2 (mean r + 1, variance 1).
Tensor replica_batch() {
  const float r = static_cast<float>(sd::get_replica_context()->replica_id_in_sync_group());
  return strata::constant({1.f + 4 * r, r, 3.f + 4 * r, r + 2}, {2, 2});
}

TEST_F(LayersUnderStrategyTest, WeightsBuiltInScopeAreDistributed) {
  sd::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  auto dense = Dense(3);
  auto bn = BatchNormalization();
  {
    auto scope = strategy.scope();
    dense->build({-1, 4});
    bn->build({-1, 3});
  }
  EXPECT_TRUE(sd::is_mirrored_variable(dense->kernel()));
  EXPECT_TRUE(sd::is_mirrored_variable(bn->gamma()));
  EXPECT_TRUE(sd::is_sync_on_read_variable(bn->moving_mean()));
  EXPECT_TRUE(sd::is_sync_on_read_variable(bn->moving_variance()));
  EXPECT_EQ(sd::distributed_components(bn->moving_mean()).size(), 2u);
  // Every replica computes the same Dense output from its mirrored kernel.
  const Tensor x = strata::ones({2, 4});
  const std::vector<double> outside = as_doubles((*dense)(x));
  sd::PerReplica<Tensor> y = strategy.run([&] { return (*dense)(x); });
  for (const Tensor& t : y.values()) EXPECT_EQ(as_doubles(t), outside);
}

// TensorFlow (a custom training loop whose model has no input_shape):
//   with strategy.scope():
//     init = tf.keras.initializers.GlorotUniform(seed=7)
//     model = tf.keras.Sequential([
//         tf.keras.layers.Dense(4, activation="relu", kernel_initializer=init),
//         tf.keras.layers.Dense(1, kernel_initializer=init)])
//     optimizer = tf.keras.optimizers.Adam()
//   def step_fn(x, y):
//     with tf.GradientTape() as tape:
//       loss = tf.reduce_sum(tf.square(model(x) - y)) / 4.   # global batch 4
//     grads = tape.gradient(loss, model.trainable_variables)
//     optimizer.apply_gradients(zip(grads, model.trainable_variables))
//     return loss
//   for _ in range(3): strategy.run(step_fn, args=(x, y))   # layers build in the first step
TEST_F(LayersUnderStrategyTest, AModelBuiltLazilyInsideRunTrains) {
  sd::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  std::shared_ptr<SequentialModel> model;
  std::shared_ptr<optimizers::AdamOptimizer> optimizer;
  {
    auto scope = strategy.scope();
    // Seeded, and targets whose mean is not 0: even were every ReLU dead, the
    // output bias alone would still reduce the loss.
    const auto init = initializers::glorot_uniform({.seed = 7});
    model = Sequential({Dense(4, {.activation = "relu", .kernel_initializer = init}),
                        Dense(1, {.kernel_initializer = init})});
    optimizer = optimizers::Adam({});
  }
  auto step_fn = [&] {
    const float r = static_cast<float>(sd::get_replica_context()->replica_id_in_sync_group());
    const Tensor x = strata::constant({1.f + r, 2.f, 3.f, 4.f - r}, {2, 2});
    const Tensor y = strata::constant({1.f, 2.f}, {2, 1});
    GradientTape tape;
    const Tensor y_pred = (*model)(x);
    Tensor loss = strata::reduce_sum(strata::square(y_pred - y)) / strata::constant(4.f);
    const std::vector<Variable> vars = model->trainable_variables();
    const std::vector<Tensor> grads = tape.gradient(loss, vars);
    optimizer->apply_gradients(strata::zip(grads, vars));
    return loss;
  };
  std::vector<float> losses;
  for (int step = 0; step < 3; ++step) {
    auto loss = strategy.run(step_fn);
    losses.push_back(strategy.reduce(sd::ReduceOp::SUM, loss, std::nullopt).item<float>());
  }
  EXPECT_LT(losses.back(), losses.front());
  ASSERT_EQ(model->trainable_variables().size(), 4u);
  for (const Variable& v : model->trainable_variables()) {
    ASSERT_TRUE(sd::is_mirrored_variable(v)) << v.name();
    const std::vector<Variable> copies = sd::distributed_components(v);
    EXPECT_EQ(as_doubles(copies[0].value()), as_doubles(copies[1].value())) << v.name();
  }
}

TEST_F(LayersUnderStrategyTest, BatchNormalizationKeepsPerReplicaMovingStatisticsAndAveragesThem) {
  sd::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  auto bn = BatchNormalization({.momentum = 0.5, .epsilon = 0.0});
  // Built lazily on the first replica call (created once, through a merge).
  sd::PerReplica<Tensor> y =
      strategy.run([&] { return (*bn)(replica_batch(), /*training=*/true); });
  // Each replica normalises with its own batch statistics: every feature -> -1, 1.
  for (const Tensor& t : y.values()) EXPECT_TRUE(all_close(as_doubles(t), {-1, -1, 1, 1}, 1e-6));
  const std::vector<Variable> means = sd::distributed_components(bn->moving_mean());
  ASSERT_EQ(means.size(), 2u);
  // moving = 0.5 * initial + 0.5 * batch, per replica.
  EXPECT_TRUE(all_close(as_doubles(means[0].value()), {1, 0.5}, 1e-6));
  EXPECT_TRUE(all_close(as_doubles(means[1].value()), {3, 1}, 1e-6));
  // Read outside the replicas: the MEAN of the components.
  {
    auto scope = strategy.scope();
    EXPECT_TRUE(all_close(as_doubles(bn->moving_mean().value()), {2, 0.75}, 1e-6));
    EXPECT_TRUE(all_close(as_doubles(bn->moving_variance().value()), {1, 1}, 1e-6));
  }
}

// Keras (SyncBatchNormalization):
//   strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
//   with strategy.scope():
//     bn = tf.keras.layers.BatchNormalization(momentum=0.5, synchronized=True)
//   def step_fn(x, w):
//     with tf.GradientTape() as tape:
//       tape.watch(x)
//       y = bn(x, training=True)
//       loss = tf.reduce_sum(y * w)
//     return y, tape.gradient(loss, x)
//   strategy.run(step_fn, args=(x_per_replica, w_per_replica))
// Each replica's output, the moving statistics and the input gradients are
// those of a plain BatchNormalization on the concatenated global batch.
TEST_F(LayersUnderStrategyTest, SynchronizedBatchNormalizationUsesTheGlobalBatch) {
  const std::vector<std::vector<float>> xs = {{1, 2, 4, -1, 0, 5}, {3, 0, -2, 6, 7, 1}};
  const std::vector<std::vector<float>> ws = {{1, -2, 0.5, 3, -1, 2}, {2, 1, -3, 0.5, 1, -1}};
  const double epsilon = 1e-3;
  // The global batch's statistics, by hand: 6 examples per feature.
  std::vector<double> mean(2, 0.0), var(2, 0.0);
  for (const auto& x : xs)
    for (int i = 0; i < 6; ++i) mean[i % 2] += x[i] / 6.0;
  for (const auto& x : xs)
    for (int i = 0; i < 6; ++i) var[i % 2] += (x[i] - mean[i % 2]) * (x[i] - mean[i % 2]) / 6.0;
  std::vector<std::vector<double>> expected_y(2);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 6; ++i)
      expected_y[r].push_back((xs[r][i] - mean[i % 2]) / std::sqrt(var[i % 2] + epsilon));

  // The single-device computation on the global batch (plain layer).
  auto plain = BatchNormalization({.momentum = 0.5, .epsilon = epsilon});
  std::vector<float> global_x = xs[0], global_w = ws[0];
  global_x.insert(global_x.end(), xs[1].begin(), xs[1].end());
  global_w.insert(global_w.end(), ws[1].begin(), ws[1].end());
  const Tensor gx = strata::constant(global_x, {6, 2});
  GradientTape plain_tape;
  plain_tape.watch(gx);
  const Tensor plain_y = (*plain)(gx, /*training=*/true);
  const Tensor plain_loss = strata::reduce_sum(plain_y * strata::constant(global_w, {6, 2}));
  const std::vector<double> plain_dx = as_doubles(plain_tape.gradient(plain_loss, gx));
  ASSERT_TRUE(all_close(
      as_doubles(plain_y),
      [&] {
        std::vector<double> v = expected_y[0];
        v.insert(v.end(), expected_y[1].begin(), expected_y[1].end());
        return v;
      }(),
      1e-5));

  sd::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  std::shared_ptr<BatchNormalizationLayer> bn;
  {
    auto scope = strategy.scope();
    bn = BatchNormalization({.momentum = 0.5, .epsilon = epsilon, .synchronized = true});
  }
  sd::PerReplica<Tensor> out = strategy.run([&] {
    const int r = sd::get_replica_context()->replica_id_in_sync_group();
    const Tensor x = strata::constant(xs[r], {3, 2});
    GradientTape tape;
    tape.watch(x);
    const Tensor y = (*bn)(x, /*training=*/true);
    const Tensor loss = strata::reduce_sum(y * strata::constant(ws[r], {3, 2}));
    const Tensor dx = tape.gradient(loss, x);
    return strata::concat({y, dx}, 1);  // [y | dy/dx], 3 x 4
  });
  ASSERT_EQ(out.values().size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const std::vector<double> got = as_doubles(out.values()[r]);
    std::vector<double> y, dx;
    for (int row = 0; row < 3; ++row) {
      for (int c = 0; c < 2; ++c) y.push_back(got[row * 4 + c]);
      for (int c = 0; c < 2; ++c) dx.push_back(got[row * 4 + 2 + c]);
    }
    EXPECT_TRUE(all_close(y, expected_y[r], 1e-5)) << "replica " << r;
    const std::vector<double> want_dx(plain_dx.begin() + 6 * r, plain_dx.begin() + 6 * (r + 1));
    EXPECT_TRUE(all_close(dx, want_dx, 1e-5)) << "replica " << r;
  }
  // The gradient is not the per-replica one: a replica's own batch statistics
  // would give a different input gradient.
  {
    auto local = BatchNormalization({.momentum = 0.5, .epsilon = epsilon});
    const Tensor x0 = strata::constant(xs[0], {3, 2});
    GradientTape tape;
    tape.watch(x0);
    const Tensor loss =
        strata::reduce_sum((*local)(x0, /*training=*/true) * strata::constant(ws[0], {3, 2}));
    const std::vector<double> want_dx(plain_dx.begin(), plain_dx.begin() + 6);
    EXPECT_FALSE(all_close(as_doubles(tape.gradient(loss, x0)), want_dx, 1e-3));
  }
  // Every replica's moving statistics are the global batch's: 0.5 * initial + 0.5 * batch.
  const std::vector<double> want_mean = {0.5 * mean[0], 0.5 * mean[1]};
  const std::vector<double> want_var = {0.5 + 0.5 * var[0], 0.5 + 0.5 * var[1]};
  EXPECT_TRUE(all_close(as_doubles(plain->moving_mean().value()), want_mean, 1e-5));
  EXPECT_TRUE(all_close(as_doubles(plain->moving_variance().value()), want_var, 1e-5));
  for (const Variable& m : sd::distributed_components(bn->moving_mean()))
    EXPECT_TRUE(all_close(as_doubles(m.value()), want_mean, 1e-5));
  for (const Variable& v : sd::distributed_components(bn->moving_variance()))
    EXPECT_TRUE(all_close(as_doubles(v.value()), want_var, 1e-5));
}

// Without a strategy (one replica) the synchronized layer is the plain one.
TEST_F(LayersUnderStrategyTest, SynchronizedBatchNormalizationWithOneReplicaIsThePlainLayer) {
  const Tensor x = strata::constant({1.f, 2.f, 4.f, -1.f, 0.f, 5.f}, {3, 2});
  auto sync = BatchNormalization({.momentum = 0.5, .synchronized = true});
  auto plain = BatchNormalization({.momentum = 0.5});
  EXPECT_TRUE(all_close(as_doubles((*sync)(x, true)), as_doubles((*plain)(x, true)), 1e-6));
  EXPECT_TRUE(all_close(as_doubles(sync->moving_variance().value()),
                        as_doubles(plain->moving_variance().value()), 1e-6));
}

TEST_F(LayersUnderStrategyTest, SeededDropoutDrawsPerReplicaMasksReproducibly) {
  sd::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  const Tensor x = strata::ones({8, 8});
  auto masks = [&](const std::shared_ptr<DropoutLayer>& drop) {
    sd::PerReplica<Tensor> y = strategy.run([&] { return (*drop)(x, /*training=*/true); });
    return std::vector<std::vector<double>>{as_doubles(y.values()[0]), as_doubles(y.values()[1])};
  };
  auto a = Dropout(0.5, {.seed = 4});
  auto b = Dropout(0.5, {.seed = 4});
  const auto a1 = masks(a);
  EXPECT_NE(a1[0], a1[1]);  // replicas drop different units
  EXPECT_EQ(masks(b), a1);  // a rerun reproduces every replica's mask
  EXPECT_NE(masks(a), a1);  // the next step draws new masks
  // Replica 0 matches the same layer used outside any strategy.
  auto c = Dropout(0.5, {.seed = 4});
  EXPECT_EQ(as_doubles((*c)(x, true)), a1[0]);
}

}  // namespace
}  // namespace strata::keras::layers
