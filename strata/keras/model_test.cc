#include "strata/keras/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <sstream>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/keras/callbacks/lambda_callback.h"
#include "strata/keras/callbacks/progbar_logger.h"
#include "strata/keras/layers/dense.h"
#include "strata/keras/layers/reshaping.h"
#include "strata/keras/losses.h"
#include "strata/keras/optimizers/sgd.h"
#include "strata/keras/sequential.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/ops/random_ops.h"
#include "strata/testing/logical_devices.h"

namespace strata::keras {
namespace {

std::vector<float> values(const Tensor& t) {
  return strata::cast(t, DType::float32).to_vector<float>();
}

void expect_near(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<float> va = values(a[i]), vb = values(b[i]);
    ASSERT_EQ(va.size(), vb.size());
    for (size_t j = 0; j < va.size(); ++j)
      EXPECT_NEAR(va[j], vb[j], tol) << "weight " << i << " element " << j;
  }
}

// 32 examples of 4 features, 3 classes (deterministic).
std::pair<Tensor, Tensor> classification_data(int64_t n = 32) {
  Tensor x = strata::random::uniform({n, 4}, {.minval = -1, .maxval = 1, .seed = 11});
  Tensor y = strata::random::uniform_int({n}, 0, 3, {.seed = 12});
  return {x, y};
}

Tensor sparse_xent_from_logits(const Tensor& y, const Tensor& p) {
  return losses::sparse_categorical_crossentropy(y, p, {.from_logits = true});
}

TEST(ModelSummaryTest, PrintsKerasTableForSmallSequential) {
  reset_uids_for_testing();
  auto model = Sequential({layers::Dense(2, {.input_shape = {5}}), layers::Dense(1)});
  std::ostringstream out;
  model->summary(out);
  const std::string expected =
      "Model: \"sequential\"\n"
      "_________________________________________________________________\n"
      " Layer (type)                Output Shape              Param #   \n"
      "=================================================================\n"
      " dense (Dense)               (None, 2)                 12        \n"
      "                                                                 \n"
      " dense_1 (Dense)             (None, 1)                 3         \n"
      "                                                                 \n"
      "=================================================================\n"
      "Total params: 15\n"
      "Trainable params: 15\n"
      "Non-trainable params: 0\n"
      "_________________________________________________________________\n";
  EXPECT_EQ(out.str(), expected);
}

TEST(ModelSummaryTest, UsesThousandsSeparatorsAndCountsFrozenLayers) {
  reset_uids_for_testing();
  auto hidden = layers::Dense(128, {.activation = "relu"});
  auto model = Sequential({layers::Flatten({.input_shape = {28, 28}}), hidden, layers::Dense(10)});
  hidden->set_trainable(false);
  std::ostringstream out;
  model->summary(out);
  EXPECT_THAT(
      out.str(),
      ::testing::HasSubstr(" flatten (Flatten)           (None, 784)               0         \n"));
  EXPECT_THAT(
      out.str(),
      ::testing::HasSubstr(" dense (Dense)               (None, 128)               100,480   \n"));
  EXPECT_THAT(out.str(), ::testing::HasSubstr("Total params: 101,770\nTrainable params: 1,290\n"
                                              "Non-trainable params: 100,480\n"));
}

TEST(ModelSummaryTest, UnbuiltModelIsAnError) {
  auto model = Sequential({layers::Dense(2)});
  std::ostringstream out;
  EXPECT_THROW(model->summary(out), InvalidArgumentError);
}

TEST(SequentialTest, BuildsFromInputShapeOrOnFirstCall) {
  auto eager = Sequential({layers::Dense(3, {.input_shape = {4}}), layers::Dense(2)});
  EXPECT_TRUE(eager->built());
  EXPECT_EQ(eager->weights().size(), 4u);
  auto lazy = Sequential();
  lazy->add(layers::Dense(3));
  lazy->add(layers::Dense(2));
  EXPECT_FALSE(lazy->built());
  Tensor y = (*lazy)(strata::ones({5, 4}));
  EXPECT_EQ(y.shape(), TensorShape({5, 2}));
  EXPECT_EQ(lazy->count_params(), 4 * 3 + 3 + 3 * 2 + 2);
  // add() after building builds the new layer from the previous output.
  lazy->add(layers::Dense(7));
  EXPECT_EQ(lazy->weights().size(), 6u);
  EXPECT_EQ(lazy->compute_output_shape(TensorShape({-1, 4})), TensorShape({-1, 7}));
  EXPECT_THROW(lazy->add(nullptr), InvalidArgumentError);
}

TEST(ModelFitTest, LinearRegressionConverges) {
  Tensor x = strata::random::uniform({64, 1}, {.minval = -1, .maxval = 1, .seed = 3});
  Tensor y = x * 3.f + 2.f;
  auto model = Sequential({layers::Dense(1, {.input_shape = {1}})});
  model->compile({.optimizer = optimizers::SGD({.learning_rate = 0.2}), .loss = "mse"});
  History h = model->fit(x, y, {.batch_size = 16, .epochs = 60, .verbose = 0});
  ASSERT_EQ(h.history["loss"].size(), 60u);
  EXPECT_LT(h.history["loss"].back(), 1e-4);
  EXPECT_LT(h.history["loss"].back(), h.history["loss"].front());
  const std::vector<Tensor> w = model->get_weights();
  EXPECT_NEAR(values(w[0])[0], 3.0, 1e-2);
  EXPECT_NEAR(values(w[1])[0], 2.0, 1e-2);
}

// The guides compile with names:
//   model.compile(optimizer='adam', loss='sparse_categorical_crossentropy', metrics=['accuracy'])
TEST(ModelFitTest, CompileTakesTheOptimizerByNameWithKerasDefaults) {
  auto [x, y] = classification_data();
  auto model = Sequential({layers::Dense(5, {.activation = "relu", .input_shape = {4}}),
                           layers::Dense(3, {.activation = "softmax"})});
  model->compile(
      {.optimizer = "adam", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
  ASSERT_NE(model->optimizer(), nullptr);
  EXPECT_EQ(model->optimizer()->name(), "Adam");
  EXPECT_FLOAT_EQ(model->optimizer()->learning_rate(), 0.001f);  // a float32 variable, as Keras
  History h = model->fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0});
  EXPECT_EQ(h.history["accuracy"].size(), 2u);
  model->compile({.optimizer = "SGD", .loss = "sparse_categorical_crossentropy"});
  EXPECT_EQ(model->optimizer()->name(), "SGD");
  EXPECT_FLOAT_EQ(model->optimizer()->learning_rate(), 0.01f);
  try {
    model->compile({.optimizer = "lamb", .loss = "mse"});
    ADD_FAILURE() << "unknown optimizer name accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("lamb"), std::string::npos) << e.what();
  }
}

TEST(ModelFitTest, FitEqualsHandRolledGradientTapeLoop) {
  auto [x, y] = classification_data();
  auto fitted =
      Sequential({layers::Dense(5, {.activation = "relu", .input_shape = {4}}), layers::Dense(3)});
  auto manual =
      Sequential({layers::Dense(5, {.activation = "relu", .input_shape = {4}}), layers::Dense(3)});
  manual->set_weights(fitted->get_weights());
  fitted->compile({.optimizer = optimizers::SGD({.learning_rate = 0.5}),
                   .loss = LossFunction(sparse_xent_from_logits)});
  History h = fitted->fit(x, y, {.batch_size = 8, .epochs = 3, .verbose = 0, .shuffle = false});

  auto opt = optimizers::SGD({.learning_rate = 0.5});
  std::vector<double> epoch_loss;
  for (int epoch = 0; epoch < 3; ++epoch) {
    double sum = 0;
    for (int64_t b = 0; b < 32; b += 8) {
      Tensor xb = x.slice_rows(b, b + 8), yb = y.slice_rows(b, b + 8);
      GradientTape tape;
      Tensor loss = strata::reduce_mean(sparse_xent_from_logits(yb, (*manual)(xb, true)));
      auto grads = tape.gradient(loss, manual->trainable_variables());
      opt->apply_gradients(strata::zip(grads, manual->trainable_variables()));
      sum += loss.scalar_as_double();
    }
    epoch_loss.push_back(sum / 4);
  }
  expect_near(fitted->get_weights(), manual->get_weights(), 1e-6);
  ASSERT_EQ(h.history["loss"].size(), 3u);
  for (int e = 0; e < 3; ++e)
    EXPECT_NEAR(h.history["loss"][e], epoch_loss[e], 1e-5) << "epoch " << e;
  EXPECT_EQ(fitted->optimizer()->iterations(), 12);
}

// y = x . [1, 2] + 0.5, set by hand.
std::shared_ptr<SequentialModel> fixed_linear_model() {
  auto model = Sequential({layers::Dense(1, {.input_shape = {2}})});
  model->set_weights({strata::constant({1.f, 2.f}, {2, 1}), strata::constant({0.5f}, {1})});
  return model;
}

TEST(ModelEvaluateTest, LossIsBatchSizeWeightedMeanAndPredictConcatenates) {
  auto model = fixed_linear_model();
  Tensor x = strata::constant({1.f, 1.f, 2.f, 0.f, 0.f, 3.f}, {3, 2});
  Tensor pred = model->predict(x, {.batch_size = 2, .verbose = 0});
  EXPECT_EQ(pred.shape(), TensorShape({3, 1}));
  EXPECT_EQ(values(pred), (std::vector<float>{3.5f, 2.5f, 6.5f}));
  // Errors 0, 0, 2: batch losses 0 (2 examples) and 4 (1 example).
  Tensor y = strata::constant({3.5f, 2.5f, 4.5f}, {3, 1});
  model->compile({.optimizer = optimizers::SGD({}), .loss = "mse", .metrics = {"mae"}});
  Logs r = model->evaluate(x, y, {.batch_size = 2, .verbose = 0});
  EXPECT_EQ(r.keys(), (std::vector<std::string>{"loss", "mae"}));
  EXPECT_NEAR(r.at("loss"), 4.0 / 3.0, 1e-6);
  EXPECT_NEAR(r.at("mae"), 2.0 / 3.0, 1e-6);
  // A dataset of {x} batches predicts too.
  Tensor p2 = model->predict(data::Dataset::from_tensor_slices({x}).batch(1), {.verbose = 0});
  EXPECT_EQ(values(p2), values(pred));
}

// A model whose output is its input: metrics see chosen predictions.
class IdentityModel : public Model {
 public:
  IdentityModel() : Model("IdentityModel", "identity_model") {}

