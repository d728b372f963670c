// model.save / keras.models.load_model: architecture, compile state, weights
// and optimizer state in one file, and the model rebuilt from it alone.
#include "strata/keras/saving/saving_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/core/config.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/keras/functional.h"
#include "strata/keras/layers/layers.h"
#include "strata/keras/losses.h"
#include "strata/keras/optimizers/optimizers.h"
#include "strata/keras/saving/object_registration.h"
#include "strata/keras/sequential.h"
#include "strata/keras/weights_io.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/random_ops.h"
#include "strata/testing/files.h"
#include "strata/testing/logical_devices.h"

namespace strata::keras {
namespace {

using ::testing::HasSubstr;
namespace sd = strata::distribute;

class SavingTest : public ::testing::Test {
 protected:
  void SetUp() override { reset_uids_for_testing(); }
  void TearDown() override { saving::clear_registered_objects_for_testing(); }
  std::string path(const std::string& name) const { return dir_.file(name); }
  strata::testing::TempDir dir_{"strata_saving"};
};

std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

void expect_same_weights(const Model& a, const Model& b) {
  const std::vector<Tensor> wa = a.get_weights(), wb = b.get_weights();
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) {
    EXPECT_EQ(wa[i].shape(), wb[i].shape()) << a.weights()[i].name();
    EXPECT_EQ(floats(wa[i]), floats(wb[i])) << a.weights()[i].name();
  }
}

// tf.keras.Sequential([Conv2D(4, 3, activation="relu", input_shape=(6, 6, 1)),
//     BatchNormalization(), MaxPooling2D(2), Flatten(), Dense(3)])
std::shared_ptr<SequentialModel> small_cnn() {
  return Sequential({layers::Conv2D(4, {3, 3}, {.activation = "relu", .input_shape = {6, 6, 1}}),
                     layers::BatchNormalization(), layers::MaxPooling2D({2, 2}), layers::Flatten(),
                     layers::Dense(3)});
}

Tensor images() { return strata::random::uniform({16, 6, 6, 1}, {.seed = 11}); }
Tensor labels() { return strata::random::uniform_int({16}, 0, 3, {.seed = 12}); }

TEST_F(SavingTest, SequentialModelPredictsBitForBitAndTrainsOnAsIfNeverSaved) {
  // model.compile(optimizer=Adam(0.01), loss=SparseCategoricalCrossentropy(from_logits=True),
  //               metrics=["accuracy"]); model.fit(x, y, batch_size=8, epochs=2, shuffle=False)
  // model.save(path); loaded = tf.keras.models.load_model(path)
  auto model = small_cnn();
  model->compile({.optimizer = optimizers::Adam({.learning_rate = 0.01}),
                  .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                  .metrics = {"accuracy"}});
  const Tensor x = images(), y = labels();
  model->fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false});
  model->save(path("cnn.keras"));

  std::shared_ptr<Model> loaded = models::load_model(path("cnn.keras"));
  EXPECT_EQ(loaded->class_name(), "Sequential");
  EXPECT_EQ(loaded->get_config(), model->get_config());
  EXPECT_EQ(loaded->get_compile_config(), model->get_compile_config());
  EXPECT_EQ(loaded->get_compile_config()["loss"]["config"]["from_logits"], true);
  ASSERT_NE(loaded->optimizer(), nullptr);
  EXPECT_EQ(loaded->optimizer()->iterations(), 4);
  expect_same_weights(*loaded, *model);
  EXPECT_EQ(floats(loaded->predict(x)), floats(model->predict(x)));

  // Both go on for two epochs: the Adam moments and step count came back, so
  // every update is the same.
  History h1 = model->fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false});
  History h2 = loaded->fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false});
  EXPECT_EQ(h2.history["loss"], h1.history["loss"]);
  EXPECT_EQ(h2.history["accuracy"], h1.history["accuracy"]);
  expect_same_weights(*loaded, *model);

  // Without the optimizer state (compile=False, then a fresh Adam) training
  // diverges: the check above would notice a lost state.
  std::shared_ptr<Model> fresh = models::load_model(path("cnn.keras"), {.compile = false});
  EXPECT_FALSE(fresh->compiled());
  fresh->compile({.optimizer = optimizers::Adam({.learning_rate = 0.01}),
                  .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})});
  auto again = models::load_model(path("cnn.keras"));
  again->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0, .shuffle = false});
  fresh->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0, .shuffle = false});
  EXPECT_NE(floats(fresh->get_weights()[0]), floats(again->get_weights()[0]));
}

