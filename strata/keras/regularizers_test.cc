#include "strata/keras/regularizers.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/keras/functional.h"
#include "strata/keras/layers/conv.h"
#include "strata/keras/layers/dense.h"
#include "strata/keras/layers/input_layer.h"
#include "strata/keras/layers/serialization.h"
#include "strata/keras/optimizers/sgd.h"
#include "strata/keras/sequential.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/testing/logical_devices.h"

namespace strata::keras {
namespace {

float item(const Tensor& t) { return strata::cast(t, DType::float32).item<float>(); }

TEST(RegularizersTest, PenaltiesAreKerasFormulas) {
  // x = [[1., -2.], [3., 0.]]
  // tf.keras.regularizers.L1(0.5)(x) = 0.5 * (1 + 2 + 3) = 3
  // tf.keras.regularizers.L2(0.1)(x) = 0.1 * (1 + 4 + 9) = 1.4
  // tf.keras.regularizers.L1L2(l1=0.5, l2=0.1)(x) = 4.4
  Tensor x = strata::constant({1.f, -2.f, 3.f, 0.f}, {2, 2});
  EXPECT_FLOAT_EQ(item((*regularizers::L1(0.5))(x)), 3.f);
  EXPECT_FLOAT_EQ(item((*regularizers::L2(0.1))(x)), 1.4f);
  EXPECT_FLOAT_EQ(item((*regularizers::L1L2({.l1 = 0.5, .l2 = 0.1}))(x)), 4.4f);
  EXPECT_FLOAT_EQ(item((*regularizers::L1L2())(x)), 0.f);
  EXPECT_EQ((*regularizers::L2(0.1))(x).dtype(), DType::float32);
  // tf.keras.regularizers.L2(0.01).get_config() == {'l2': 0.009999999776482582}
  EXPECT_EQ(
      regularizers::serialize(*regularizers::L2(0.01)),
      nlohmann::json::parse(R"({"class_name": "L2", "config": {"l2": 0.009999999776482582}})"));
  auto back = regularizers::deserialize(regularizers::serialize(*regularizers::L1L2({.l1 = 0.5})));
  EXPECT_FLOAT_EQ(item((*back)(x)), 3.f);
  EXPECT_THROW(regularizers::L2(-1.0), InvalidArgumentError);
}

TEST(RegularizersTest, DenseCollectsActivityKernelAndBiasLosses) {
  reset_uids_for_testing();
  // dense = tf.keras.layers.Dense(1, kernel_regularizer=L2(0.1), bias_regularizer=L1(1.),
  //                               activity_regularizer=L1(0.5))
  auto dense = layers::Dense(1, {.kernel_regularizer = regularizers::L2(0.1),
                                 .bias_regularizer = regularizers::L1(1.0),
                                 .activity_regularizer = regularizers::L1(0.5)});
  dense->build(TensorShape{-1, 2});
  dense->set_weights({strata::constant({1.f, 2.f}, {2, 1}), strata::constant({-1.f}, {1})});
  // y = dense([[1., 1.], [2., 0.]]) = [[2.], [1.]]
  Tensor y = (*dense)(strata::constant({1.f, 1.f, 2.f, 0.f}, {2, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2.f, 1.f}));
  // dense.losses: activity 0.5 * (2 + 1) / batch 2 = 0.75; kernel 0.1 * (1 + 4) = 0.5;
  // bias 1 * |-1| = 1.
  std::vector<Tensor> losses = dense->losses();
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_FLOAT_EQ(item(losses[0]), 0.75f);
  EXPECT_FLOAT_EQ(item(losses[1]), 0.5f);
  EXPECT_FLOAT_EQ(item(losses[2]), 1.f);
  // The next call replaces the activity loss: [[4., 0.]] -> 4 - 1 = 3 -> 0.5 * 3 / 1.
  (*dense)(strata::constant({4.f, 0.f}, {1, 2}));
  EXPECT_EQ(dense->losses().size(), 3u);
  EXPECT_FLOAT_EQ(item(dense->losses()[0]), 1.5f);
  // Config: the regularizers serialized, as Keras.
  nlohmann::json config = dense->get_config();
  EXPECT_EQ(config["kernel_regularizer"]["class_name"], "L2");
  EXPECT_EQ(config["activity_regularizer"]["config"]["l1"], 0.5);
  auto copy =
      std::dynamic_pointer_cast<layers::DenseLayer>(layers::deserialize(layers::serialize(*dense)));
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->get_config(), config);
}

TEST(RegularizersTest, ModelLossesCollectNestedLayersAndAreDifferentiable) {
  reset_uids_for_testing();
  // inputs = Input((2,)); x = Dense(1, use_bias=False, kernel_regularizer=L2(0.5))(inputs)
  // model = Model(inputs, x); model.losses == [0.5 * sum(kernel ** 2)]
  KerasTensor in = Input({2});
  auto dense = layers::Dense(1, {.use_bias = false, .kernel_regularizer = regularizers::L2(0.5)});
  auto model = models::Model(in, (*dense)(in));
  dense->set_weights({strata::constant({1.f, -2.f}, {2, 1})});
  ASSERT_EQ(model->losses().size(), 1u);
  EXPECT_FLOAT_EQ(item(model->losses()[0]), 2.5f);
  // d/dw 0.5 * sum(w^2) = w.
  GradientTape tape;
  Tensor reg = model->losses()[0];
  std::vector<Tensor> g = tape.gradient(reg, model->trainable_variables());
  EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{1.f, -2.f}));
}