 protected:
  Tensor call(const Tensor& x, bool) override { return x; }
};

TEST(ModelCompileTest, AccuracyResolvesFromShapesAsKeras) {
  auto model = std::make_shared<IdentityModel>();
  model->compile({.loss = LossFunction(
                      [](const Tensor&, const Tensor& p) { return strata::zeros({p.shape()[0]}); }),
                  .metrics = {"accuracy"}});
  Tensor logits = strata::constant(
      {0.1f, 0.8f, 0.1f, 0.9f, 0.05f, 0.05f, 0.2f, 0.2f, 0.6f, 0.3f, 0.3f, 0.4f}, {4, 3});
  // Sparse labels (rank 1 < 2): predicted classes 1, 0, 2, 2.
  Tensor sparse = strata::constant<int64_t>({1, 0, 1, 2}, {4});
  EXPECT_NEAR(model->evaluate(logits, sparse, {.verbose = 0}).at("accuracy"), 0.75, 1e-6);

  auto categorical = std::make_shared<IdentityModel>();
  categorical->compile({.loss = "mse", .metrics = {"acc"}});
  Tensor onehot = strata::one_hot(strata::constant<int64_t>({1, 1, 2, 2}, {4}), 3);
  EXPECT_NEAR(categorical->evaluate(logits, onehot, {.verbose = 0}).at("acc"), 0.75, 1e-6);

  auto binary = std::make_shared<IdentityModel>();
  binary->compile({.loss = "mse", .metrics = {"accuracy"}});
  Tensor probs = strata::constant({0.9f, 0.2f, 0.6f, 0.4f}, {4, 1});
  Tensor labels = strata::constant({1.f, 1.f, 1.f, 0.f}, {4, 1});
  EXPECT_NEAR(binary->evaluate(probs, labels, {.verbose = 0}).at("accuracy"), 0.75, 1e-6);

  EXPECT_THROW(model->compile({.metrics = {"no_such_metric"}}), InvalidArgumentError);
  EXPECT_THROW(model->compile({.loss = "no_such_loss"}), InvalidArgumentError);
}

TEST(ModelFitTest, HistoryHoldsLossMetricsAndValidationPerEpoch) {
  auto [x, y] = classification_data();
  auto model = Sequential({layers::Dense(3, {.input_shape = {4}})});
  model->compile({.optimizer = optimizers::SGD({.learning_rate = 0.1}),
                  .loss = LossFunction(sparse_xent_from_logits),
                  .metrics = {"accuracy"}});
  History h =
      model->fit(x, y, {.batch_size = 8, .epochs = 3, .verbose = 0, .validation_split = 0.25});
  EXPECT_EQ(h.epoch, (std::vector<int>{0, 1, 2}));
  std::vector<std::string> keys;
  for (const auto& [k, v] : h.history) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"accuracy", "loss", "val_accuracy", "val_loss"}));
  for (const auto& [k, v] : h.history) EXPECT_EQ(v.size(), 3u) << k;
  // The last validation loss is the trained model's loss on the last quarter.
  Logs r = model->evaluate(x.slice_rows(24, 32), y.slice_rows(24, 32), {.verbose = 0});
  EXPECT_NEAR(h.history["val_loss"].back(), r.at("loss"), 1e-6);
  EXPECT_NEAR(h.history["val_accuracy"].back(), r.at("accuracy"), 1e-6);
  EXPECT_EQ(model->optimizer()->iterations(), 9);  // 24 training examples / 8, 3 epochs
  EXPECT_EQ(model->history().epoch.size(), 3u);
}