TEST_F(SavingTest, ReshapeRoundTripsInTheMultiWorkerGuidesModel) {
  // model = tf.keras.Sequential([
  //     tf.keras.layers.InputLayer(input_shape=(28, 28)),
  //     tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
  //     tf.keras.layers.Conv2D(2, 3, activation='relu'),
  //     tf.keras.layers.Flatten(), tf.keras.layers.Dense(3)])
  // model.layers[0].get_config()["target_shape"]  -> (28, 28, 1)
  // model.save(path); loaded = tf.keras.models.load_model(path)
  auto model = Sequential(
      {layers::InputLayer({.input_shape = {{28, 28}}}), layers::Reshape({28, 28, 1}),
       layers::Conv2D(2, 3, {.activation = "relu"}), layers::Flatten(), layers::Dense(3)});
  model->compile({.optimizer = optimizers::SGD({.learning_rate = 0.001}),
                  .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                  .metrics = {"accuracy"}});
  const nlohmann::json reshape = model->get_config()["layers"][1];
  EXPECT_EQ(reshape["class_name"], "Reshape");
  EXPECT_EQ(reshape["config"]["target_shape"], nlohmann::json::array({28, 28, 1}));
  // A -1 is kept, as Keras keeps it.
  EXPECT_EQ(layers::Reshape({-1, 4})->get_config()["target_shape"], nlohmann::json::array({-1, 4}));
  auto copy = layers::deserialize(layers::serialize(*layers::Reshape({-1, 4})));
  EXPECT_EQ(std::dynamic_pointer_cast<layers::ReshapeLayer>(copy)->target_shape(),
            (std::vector<int64_t>{-1, 4}));

  const Tensor x = strata::random::uniform({4, 28, 28}, {.seed = 13});
  const Tensor y = strata::random::uniform_int({4}, 0, 3, {.seed = 14});
  model->fit(x, y, {.batch_size = 2, .epochs = 1, .verbose = 0, .shuffle = false});
  model->save(path("keras-model"));
  std::shared_ptr<Model> loaded = models::load_model(path("keras-model"));
  EXPECT_EQ(loaded->get_config(), model->get_config());
  EXPECT_EQ(floats(loaded->predict(x)), floats(model->predict(x)));
  const Logs saved = model->evaluate(x, y, {.verbose = 0});
  const Logs restored = loaded->evaluate(x, y, {.verbose = 0});
  EXPECT_EQ(restored.keys(), saved.keys());
  EXPECT_EQ(restored.at("loss"), saved.at("loss"));
  EXPECT_EQ(restored.at("accuracy"), saved.at("accuracy"));
}

// inputs = tf.keras.Input((5,)); h = Dense(8, activation="relu")(inputs)
// out = Dense(2)(Add()([Dense(4)(h), Dense(4, activation="tanh")(h)]))
// model = tf.keras.Model(inputs, out)
FunctionalModelPtr branchy() {
  KerasTensor inputs = Input({5});
  KerasTensor h = (*layers::Dense(8, {.activation = "relu"}))(inputs);
  KerasTensor a = (*layers::Dense(4))(h);
  KerasTensor b = (*layers::Dense(4, {.activation = "tanh"}))(h);
  KerasTensor sum = (*layers::Add())(std::vector<KerasTensor>{a, b});
  return models::Model(inputs, (*layers::Dense(2))(sum));
}

