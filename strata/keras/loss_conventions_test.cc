// Keras's loss conventions that a ported program relies on without writing
// them: a sigmoid output's logits feed binary cross-entropy, and the compiled
// loss aligns the ranks of y_true and y_pred.
#include <gtest/gtest.h>

#include <cmath>

#include "strata/autodiff/gradient_tape.h"
#include "strata/keras/activations.h"
#include "strata/keras/layers/dense.h"
#include "strata/keras/losses.h"
#include "strata/keras/optimizers/adam.h"
#include "strata/keras/optimizers/sgd.h"
#include "strata/keras/sequential.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/random_ops.h"

namespace strata::keras {
namespace {

TEST(LossConventionsTest, BinaryCrossentropyUsesTheLogitsBehindAKerasSigmoid) {
  // z = [[20.], [-20.]]; y = [[0.], [1.]]
  // tf.keras.losses.binary_crossentropy(y, tf.keras.activations.sigmoid(z)) is computed
  // from z (Keras 2's output._keras_logits): per example log(1 + e^20) = 20.000000002.
  Tensor z = strata::constant({20.f, -20.f}, {2, 1});
  Tensor y = strata::constant({0.f, 1.f}, {2, 1});
  Tensor p = activations::sigmoid(z);
  EXPECT_EQ(activations::keras_logits(p).to_vector<float>(), z.to_vector<float>());
  std::vector<float> bce = losses::binary_crossentropy(y, p).to_vector<float>();
  EXPECT_NEAR(bce[0], 20.f, 1e-4);
  EXPECT_NEAR(bce[1], 20.f, 1e-4);
  // A plain sigmoid op has no cached logits: the probabilities are clipped to
  // [1e-7, 1 - 1e-7], giving about -log(2e-7) = 15.4 instead.
  EXPECT_LT(losses::binary_crossentropy(y, strata::sigmoid(z)).to_vector<float>()[1], 16.f);
  // The gradient through the logits does not vanish: d mean(bce) / dz = (sigmoid(z) - y) / 2.
  Variable zv(z);
  GradientTape tape;
  Tensor loss = (*losses::BinaryCrossentropy())(y, activations::sigmoid(zv.value()));
  std::vector<Tensor> g = tape.gradient(loss, std::vector<Variable>{zv});
  const std::vector<float> gz = g[0].to_vector<float>();
  EXPECT_NEAR(gz[0], 0.5f, 1e-6);
  EXPECT_NEAR(gz[1], -0.5f, 1e-6);
}

TEST(LossConventionsTest, CompiledLossAlignsTheRanksOfLabelsAndPredictions) {
  // model = Sequential([Dense(1, input_shape=(2,))]) with kernel [[1], [0]], bias [0]
  // x = [[1, 0], [2, 0], [3, 0]] -> y_pred [[1], [2], [3]]; y = [1, 2, 2] (rank 1)
  // model.compile(loss=tf.keras.losses.mean_squared_error); model.evaluate(x, y)
  // -> Keras squeezes y_pred to [3]: (0 + 0 + 1) / 3, not the [3, 3] broadcast's 9 / 9.
  Tensor x = strata::constant({1.f, 0.f, 2.f, 0.f, 3.f, 0.f}, {3, 2});
  Tensor y = strata::constant({1.f, 2.f, 2.f}, {3});
  for (const LossSpec& loss : {LossSpec(LossFunction(losses::mean_squared_error)), LossSpec("mse"),
                               LossSpec(losses::MeanSquaredError())}) {
    auto model = Sequential({layers::Dense(1, {.input_shape = {2}})});
    model->set_weights({strata::constant({1.f, 0.f}, {2, 1}), strata::constant({0.f}, {1})});
    model->compile({.optimizer = optimizers::SGD({}), .loss = loss});
    EXPECT_FLOAT_EQ(float(model->evaluate(x, y, {.verbose = 0}).at("loss")), 1.f / 3.f);
  }
  // The same rule, directly: labels of one rank more with a trailing 1 are squeezed too.
  auto [p, t] = losses::squeeze_or_expand_dimensions(strata::zeros({3}), strata::zeros({3, 1}));
  EXPECT_EQ(p.shape(), TensorShape({3}));
  EXPECT_EQ(t.shape(), TensorShape({3}));
  // Sparse labels against class scores are left alone.
  auto [p2, t2] = losses::squeeze_or_expand_dimensions(strata::zeros({3, 4}), strata::zeros({3}));
  EXPECT_EQ(p2.shape(), TensorShape({3, 4}));
  EXPECT_EQ(t2.shape(), TensorShape({3}));
}

// A small binary classifier, as the guides train one:
//   model = tf.keras.Sequential([
//       tf.keras.layers.Dense(16, activation="relu", input_shape=(2,)),
//       tf.keras.layers.Dense(1, activation="sigmoid")])
//   model.compile(optimizer=tf.keras.optimizers.Adam(0.01),
//                 loss=tf.keras.losses.BinaryCrossentropy(), metrics=["accuracy"])
//   model.fit(x, y, batch_size=32, epochs=20)
// on points of the square [-1, 1]^2 labelled by x0 + 2 x1 > 0.
double train_binary_classifier(uint64_t seed, bool rank_one_labels) {
  Tensor x = strata::random::uniform({512, 2}, {.minval = -1, .maxval = 1, .seed = seed});
  Tensor w = strata::constant({1.f, 2.f}, {2, 1});
  Tensor y =
      strata::cast(strata::greater(strata::matmul(x, w), strata::zeros({512, 1})), DType::float32);
  if (rank_one_labels) y = strata::reshape(y, {512});
  auto model = Sequential(
      {layers::Dense(16, {.activation = "relu",
                          .kernel_initializer = initializers::glorot_uniform({.seed = seed + 1}),
                          .input_shape = {2}}),
       layers::Dense(1, {.activation = "sigmoid",
                         .kernel_initializer = initializers::glorot_uniform({.seed = seed + 2})})});
  model->compile({.optimizer = optimizers::Adam({.learning_rate = 0.01}),
                  .loss = losses::BinaryCrossentropy(),
                  .metrics = {"accuracy"},
                  .seed = seed});
  History h = model->fit(x, y, {.batch_size = 32, .epochs = 20, .verbose = 0});
  return h.history["accuracy"].back();
}

// Keras's match_dtype_and_rank: (batch,) targets against (batch, k) outputs
// gain a trailing axis before the loss, so "mse" compares each output with
// its example's target, as the parameter server guide's
//   model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
//   model.compile(optimizer, loss="mse")      # y of shape (batch,)
// relies on. By hand: outputs [[1, 0], [0, 2], [1, 2]], targets [1, 2, 0]:
// squared errors (0, 1), (4, 0), (1, 4), per-example means 0.5, 2, 2.5.
TEST(LossConventionsTest, RankOneTargetsAgainstRankTwoOutputsGainAnAxisAsKeras) {
  auto model = Sequential({layers::Dense(2, {.use_bias = false, .input_shape = {2}})});
  model->set_weights({strata::constant({1.f, 0.f, 0.f, 2.f}, {2, 2})});
  model->compile({.optimizer = optimizers::SGD({}), .loss = "mse"});
  const Tensor x = strata::constant({1.f, 0.f, 0.f, 1.f, 1.f, 1.f}, {3, 2});
  const Tensor y = strata::constant({1.f, 2.f, 0.f});
  EXPECT_FLOAT_EQ(float(model->evaluate(x, y, {.verbose = 0}).at("loss")), 5.f / 3.f);
  // Integer targets become the outputs' float dtype.
  const Tensor y_int = strata::constant(std::vector<int32_t>{1, 2, 0});
  EXPECT_FLOAT_EQ(float(model->evaluate(x, y_int, {.verbose = 0}).at("loss")), 5.f / 3.f);
}

TEST(LossConventionsTest, SigmoidBinaryClassifierReachesHighAccuracy) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    EXPECT_GE(train_binary_classifier(seed, /*rank_one_labels=*/false), 0.95) << "seed " << seed;
    // Labels of shape [batch] against predictions [batch, 1]: aligned, not broadcast.
    EXPECT_GE(train_binary_classifier(seed, /*rank_one_labels=*/true), 0.95) << "seed " << seed;
  }
}

}  // namespace
}  // namespace strata::keras