TEST(ModelFitTest, ShuffleOrderIsReproducibleAndDiffersPerEpoch) {
  auto [x, y] = classification_data();
  auto run = [&, &x = x, &y = y](uint64_t seed) {
    auto model = Sequential(
        {layers::Dense(3, {.kernel_initializer = initializers::zeros(), .input_shape = {4}})});
    model->compile({.optimizer = optimizers::SGD({.learning_rate = 0.3}),
                    .loss = LossFunction(sparse_xent_from_logits),
                    .seed = seed});
    model->fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0});
    return model->get_weights();
  };
  expect_near(run(1), run(1), 0);
  const std::vector<float> a = values(run(1)[0]), b = values(run(2)[0]);
  EXPECT_NE(a, b);
}

TEST(ModelFitTest, StepsPerEpochAndStepsPerExecutionGroupBatchHooks) {
  auto [x, y] = classification_data(8);
  auto model = Sequential({layers::Dense(3, {.input_shape = {4}})});
  model->compile({.optimizer = optimizers::SGD({}),
                  .loss = LossFunction(sparse_xent_from_logits),
                  .steps_per_execution = 2});
  std::vector<int64_t> batch_ends;
  auto record = callbacks::LambdaCallback(
      {.on_batch_end = [&](int64_t b, Logs&) { batch_ends.push_back(b); }});
  auto ds = data::Dataset::from_tensor_slices({x, y}).batch(2).repeat();
  History h =
      model->fit(ds, {.epochs = 2, .verbose = 0, .callbacks = {record}, .steps_per_epoch = 4});
  EXPECT_EQ(batch_ends, (std::vector<int64_t>{1, 3, 1, 3}));
  EXPECT_EQ(model->optimizer()->iterations(), 8);
  EXPECT_EQ(h.epoch.size(), 2u);
}