TEST_F(SavingTest, FunctionalModelPredictsBitForBitAndTrainsOnAsIfNeverSaved) {
  // model.compile(optimizer=SGD(0.05, momentum=0.9), loss="mse", metrics=["mae"])
  auto model = branchy();
  model->compile({.optimizer = optimizers::SGD({.learning_rate = 0.05, .momentum = 0.9}),
                  .loss = "mse",
                  .metrics = {"mae"}});
  const Tensor x = strata::random::uniform({12, 5}, {.seed = 3});
  const Tensor y = strata::random::uniform({12, 2}, {.seed = 4});
  model->fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false});
  model->save(path("branchy.keras"));

  auto loaded = models::load_model(path("branchy.keras"));
  EXPECT_EQ(loaded->class_name(), "Functional");
  EXPECT_EQ(loaded->get_config(), model->get_config());
  EXPECT_EQ(loaded->get_compile_config()["loss"], "mse");
  EXPECT_EQ(loaded->get_compile_config()["optimizer"]["config"]["momentum"], 0.9);
  EXPECT_EQ(loaded->optimizer()->iterations(), 6);
  EXPECT_EQ(floats(loaded->predict(x)), floats(model->predict(x)));
  History h1 = model->fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false});
  History h2 = loaded->fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false});
  EXPECT_EQ(h2.history["loss"], h1.history["loss"]);
  EXPECT_EQ(h2.history["mae"], h1.history["mae"]);
  expect_same_weights(*loaded, *model);
}

TEST_F(SavingTest, TheFileHoldsKerasConfigJsonBesideTheWeights) {
  auto model = small_cnn();
  model->compile({.optimizer = "adam", .loss = "sparse_categorical_crossentropy"});
  model->save(path("m.keras"));
  const WeightsFile f = read_weights_file(path("m.keras"));
  EXPECT_EQ(f.kind, "model");
  const nlohmann::json config = nlohmann::json::parse(f.config);
  EXPECT_EQ(config["module"], "keras");
  EXPECT_EQ(config["class_name"], "Sequential");
  EXPECT_EQ(config["config"], model->get_config());
  EXPECT_EQ(config["compile_config"]["optimizer"]["class_name"], "Adam");
  EXPECT_EQ(config["compile_config"]["loss"], "sparse_categorical_crossentropy");
  EXPECT_EQ(f.model.size(), model->weights().size());
  // Not trained yet: the optimizer has only `iterations`.
  EXPECT_EQ(f.optimizer.size(), 1u);
  // load_weights reads the same file into a model built in code.
  auto other = small_cnn();
  other->load_weights(path("m.keras"));
  expect_same_weights(*other, *model);
}

TEST_F(SavingTest, LoadingInsideAStrategyScopeMakesDistributedVariables) {
  strata::testing::use_logical_cpus(2);
  auto model = small_cnn();
  model->compile({.optimizer = optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9}),
                  .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})});
  const Tensor x = images(), y = labels();
  model->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0, .shuffle = false});
  model->save(path("cnn.keras"));

  // strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
  // with strategy.scope(): loaded = tf.keras.models.load_model(path)
  sd::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  std::shared_ptr<Model> loaded;
  {
    auto scope = strategy.scope();
    loaded = models::load_model(path("cnn.keras"));
  }
  EXPECT_EQ(&loaded->distribute_strategy(), &strategy);
  const std::vector<Variable> saved = model->weights();
  const std::vector<Variable> vars = loaded->weights();
  ASSERT_EQ(vars.size(), saved.size());
  for (size_t i = 0; i < vars.size(); ++i) {
    EXPECT_TRUE(sd::is_mirrored_variable(vars[i]) || sd::is_sync_on_read_variable(vars[i]))
        << vars[i].name();
    // Every replica's copy holds the saved value.
    for (const Variable& copy : sd::distributed_components(vars[i]))
      EXPECT_EQ(floats(copy.value()), floats(saved[i].value())) << vars[i].name();
  }
  for (const Variable& v : loaded->optimizer()->variables()) {
    EXPECT_TRUE(sd::is_mirrored_variable(v)) << v.name();
  }
  EXPECT_EQ(loaded->optimizer()->iterations(), 2);
  // The mirrored model predicts what the saved one does and keeps training.
  const std::vector<float> want = floats(model->predict(x));
  const std::vector<float> got = floats(loaded->predict(x, {.batch_size = 8}));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  History h = loaded->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0, .shuffle = false});
  EXPECT_EQ(loaded->optimizer()->iterations(), 4);
  EXPECT_TRUE(std::isfinite(h.history["loss"][0]));
}

