// The layers under tf.distribute.MirroredStrategy: weights become distributed
// variables through the variable-creator stack, and BatchNormalization's
// moving statistics are per-replica (ON_READ) and averaged when read.
#include <gtest/gtest.h>

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

namespace strata::keras::layers {
namespace {

namespace sd = strata::distribute;
using testing_util::all_close;
using testing_util::as_doubles;

class LayersUnderStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    strata::internal::reset_runtime_for_testing();
    config::set_logical_device_configuration(config::list_physical_devices("CPU")[0],
                                             std::vector<config::LogicalDeviceConfiguration>(2));
  }
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