TEST(ModelFitTest, DatasetRunningDryWithStepsPerEpochStopsTraining) {
  auto [x, y] = classification_data(8);
  auto model = Sequential({layers::Dense(3, {.input_shape = {4}})});
  model->compile({.optimizer = optimizers::SGD({}), .loss = LossFunction(sparse_xent_from_logits)});
  auto ds = data::Dataset::from_tensor_slices({x, y}).batch(2);  // 4 batches only
  History h = model->fit(ds, {.epochs = 5, .verbose = 0, .steps_per_epoch = 3});
  EXPECT_EQ(h.epoch, (std::vector<int>{0, 1}));
  EXPECT_EQ(model->optimizer()->iterations(), 4);
}

class CountingModel : public Model {
 public:
  CountingModel() : Model("CountingModel", "counting_model") {}
  int steps = 0;
  Logs train_step(const data::Element& data) override {
    ++steps;
    Logs logs = Model::train_step(data);
    logs.set("steps", steps);
    return logs;
  }

 protected:
  Tensor call(const Tensor& x, bool training) override { return (*dense_)(x, training); }

 private:
  std::shared_ptr<layers::DenseLayer> dense_ = track_layer(layers::Dense(3));
};

TEST(ModelFitTest, SubclassedModelCanOverrideTrainStep) {
  auto [x, y] = classification_data(12);
  auto model = std::make_shared<CountingModel>();
  model->compile({.optimizer = optimizers::SGD({}), .loss = LossFunction(sparse_xent_from_logits)});
  History h = model->fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0});
  EXPECT_EQ(model->steps, 6);
  EXPECT_EQ(h.history["steps"], (std::vector<double>{3, 6}));
  EXPECT_EQ(model->trainable_variables().size(), 2u);
}