// A layer class of the program's own: y = x * factor * scale (a weight).
class ScaleLayer : public Layer {
 public:
  ScaleLayer(double factor, const LayerArgs& args)
      : Layer("ScaleLayer", "scale_layer", args), factor_(factor) {}
  TensorShape compute_output_shape(const TensorShape& input_shape) const override {
    return input_shape;
  }
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["factor"] = factor_;
    return c;
  }
  static LayerPtr from_config(const nlohmann::json& c) {
    return std::make_shared<ScaleLayer>(c.at("factor").get<double>(),
                                        LayerArgs{.name = c.at("name").get<std::string>()});
  }

 protected:
  void build_weights(const TensorShape& input_shape) override {
    scale_ = add_weight("scale", TensorShape{input_shape.dim(input_shape.rank() - 1)});
  }
  Tensor call(const Tensor& inputs, bool) override {
    return strata::multiply(strata::multiply(inputs, scale_.value()),
                            strata::constant(static_cast<float>(factor_)));
  }

 private:
  double factor_;
  Variable scale_;
};

std::shared_ptr<SequentialModel> with_custom_layer() {
  return Sequential(
      {layers::Dense(3, {.input_shape = {4}}), std::make_shared<ScaleLayer>(2.5, LayerArgs{})});
}

TEST_F(SavingTest, RegisteredCustomLayerRoundTrips) {
  // @tf.keras.saving.register_keras_serializable(package="my_package")
  // class ScaleLayer(tf.keras.layers.Layer): ...
  saving::register_keras_serializable("my_package", "ScaleLayer", ScaleLayer::from_config);
  auto model = with_custom_layer();
  // Sequential's config: the InputLayer, the Dense, the ScaleLayer.
  const nlohmann::json entry = model->get_config()["layers"][2];
  EXPECT_EQ(entry["class_name"], "ScaleLayer");
  EXPECT_EQ(entry["registered_name"], "my_package>ScaleLayer");
  EXPECT_EQ(saving::get_registered_name("ScaleLayer"), "my_package>ScaleLayer");
  model->save(path("custom.keras"));

  auto loaded = models::load_model(path("custom.keras"));
  ASSERT_EQ(loaded->layers().size(), 2u);
  auto* scale = dynamic_cast<ScaleLayer*>(loaded->layers()[1].get());
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(loaded->get_config(), model->get_config());
  const Tensor x = strata::random::uniform({5, 4}, {.seed = 9});
  EXPECT_EQ(floats(loaded->predict(x)), floats(model->predict(x)));
}

TEST_F(SavingTest, CustomObjectsStandInForARegistration) {
  auto model = with_custom_layer();
  model->save(path("custom.keras"));
  // tf.keras.models.load_model(path, custom_objects={"ScaleLayer": ScaleLayer})
  auto loaded = models::load_model(path("custom.keras"),
                                   {.custom_objects = {{"ScaleLayer", ScaleLayer::from_config}}});
  const Tensor x = strata::random::uniform({5, 4}, {.seed = 9});
  EXPECT_EQ(floats(loaded->predict(x)), floats(model->predict(x)));
}

TEST_F(SavingTest, AnUnknownLayerClassIsAClearError) {
  saving::register_keras_serializable("my_package", "ScaleLayer", ScaleLayer::from_config);
  with_custom_layer()->save(path("custom.keras"));
  saving::clear_registered_objects_for_testing();
  try {
    models::load_model(path("custom.keras"));
    FAIL() << "expected UnimplementedError";
  } catch (const UnimplementedError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path("custom.keras")));
    EXPECT_THAT(e.what(), HasSubstr("unknown layer class \"ScaleLayer\""));
    EXPECT_THAT(e.what(), HasSubstr("my_package>ScaleLayer"));
    EXPECT_THAT(e.what(), HasSubstr("register_keras_serializable"));
  }
}

