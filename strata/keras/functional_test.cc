#include "strata/keras/functional.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/data/dataset.h"
#include "strata/keras/layers/dense.h"
#include "strata/keras/layers/input_layer.h"
#include "strata/keras/layers/merging.h"
#include "strata/keras/layers/serialization.h"
#include "strata/keras/optimizers/sgd.h"
#include "strata/keras/sequential.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/random_ops.h"

namespace strata::keras {
namespace {

std::vector<float> values(const Tensor& t) {
  return strata::cast(t, DType::float32).to_vector<float>();
}

TEST(FunctionalModelTest, RunsTheLayerGraphOnRealInputs) {
  reset_uids_for_testing();
  // inputs = tf.keras.Input(shape=(3,))
  // outputs = tf.keras.layers.Dense(2)(inputs)
  // model = tf.keras.Model(inputs, outputs)
  KerasTensor inputs = Input({3});
  auto dense = layers::Dense(2);
  KerasTensor outputs = (*dense)(inputs);
  auto model = models::Model(inputs, outputs);
  EXPECT_EQ(inputs.shape(), TensorShape({-1, 3}));
  EXPECT_EQ(outputs.shape(), TensorShape({-1, 2}));
  EXPECT_EQ(inputs.node()->layer->name(), "input_1");  // Keras counts Inputs from 1
  EXPECT_EQ(model->name(), "model");
  EXPECT_EQ(model->class_name(), "Functional");
  EXPECT_TRUE(model->built());
  // kernel [[1, 0], [0, 1], [1, 1]], bias [0.5, -0.5]:
  // [1, 2, 3] -> [1 + 3 + 0.5, 2 + 3 - 0.5] = [4.5, 4.5].
  dense->set_weights({strata::constant({1.f, 0.f, 0.f, 1.f, 1.f, 1.f}, {3, 2}),
                      strata::constant({0.5f, -0.5f}, {2})});
  Tensor y = (*model)(strata::constant({1.f, 2.f, 3.f}, {1, 3}));
  EXPECT_EQ(values(y), (std::vector<float>{4.5f, 4.5f}));
  // The layers, InputLayer first, as Keras's model.layers.
  ASSERT_EQ(model->layers().size(), 2u);
  EXPECT_EQ(model->layers()[0]->class_name(), "InputLayer");
  EXPECT_EQ(model->count_params(), 8);
  // Keras: "Input 0 of layer "model" is incompatible with the layer".
  EXPECT_THROW((*model)(strata::constant({1.f, 2.f}, {1, 2})), InvalidArgumentError);
}

// Two inputs, one Dense used on both branches (shared weights), merged by Add
// and Concatenate; two outputs.
struct SharedBranches {
  KerasTensor a, b, sum, both;
  std::shared_ptr<layers::DenseLayer> shared;
  FunctionalModelPtr model;
};

SharedBranches shared_branches() {
  reset_uids_for_testing();
  SharedBranches s;
  // a = tf.keras.Input(shape=(2,)); b = tf.keras.Input(shape=(2,))
  // shared = tf.keras.layers.Dense(1, use_bias=False)
  // ya, yb = shared(a), shared(b)
  // total = tf.keras.layers.Add()([ya, yb]); both = tf.keras.layers.Concatenate()([ya, yb])
  // model = tf.keras.Model([a, b], [total, both])
  s.a = Input({2});
  s.b = Input({2});
  s.shared = layers::Dense(1, {.use_bias = false});
  KerasTensor ya = (*s.shared)(s.a);
  KerasTensor yb = (*s.shared)(s.b);
  s.sum = (*layers::Add())({ya, yb});
  s.both = (*layers::Concatenate())({ya, yb});
  s.model = models::Model({s.a, s.b}, {s.sum, s.both});
  s.shared->set_weights({strata::constant({1.f, 2.f}, {2, 1})});
  return s;
}

TEST(FunctionalModelTest, SharedLayerAndMergeLayersOverTwoInputsAndTwoOutputs) {
  SharedBranches s = shared_branches();
  EXPECT_EQ(s.sum.shape(), TensorShape({-1, 1}));
  EXPECT_EQ(s.both.shape(), TensorShape({-1, 2}));
  // ya = [1, 1] . [1, 2] = 3, yb = [2, 0] . [1, 2] = 2: total 5, both [3, 2].
  std::vector<Tensor> out = s.model->call_outputs(
      {strata::constant({1.f, 1.f}, {1, 2}), strata::constant({2.f, 0.f}, {1, 2})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(values(out[0]), (std::vector<float>{5.f}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{3.f, 2.f}));
  // One kernel: the shared layer's weights are counted once.
  EXPECT_EQ(s.model->weights().size(), 1u);
  // Keras's model.layers: by depth, deepest first.
  std::vector<std::string> names;
  for (const LayerPtr& l : s.model->layers()) names.push_back(l->name());
  EXPECT_EQ(names, (std::vector<std::string>{"input_1", "input_2", "dense", "add", "concatenate"}));
  // A model with two outputs gives them through call_outputs, not as one tensor.
  EXPECT_THROW(
      (*s.model)({strata::constant({1.f, 1.f}, {1, 2}), strata::constant({2.f, 0.f}, {1, 2})}),
      UnimplementedError);
}

TEST(FunctionalModelTest, GetConfigHasKerasFunctionalShape) {
  SharedBranches s = shared_branches();
  // config = model.get_config()
  const nlohmann::json config = s.model->get_config();
  EXPECT_EQ(config["name"], "model");
  EXPECT_EQ(config["input_layers"],
            nlohmann::json::parse(R"([["input_1", 0, 0], ["input_2", 0, 0]])"));
  EXPECT_EQ(config["output_layers"],
            nlohmann::json::parse(R"([["add", 0, 0], ["concatenate", 0, 0]])"));
  const nlohmann::json& layers = config["layers"];
  ASSERT_EQ(layers.size(), 5u);
  EXPECT_EQ(layers[0], nlohmann::json::parse(R"({
      "class_name": "InputLayer", "name": "input_1", "inbound_nodes": [],
      "config": {"batch_input_shape": [null, 2], "dtype": "float32", "sparse": false,
                 "ragged": false, "name": "input_1"}})"));
  // The shared Dense has two nodes, one per input.
  EXPECT_EQ(layers[2]["class_name"], "Dense");
  EXPECT_EQ(layers[2]["inbound_nodes"],
            nlohmann::json::parse(R"([[["input_1", 0, 0, {}]], [["input_2", 0, 0, {}]]])"));
  EXPECT_EQ(layers[2]["config"], nlohmann::json::parse(R"({"name": "dense", "trainable": true,
      "dtype": "float32", "units": 1, "activation": "linear", "use_bias": false,
      "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null})"));
  EXPECT_EQ(layers[3]["inbound_nodes"],
            nlohmann::json::parse(R"([[["dense", 0, 0, {}], ["dense", 1, 0, {}]]])"));
  EXPECT_EQ(layers[4]["config"]["axis"], -1);
}

TEST(FunctionalModelTest, FromConfigRebuildsTheSameGraph) {
  SharedBranches s = shared_branches();
  const nlohmann::json config = s.model->get_config();
  // rebuilt = tf.keras.Model.from_config(config); rebuilt.set_weights(model.get_weights())
  std::shared_ptr<Model> rebuilt = Model::from_config(config);
  auto functional = std::dynamic_pointer_cast<FunctionalModel>(rebuilt);
  ASSERT_NE(functional, nullptr);
  EXPECT_EQ(functional->get_config(), config);
  functional->set_weights(s.model->get_weights());
  std::vector<Tensor> out = functional->call_outputs(
      {strata::constant({1.f, 1.f}, {1, 2}), strata::constant({2.f, 0.f}, {1, 2})});
  EXPECT_EQ(values(out[0]), (std::vector<float>{5.f}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{3.f, 2.f}));
  // tf.keras.models.model_from_config({"class_name": "Functional", "config": config})
  auto again = models::model_from_config({{"class_name", "Functional"}, {"config", config}});
  EXPECT_EQ(again->get_config(), config);
}

// An InputLayer's node holds the layer; the layer must not hold the node
// back, or every Input() and the model over it would live for ever.
TEST(FunctionalModelTest, AModelItsLayersAndItsInputsAreFreedWithTheLastHandle) {
  reset_uids_for_testing();
  std::weak_ptr<Layer> input_layer;
  std::weak_ptr<Layer> dense;
  std::weak_ptr<FunctionalModel> model;
  {
    // inputs = tf.keras.Input(shape=(2,)); outputs = tf.keras.layers.Dense(1)(inputs)
    // model = tf.keras.Model(inputs, outputs)
    KerasTensor inputs = Input({2});
    auto layer = layers::Dense(1);
    KerasTensor outputs = (*layer)(inputs);
    FunctionalModelPtr m = models::Model(inputs, outputs);
    // The same node while a tensor of it is alive.
    auto input = std::dynamic_pointer_cast<layers::InputLayerLayer>(inputs.node()->layer);
    ASSERT_NE(input, nullptr);
    EXPECT_EQ(input->output().node(), inputs.node());
    input_layer = input;
    dense = layer;
    model = m;
  }
  EXPECT_TRUE(input_layer.expired());
  EXPECT_TRUE(dense.expired());
  EXPECT_TRUE(model.expired());
}

TEST(FunctionalModelTest, DisconnectedGraphAndNonInputTensorsAreErrors) {
  reset_uids_for_testing();
  KerasTensor a = Input({2});
  KerasTensor b = Input({2});
  KerasTensor sum = (*layers::Add())({a, b});
  // Keras: ValueError "Graph disconnected: cannot obtain value for tensor ...".
  try {
    models::Model(a, sum);
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("Graph disconnected"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("input_2"));
  }
  KerasTensor hidden = (*layers::Dense(2))(a);
  EXPECT_THROW(models::Model(hidden, sum), InvalidArgumentError);
  // "A merge layer should be called on a list of inputs."
  EXPECT_THROW((*layers::Add())(a), InvalidArgumentError);
}

TEST(FunctionalModelTest, FitMatchesTheSameSequentialModel) {
  // The same two Dense layers as a Sequential and as a functional model, with
  // equal initial weights, trained by the same SGD on the same batches, end
  // with equal weights: fit runs the functional graph as the Sequential stack.
  reset_uids_for_testing();
  Tensor x = strata::random::uniform({24, 3}, {.minval = -1, .maxval = 1, .seed = 3});
  Tensor y = strata::random::uniform({24, 1}, {.minval = -1, .maxval = 1, .seed = 4});
  auto seq =
      Sequential({layers::Dense(4, {.activation = "relu", .input_shape = {3}}), layers::Dense(1)});
  KerasTensor in = Input({3});
  KerasTensor h = (*layers::Dense(4, {.activation = "relu"}))(in);
  auto model = models::Model(in, (*layers::Dense(1))(h));
  model->set_weights(seq->get_weights());
  for (const ModelPtr& m : {ModelPtr(seq), ModelPtr(model)}) {
    m->compile({.optimizer = optimizers::SGD({.learning_rate = 0.1}), .loss = "mse"});
  }
  History hs = seq->fit(x, y, {.batch_size = 8, .epochs = 3, .verbose = 0, .shuffle = false});
  History hf = model->fit(x, y, {.batch_size = 8, .epochs = 3, .verbose = 0, .shuffle = false});
  EXPECT_EQ(hs.history["loss"], hf.history["loss"]);
  EXPECT_LT(hf.history["loss"].back(), hf.history["loss"].front());
  const std::vector<Tensor> ws = seq->get_weights(), wf = model->get_weights();
  ASSERT_EQ(ws.size(), wf.size());
  for (size_t i = 0; i < ws.size(); ++i) EXPECT_EQ(values(ws[i]), values(wf[i]));
  EXPECT_EQ(values(seq->predict(x)), values(model->predict(x)));
  EXPECT_EQ(seq->evaluate(x, y, {.verbose = 0}).at("loss"),
            model->evaluate(x, y, {.verbose = 0}).at("loss"));
}

TEST(FunctionalModelTest, TwoInputModelTrainsOnElementsOfBothInputsAndTargets) {
  // a = Input((2,)); b = Input((1,)); out = Dense(1)(Concatenate()([a, b]))
  // model.fit(tf.data.Dataset.from_tensor_slices(((xa, xb), y)).batch(8))
  // equals a Sequential Dense(1) fit on the concatenated features.
  reset_uids_for_testing();
  Tensor xa = strata::random::uniform({16, 2}, {.minval = -1, .maxval = 1, .seed = 5});
  Tensor xb = strata::random::uniform({16, 1}, {.minval = -1, .maxval = 1, .seed = 6});
  Tensor y = strata::random::uniform({16, 1}, {.minval = -1, .maxval = 1, .seed = 7});
  KerasTensor a = Input({2}), b = Input({1});
  auto model = models::Model({a, b}, (*layers::Dense(1))((*layers::Concatenate())({a, b})));
  auto seq = Sequential({layers::Dense(1, {.input_shape = {3}})});
  seq->set_weights(model->get_weights());
  for (const ModelPtr& m : {ModelPtr(seq), ModelPtr(model)}) {
    m->compile({.optimizer = optimizers::SGD({.learning_rate = 0.1}), .loss = "mse"});
  }
  auto two = data::Dataset::from_tensor_slices({xa, xb, y}).batch(8);
  auto one = data::Dataset::from_tensor_slices({strata::concat({xa, xb}, 1), y}).batch(8);
  History hf = model->fit(two, {.epochs = 2, .verbose = 0});
  History hs = seq->fit(one, {.epochs = 2, .verbose = 0});
  EXPECT_EQ(hf.history["loss"], hs.history["loss"]);
  EXPECT_EQ(values(model->get_weights()[0]), values(seq->get_weights()[0]));
}

TEST(FunctionalModelTest, SummaryListsInputLayersAndConnections) {
  reset_uids_for_testing();
  KerasTensor in = Input({5});
  auto chain = models::Model(in, (*layers::Dense(2))(in));
  std::ostringstream out;
  chain->summary(out);
  // A chain prints in the Sequential layout, its InputLayer first (Keras 2).
  EXPECT_EQ(out.str(),
            "Model: \"model\"\n"
            "_________________________________________________________________\n"
            " Layer (type)                Output Shape              Param #   \n"
            "=================================================================\n"
            " input_1 (InputLayer)        [(None, 5)]               0         \n"
            "                                                                 \n"
            " dense (Dense)               (None, 2)                 12        \n"
            "                                                                 \n"
            "=================================================================\n"
            "Total params: 12\n"
            "Trainable params: 12\n"
            "Non-trainable params: 0\n"
            "_________________________________________________________________\n");
  SharedBranches s = shared_branches();
  std::ostringstream wide;
  s.model->summary(wide);
  EXPECT_THAT(wide.str(), ::testing::HasSubstr("Connected to"));
  // Keras's print_row breaks a connection list after each element ("',").
  EXPECT_THAT(wide.str(),
              ::testing::HasSubstr(" add (Add)                   (None, 1)                    0   "
                                   "      ['dense[0][0]',               \n"
                                   "                                                              "
                                   "       'dense[1][0]']               \n"));
}

TEST(SequentialConfigTest, GetConfigAndFromConfigAsKeras) {
  reset_uids_for_testing();
  // model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(5,)),
  // tf.keras.layers.Dense(1)]) config = model.get_config()
  auto model = Sequential({layers::Dense(2, {.input_shape = {5}}), layers::Dense(1)});
  const nlohmann::json config = model->get_config();
  EXPECT_EQ(config["name"], "sequential");
  ASSERT_EQ(config["layers"].size(), 3u);
  EXPECT_EQ(config["layers"][0], nlohmann::json::parse(R"({"class_name": "InputLayer",
      "config": {"batch_input_shape": [null, 5], "dtype": "float32", "sparse": false,
                 "ragged": false, "name": "dense_input"}})"));
  EXPECT_EQ(config["layers"][1]["config"]["batch_input_shape"], nlohmann::json::parse("[null, 5]"));
  EXPECT_EQ(config["layers"][2]["class_name"], "Dense");
  // tf.keras.Sequential.from_config(config)
  auto rebuilt = SequentialModel::from_config(config);
  EXPECT_TRUE(rebuilt->built());
  EXPECT_EQ(rebuilt->count_params(), 15);
  EXPECT_EQ(rebuilt->get_config(), config);
  // Built by a call instead: build_input_shape, as Keras.
  auto lazy = Sequential({layers::Dense(1)});
  (*lazy)(strata::zeros({4, 3}));
  EXPECT_EQ(lazy->get_config()["build_input_shape"], nlohmann::json::parse("[4, 3]"));
  EXPECT_EQ(SequentialModel::from_config(lazy->get_config())->count_params(), 4);
  // An unknown class is named.
  EXPECT_THROW(
      layers::deserialize({{"class_name", "Bidirectional"}, {"config", nlohmann::json::object()}}),
      UnimplementedError);
}

}  // namespace
}  // namespace strata::keras