TEST(ModelFitTest, ErrorsNameTheProblem) {
  auto model = Sequential({layers::Dense(1, {.input_shape = {2}})});
  Tensor x = strata::ones({4, 2}), y = strata::ones({3, 1});
  EXPECT_THROW(model->fit(x, strata::ones({4, 1})), FailedPreconditionError);  // not compiled
  model->compile({.optimizer = optimizers::SGD({}), .loss = "mse"});
  EXPECT_THROW(model->fit(x, y, {.verbose = 0}), InvalidArgumentError);  // 4 vs 3 examples
  EXPECT_THROW(model->fit(x, strata::ones({4, 1}), {.batch_size = 0}), InvalidArgumentError);
  EXPECT_THROW(model->fit(data::Dataset::from_tensor_slices({x, strata::ones({4, 1})}).batch(2),
                          {.validation_split = 0.5}),
               InvalidArgumentError);
  EXPECT_THROW(model->compile({.steps_per_execution = 0}), InvalidArgumentError);
}

TEST(ModelProgressTest, VerboseTwoPrintsOneLinePerEpoch) {
  auto [x, y] = classification_data(8);
  auto model = Sequential({layers::Dense(3, {.input_shape = {4}})});
  model->compile({.optimizer = optimizers::SGD({}),
                  .loss = LossFunction(sparse_xent_from_logits),
                  .metrics = {"accuracy"}});
  std::ostringstream out;
  auto bar = callbacks::ProgbarLogger({.out = &out, .dynamic_display = false});
  model->fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 2, .callbacks = {bar}});
  // Values print as Keras's "%.4f", or "%.4e" at or below 1e-3 (an accuracy of 0).
  const std::string value = "\\d+\\.\\d{4}(e[+-]\\d+)?";
  const std::string epoch_line =
      "2/2 - \\d+s - loss: " + value + " - accuracy: " + value + " - \\d+(us|ms|s)/step\n";
  const std::regex line("Epoch 1/2\n" + epoch_line + "Epoch 2/2\n" + epoch_line);
  EXPECT_TRUE(std::regex_match(out.str(), line)) << out.str();
}

TEST(ModelProgressTest, VerboseOneDrawsABarLiveOnATerminalAndOnceOtherwise) {
  auto [x, y] = classification_data(8);
  auto model = Sequential({layers::Dense(3, {.input_shape = {4}})});
  model->compile({.optimizer = optimizers::SGD({}), .loss = LossFunction(sparse_xent_from_logits)});
  std::ostringstream plain;
  model->fit(x, y,
             {.batch_size = 4,
              .epochs = 1,
              .verbose = 1,
              .callbacks = {callbacks::ProgbarLogger({.out = &plain, .dynamic_display = false})}});
  EXPECT_TRUE(
      std::regex_match(plain.str(), std::regex("2/2 \\[={30}\\] - \\d+s \\d+(us|ms|s)/step - loss: "
                                               "\\d+\\.\\d{4}\n")))
      << plain.str();
  std::ostringstream tty;
  Progbar bar(4, {.interval = 0, .out = &tty, .dynamic_display = true});
  bar.update(1, {{"loss", 0.5}});
  bar.update(4, {{"loss", 0.25}});
  EXPECT_THAT(tty.str(), ::testing::StartsWith("\r1/4 [======>.......................] - ETA: "));
  EXPECT_THAT(tty.str(), ::testing::HasSubstr("\r4/4 [==============================] - "));
  EXPECT_THAT(tty.str(), ::testing::EndsWith(" - loss: 0.2500\n"));
  EXPECT_EQ(Progbar::format_value(1e-4), "1.0000e-04");
  EXPECT_EQ(Progbar::format_time(0.0031, "step"), " 3ms/step");
}