TEST_F(SavingTest, CorruptOrMalformedFilesAreDataLossNamingFileAndField) {
  auto model = small_cnn();
  model->compile({.optimizer = "sgd", .loss = "mse"});
  model->save(path("m.keras"));
  // A flipped byte inside the manifest (where the config lives).
  std::string bytes = strata::read_file(path("m.keras"));
  const size_t at = bytes.find("\"class_name\"");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 2] ^= 0x20;
  strata::write_file_atomically(path("flipped.keras"), bytes);
  try {
    models::load_model(path("flipped.keras"));
    FAIL() << "expected DataLossError";
  } catch (const DataLossError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path("flipped.keras")));
    EXPECT_THAT(e.what(), HasSubstr("manifest checksum mismatch"));
  }
  // Whole checksums around a config that lacks a field, or mistypes one.
  WeightsFile f = read_weights_file(path("m.keras"));
  nlohmann::json config = nlohmann::json::parse(f.config);
  config.erase("class_name");
  f.config = config.dump();
  write_weights_file(path("no_class.keras"), f);
  try {
    models::load_model(path("no_class.keras"));
    FAIL() << "expected DataLossError";
  } catch (const DataLossError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path("no_class.keras")));
    EXPECT_THAT(e.what(), HasSubstr("'class_name'"));
  }
  config = nlohmann::json::parse(read_weights_file(path("m.keras")).config);
  // Sequential's config: InputLayer, Conv2D, BatchNormalization, MaxPooling2D, Flatten, Dense.
  ASSERT_EQ(config["config"]["layers"][5]["class_name"], "Dense");
  config["config"]["layers"][5]["config"]["units"] = "three";
  f.config = config.dump();
  write_weights_file(path("mistyped.keras"), f);
  try {
    models::load_model(path("mistyped.keras"));
    FAIL() << "expected DataLossError";
  } catch (const DataLossError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path("mistyped.keras")));
    EXPECT_THAT(e.what(), HasSubstr("\"units\""));
  }
  // A weights-only file is no saved model.
  model->save_weights(path("w.weights"));
  EXPECT_THROW(models::load_model(path("w.weights")), InvalidArgumentError);
  EXPECT_THROW(models::load_model(path("missing.keras")), NotFoundError);
}

TEST_F(SavingTest, OptimizersAndLossesRoundTripThroughTheirConfigs) {
  // tf.keras.optimizers.serialize / deserialize
  const std::vector<optimizers::OptimizerPtr> opts = {
      optimizers::SGD({.learning_rate = 0.3, .momentum = 0.5, .nesterov = true}),
      optimizers::Adam({.learning_rate = 0.002, .amsgrad = true, .clipnorm = 1.5}),
      optimizers::AdamW({.weight_decay = 0.01}),
      optimizers::RMSprop({.rho = 0.8, .centered = true}),
      optimizers::Adagrad({.initial_accumulator_value = 0.2})};
  for (const auto& o : opts) {
    const nlohmann::json j = optimizers::serialize(*o);
    EXPECT_EQ(optimizers::serialize(*optimizers::deserialize(j)), j) << j.dump();
  }
  EXPECT_EQ(optimizers::serialize(*opts[1])["config"]["clipnorm"], 1.5);
  EXPECT_EQ(optimizers::serialize(*opts[2])["class_name"], "AdamW");
  // tf.keras.losses.serialize / deserialize
  const std::vector<losses::LossPtr> ls = {
      losses::SparseCategoricalCrossentropy({.from_logits = true}),
      losses::CategoricalCrossentropy({.label_smoothing = 0.1}),
      losses::BinaryCrossentropy({.from_logits = true, .reduction = losses::Reduction::SUM}),
      losses::MeanSquaredError(),
      losses::MeanAbsoluteError(),
      losses::Huber({.delta = 2.0})};
  for (const auto& l : ls) {
    const nlohmann::json j = losses::serialize(*l);
    EXPECT_EQ(losses::serialize(*losses::deserialize(j)), j) << j.dump();
  }
  EXPECT_EQ(losses::serialize(*ls[2])["config"]["reduction"], "sum");
  EXPECT_THROW(losses::serialize(*losses::make_loss(losses::mean_squared_error, "mine")),
               UnimplementedError);
}

}  // namespace
}  // namespace strata::keras