TEST(RegularizersTest, FitAddsTheRegularizationLossToTheCompiledLoss) {
  reset_uids_for_testing();
  // model = Sequential([Dense(1, use_bias=False, kernel_regularizer=L2(0.5), input_shape=(1,))])
  // w = 1, x = [[1.]], y = [[0.]]: mse = (1 - 0)^2 = 1, penalty = 0.5 * 1^2 = 0.5,
  // loss = 1.5; d loss / dw = 2 * w * x^2 + 2 * 0.5 * w = 3, so SGD(0.1) gives w = 0.7.
  auto model = Sequential({layers::Dense(
      1, {.use_bias = false, .kernel_regularizer = regularizers::L2(0.5), .input_shape = {1}})});
  model->set_weights({strata::constant({1.f}, {1, 1})});
  model->compile({.optimizer = optimizers::SGD({.learning_rate = 0.1}), .loss = "mse"});
  Tensor x = strata::constant({1.f}, {1, 1}), y = strata::constant({0.f}, {1, 1});
  EXPECT_FLOAT_EQ(float(model->evaluate(x, y, {.verbose = 0}).at("loss")), 1.5f);
  History h = model->fit(x, y, {.epochs = 1, .verbose = 0});
  EXPECT_FLOAT_EQ(float(h.history["loss"][0]), 1.5f);
  EXPECT_FLOAT_EQ(model->get_weights()[0].to_vector<float>()[0], 0.7f);
}

TEST(RegularizersTest, RegularizationIsCountedOnceAcrossReplicas) {
  // Two replicas each add penalty / 2 (Keras's scale_loss_for_distribution of
  // the regularization loss), so the summed gradient holds it once: training
  // equals one device.
  auto make = [] {
    auto m = Sequential({layers::Dense(
        1, {.use_bias = false, .kernel_regularizer = regularizers::L2(0.5), .input_shape = {2}})});
    m->set_weights({strata::constant({1.f, -1.f}, {2, 1})});
    return m;
  };
  Tensor x = strata::constant({1.f, 2.f, 0.f, 1.f, 2.f, 2.f, -1.f, 0.f}, {4, 2});
  Tensor y = strata::constant({1.f, 0.f, 2.f, -1.f}, {4, 1});
  auto reference = make();
  reference->compile({.optimizer = optimizers::SGD({.learning_rate = 0.1}), .loss = "mse"});
  History ref = reference->fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0});

  strata::testing::use_logical_cpus(2);
  distribute::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  std::shared_ptr<SequentialModel> model;
  {
    auto scope = strategy.scope();
    model = make();
    model->compile({.optimizer = optimizers::SGD({.learning_rate = 0.1}), .loss = "mse"});
  }
  History h = model->fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0});
  const std::vector<float> got = model->get_weights()[0].to_vector<float>();
  const std::vector<float> want = reference->get_weights()[0].to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6);
  for (int e = 0; e < 2; ++e) EXPECT_NEAR(h.history["loss"][e], ref.history["loss"][e], 1e-5);
}

}  // namespace
}  // namespace strata::keras