// Keras infers an epoch's steps from a dataset of known cardinality, so the
// first epoch's bar already shows its target:
//   ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)   # cardinality 2
//   model.fit(ds, epochs=1, verbose=1)                         # 1/2 [====...
// A dataset whose cardinality is unknown (filter) shows "Unknown" until the
// first epoch has ended.
TEST(ModelProgressTest, FirstEpochKnowsItsStepsFromTheDatasetCardinality) {
  auto [x, y] = classification_data(8);
  auto model = Sequential({layers::Dense(3, {.input_shape = {4}})});
  model->compile({.optimizer = optimizers::SGD({}), .loss = LossFunction(sparse_xent_from_logits)});
  const auto slices = data::Dataset::from_tensor_slices({x, y});
  const auto known = slices.batch(4);
  ASSERT_EQ(known.cardinality(), 2);
  std::ostringstream tty;
  model->fit(known,
             {.epochs = 1,
              .verbose = 1,
              .callbacks = {callbacks::ProgbarLogger({.out = &tty, .dynamic_display = true})}});
  EXPECT_THAT(tty.str(), ::testing::StartsWith("\r1/2 [==============>...............] - ETA: "))
      << tty.str();
  EXPECT_THAT(tty.str(), ::testing::Not(::testing::HasSubstr("Unknown"))) << tty.str();

  const auto unknown = slices.filter([](const data::Element&) { return true; }).batch(4);
  ASSERT_EQ(unknown.cardinality(), data::UNKNOWN_CARDINALITY);
  std::ostringstream tty_unknown;
  model->fit(
      unknown,
      {.epochs = 2,
       .verbose = 1,
       .callbacks = {callbacks::ProgbarLogger({.out = &tty_unknown, .dynamic_display = true})}});
  const std::string text = tty_unknown.str();
  const size_t second_epoch = text.find("Epoch 2/2");
  ASSERT_NE(second_epoch, std::string::npos) << text;
  EXPECT_THAT(text.substr(0, second_epoch), ::testing::HasSubstr("      1/Unknown")) << text;
  EXPECT_THAT(text.substr(second_epoch), ::testing::HasSubstr("\r1/2 [")) << text;
}

// The distribution seam: under a one-replica strategy fit gives the default
// strategy's result, and the model's variables are the strategy's.
void expect_strategy_fit_matches_default(distribute::Strategy& strategy) {
  auto [x, y] = classification_data();
  auto reference = Sequential({layers::Dense(3, {.input_shape = {4}})});
  const std::vector<Tensor> init = reference->get_weights();
  reference->compile({.optimizer = optimizers::SGD({.learning_rate = 0.2, .momentum = 0.5}),
                      .loss = LossFunction(sparse_xent_from_logits),
                      .metrics = {"accuracy"}});
  History ref = reference->fit(
      x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .validation_data = {{x, y}}});

  std::shared_ptr<SequentialModel> model;
  {
    auto scope = strategy.scope();
    model = Sequential({layers::Dense(3, {.input_shape = {4}})});
    model->set_weights(init);
    // A Loss object (mean reduction): compile allows it under the strategy and scales it.
    model->compile({.optimizer = optimizers::SGD({.learning_rate = 0.2, .momentum = 0.5}),
                    .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                    .metrics = {"accuracy"}});
  }
  EXPECT_EQ(&model->distribute_strategy(), &strategy);
  History h =
      model->fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .validation_data = {{x, y}}});
  expect_near(model->get_weights(), reference->get_weights(), 1e-6);
  for (const std::string k : {"loss", "accuracy", "val_loss", "val_accuracy"}) {
    ASSERT_EQ(h.history[k].size(), 2u) << k;
    for (int e = 0; e < 2; ++e)
      EXPECT_NEAR(h.history[k][e], ref.history[k][e], 1e-5) << k << " epoch " << e;
  }
  Tensor p = model->predict(x, {.batch_size = 8, .verbose = 0});
  expect_near({p}, {reference->predict(x, {.batch_size = 8, .verbose = 0})}, 1e-6);
}

TEST(ModelDistributionTest, OneDeviceStrategyFitMatchesDefault) {
  distribute::OneDeviceStrategy strategy("CPU:0");
  expect_strategy_fit_matches_default(strategy);
}

TEST(ModelDistributionTest, MirroredStrategyOverOneDeviceFitMatchesDefault) {
  distribute::MirroredStrategy strategy({"CPU:0"});
  expect_strategy_fit_matches_default(strategy);
}

// Two replicas: each takes half of every global batch, the loss is divided by
// 2 and the gradients summed, so training equals one device on whole batches.
TEST(ModelDistributionTest, MirroredStrategyOverTwoDevicesFitMatchesDefault) {
  strata::testing::use_logical_cpus(2);
  distribute::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  expect_strategy_fit_matches_default(strategy);
}

}  // namespace
}  // namespace strata::keras
