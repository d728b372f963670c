#include "strata/train/checkpoint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/keras/layers/dense.h"
#include "strata/keras/optimizers/adam.h"
#include "strata/keras/optimizers/sgd.h"
#include "strata/keras/sequential.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/testing/expect_error.h"
#include "strata/train/checkpoint_manager.h"
#include "strata/train/checkpoint_reader.h"

namespace strata::train {
namespace {

namespace layers = keras::layers;
namespace optimizers = keras::optimizers;
using testing::expect_error;

// The "Training checkpoints" guide's model: Dense(5) on one input.
//   class Net(tf.keras.Model):
//     def __init__(self):
//       super(Net, self).__init__()
//       self.l1 = tf.keras.layers.Dense(5)
std::shared_ptr<keras::SequentialModel> guide_net() {
  return keras::Sequential({layers::Dense(5)});
}

// inputs = tf.range(10.)[:, None]; labels = inputs * 5. + tf.range(5.)[None, :]
std::pair<Tensor, Tensor> toy_data() {
  std::vector<float> x(10), y(50);
  for (int i = 0; i < 10; ++i) {
    x[i] = static_cast<float>(i);
    for (int j = 0; j < 5; ++j) y[i * 5 + j] = static_cast<float>(i) * 5.f + static_cast<float>(j);
  }
  return {constant(x, {10, 1}), constant(y, {10, 5})};
}

// def train_step(net, example, optimizer):
//   with tf.GradientTape() as tape:
//     output = net(example['x'])
//     loss = tf.reduce_mean(tf.abs(output - example['y']))
//   variables = net.trainable_variables
//   gradients = tape.gradient(loss, variables)
//   optimizer.apply_gradients(zip(gradients, variables))
//   return loss
double train_step(keras::Model& net, const Tensor& x, const Tensor& y,
                  optimizers::Optimizer& optimizer) {
  GradientTape tape;
  Tensor loss = reduce_mean(square(net(x, true) - y));
  const auto variables = net.trainable_variables();
  auto gradients = tape.gradient(loss, variables);
  optimizer.apply_gradients(zip(gradients, variables));
  return loss.scalar_as_double();
}

// Every value as doubles (float32, float64 and int64 variables alike).
std::vector<std::vector<double>> values_of(const std::vector<Variable>& vars) {
  std::vector<std::vector<double>> out;
  for (const Variable& v : vars) {
    const Tensor t = v.value();
    std::vector<double> values;
    if (t.dtype() == DType::float32) {
      for (float f : t.to_vector<float>()) values.push_back(f);
    } else if (t.dtype() == DType::int64) {
      for (int64_t i : t.to_vector<int64_t>()) values.push_back(static_cast<double>(i));
    } else {
      values = t.to_vector<double>();
    }
    out.push_back(std::move(values));
  }
  return out;
}

TEST(CheckpointTest, SaveNumbersCheckpointsWithTheSaveCounterAndRecordsTheLatest) {
  TempDir dir("ckpt_test");
  // ckpt = tf.train.Checkpoint(step=tf.Variable(1))
  Variable step(constant(int64_t{1}), {.name = "step", .trainable = false});
  Checkpoint ckpt({{"step", step}});
  // ckpt.save(prefix) -> prefix-1, prefix-2; tf.train.latest_checkpoint(dir) -> prefix-2
  EXPECT_EQ(ckpt.save(dir.file("ckpt")), dir.file("ckpt-1"));
  step.assign(constant(int64_t{7}));
  EXPECT_EQ(ckpt.save(dir.file("ckpt")), dir.file("ckpt-2"));
  EXPECT_EQ(ckpt.save_counter().value().item<int64_t>(), 2);
  EXPECT_EQ(latest_checkpoint(dir.path()), dir.file("ckpt-2"));
  // TF's save writes the state file with only the new checkpoint, paths relative.
  EXPECT_EQ(read_file(dir.file("checkpoint")),
            "model_checkpoint_path: \"ckpt-2\"\nall_model_checkpoint_paths: \"ckpt-2\"\n");

  // A fresh program: restore brings back the values and the save counter, so
  // the next save continues the numbering.
  Variable step2(constant(int64_t{0}), {.name = "step", .trainable = false});
  Checkpoint ckpt2({{"step", step2}});
  ckpt2.restore(latest_checkpoint(dir.path())).assert_consumed();
  EXPECT_EQ(step2.value().item<int64_t>(), 7);
  EXPECT_EQ(ckpt2.save(dir.file("ckpt")), dir.file("ckpt-3"));
}

TEST(CheckpointTest, WriteWritesExactlyThePathAndNeitherCountsNorRecords) {
  TempDir dir("ckpt_test");
  Variable v(constant(2.5f));
  Checkpoint ckpt({{"v", v}});
  EXPECT_EQ(ckpt.write(dir.file("sub/plain")), dir.file("sub/plain"));
  EXPECT_TRUE(file_exists(dir.file("sub/plain")));
  EXPECT_FALSE(file_exists(dir.file("sub/checkpoint")));
  // write() made no save_counter, so the file holds only v.
  EXPECT_EQ(list_variables(dir.file("sub/plain")).size(), 1u);
}

TEST(CheckpointTest, KeysAreObjectGraphPathsWithSlotsUnderTheirVariables) {
  TempDir dir("ckpt_test");
  auto [x, y] = toy_data();
  auto net = guide_net();
  auto opt = optimizers::Adam({.learning_rate = 0.1});
  train_step(*net, x, y, *opt);
  // ckpt = tf.train.Checkpoint(step=tf.Variable(1), optimizer=opt, net=net)
  Variable step(constant(int64_t{1}), {.name = "step", .trainable = false});
  Checkpoint ckpt({{"step", step}, {"optimizer", opt}, {"net", net}});
  const std::string path = ckpt.save(dir.file("ckpt"));
  std::vector<std::string> keys;
  for (const auto& [key, shape] : list_variables(path)) keys.push_back(key);
  // tf.train.list_variables(path) in the guide (Keras's slot names m and v).
  const std::vector<std::string> expected = {
      "net/layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE",
      "net/layer_with_weights-0/bias/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
      "net/layer_with_weights-0/bias/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE",
      "net/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE",
      "net/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
      "net/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE",
      "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE",
      "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
      "step/.ATTRIBUTES/VARIABLE_VALUE",
  };
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(load_variable(path, "net/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE")
                .to_vector<float>(),
            net->layers()[0]->own_weights()[0].second.value().to_vector<float>());
}

TEST(CheckpointTest, ValuesMatchByStructureNotByCreationOrderOrName) {
  TempDir dir("ckpt_test");
  // Saved: a model whose layers were made first-to-last.
  auto a1 = layers::Dense(3, {.input_shape = {2}});
  auto a2 = layers::Dense(1);
  auto saved = keras::Sequential({a1, a2});
  Checkpoint({{"model", saved}}).write(dir.file("c"));
  // Restored into a model whose layers were made last-to-first (other
  // names, other creation order of the variables).
  auto b2 = layers::Dense(1, {.name = "second"});
  auto b1 = layers::Dense(3, {.input_shape = {2}, .name = "first"});
  auto restored = keras::Sequential({b1, b2});
  Checkpoint({{"model", restored}}).restore(dir.file("c")).assert_consumed();
  EXPECT_EQ(values_of(restored->weights()), values_of(saved->weights()));
}

TEST(CheckpointTest, TrainSaveTrainRestoreGivesTheSavedValuesExactly) {
  TempDir dir("ckpt_test");
  auto [x, y] = toy_data();
  auto net = guide_net();
  auto opt = optimizers::Adam({.learning_rate = 0.1});
  Variable step(constant(int64_t{1}), {.name = "step", .trainable = false});
  Checkpoint ckpt({{"step", step}, {"optimizer", opt}, {"net", net}});
  for (int i = 0; i < 5; ++i) train_step(*net, x, y, *opt);
  step.assign(constant(int64_t{6}));
  const auto saved_weights = values_of(net->weights());
  const auto saved_slots = values_of(opt->variables());
  const std::string path = ckpt.save(dir.file("ckpt"));
  for (int i = 0; i < 3; ++i) train_step(*net, x, y, *opt);
  step.assign(constant(int64_t{9}));
  ASSERT_NE(values_of(net->weights()), saved_weights);

  ckpt.restore(path).assert_consumed();
  EXPECT_EQ(values_of(net->weights()), saved_weights);
  EXPECT_EQ(values_of(opt->variables()), saved_slots);  // iterations and every slot
  EXPECT_EQ(opt->iterations(), 5);
  EXPECT_EQ(step.value().item<int64_t>(), 6);
}

TEST(CheckpointTest, RestoreIntoAFreshLazyModelAndOptimizerContinuesWithTheSameLosses) {
  TempDir dir("ckpt_test");
  auto [x, y] = toy_data();
  auto make_net = [] {
    return keras::Sequential({layers::Dense(8, {.activation = "relu"}), layers::Dense(5)});
  };
  // The uninterrupted run: 4 steps, save, 4 more.
  auto net = make_net();
  auto opt = optimizers::Adam({.learning_rate = 0.05});
  Checkpoint ckpt({{"optimizer", opt}, {"net", net}});
  for (int i = 0; i < 4; ++i) train_step(*net, x, y, *opt);
  const std::string path = ckpt.save(dir.file("ckpt"));
  std::vector<double> expected;
  expected.reserve(4);
  for (int i = 0; i < 4; ++i) expected.push_back(train_step(*net, x, y, *opt));

  // status = ckpt.restore(path) before net is built or opt has slots: the
  // values wait for their variables (TF's deferred restoration).
  auto net2 = make_net();
  auto opt2 = optimizers::Adam({.learning_rate = 0.05});
  Checkpoint ckpt2({{"optimizer", opt2}, {"net", net2}});
  auto status = ckpt2.restore(path);
  ASSERT_FALSE(net2->built());
  status.assert_existing_objects_matched();
  expect_error([&] { status.assert_consumed(); }, ErrorCode::FAILED_PRECONDITION,
               {"net/layer_with_weights-0/kernel", "unresolved object"});
  EXPECT_EQ(opt2->iterations(), 4);  // "iter" exists already and is restored at once
  std::vector<double> losses;
  for (int i = 0; i < 4; ++i) {
    losses.push_back(train_step(*net2, x, y, *opt2));
    if (i == 0) status.assert_consumed();  // the first step created weights and slots
  }
  EXPECT_EQ(losses, expected);
  EXPECT_EQ(values_of(net2->weights()), values_of(net->weights()));
  EXPECT_EQ(opt2->iterations(), 8);
}

TEST(CheckpointTest, ADtypeOrShapeMismatchNamesThePathAndAssignsNothing) {
  TempDir dir("ckpt_test");
  auto saved = keras::Sequential({layers::Dense(2, {.input_shape = {3}})});
  Variable step(constant(int64_t{5}));
  Checkpoint({{"model", saved}, {"step", step}}).write(dir.file("c"));

  auto other = keras::Sequential({layers::Dense(4, {.input_shape = {3}})});
  Variable step2(constant(int64_t{1}));
  const auto before = values_of(other->weights());
  expect_error(
      [&] {
        Checkpoint({{"model", other}, {"step", step2}}).restore(dir.file("c"));
      },
      ErrorCode::INVALID_ARGUMENT,
      {"model/layer_with_weights-0/kernel", dir.file("c"), "[3, 2]", "[3, 4]"});
  EXPECT_EQ(values_of(other->weights()), before);
  EXPECT_EQ(step2.value().item<int64_t>(), 1);

  Variable wrong_dtype(constant(1.0f));
  expect_error(
      [&] {
        Checkpoint({{"step", wrong_dtype}}).restore(dir.file("c"));
      },
      ErrorCode::INVALID_ARGUMENT, {"step", "int64", "float32"});
}

TEST(CheckpointTest, ADeferredMismatchIsRaisedWhenTheWeightIsCreated) {
  TempDir dir("ckpt_test");
  auto saved = keras::Sequential({layers::Dense(2, {.input_shape = {3}})});
  Checkpoint({{"model", saved}}).write(dir.file("c"));
  auto lazy = keras::Sequential({layers::Dense(2)});
  Checkpoint({{"model", lazy}}).restore(dir.file("c")).expect_partial();
  expect_error(
      [&] {
        (*lazy)(ones({1, 5}));
      },
      ErrorCode::INVALID_ARGUMENT, {"model/layer_with_weights-0/kernel", "[3, 2]", "[5, 2]"});
}

TEST(CheckpointTest, AssertionsNameWhatDidNotMatch) {
  TempDir dir("ckpt_test");
  Variable a(constant(1.f)), extra(constant(2.f));
  Checkpoint({{"a", a}, {"extra", extra}}).write(dir.file("c"));

  // The checkpoint has a value no object takes.
  Variable a2(constant(0.f));
  auto status = Checkpoint({{"a", a2}}).restore(dir.file("c"));
  status.assert_existing_objects_matched();
  status.assert_nontrivial_match();
  expect_error([&] { status.assert_consumed(); }, ErrorCode::FAILED_PRECONDITION,
               {"extra", dir.file("c")});
  status.expect_partial();
  EXPECT_EQ(a2.value().item<float>(), 1.f);

  // The program has an object the checkpoint does not know.
  Variable b(constant(0.f)), a3(constant(0.f));
  auto status2 = Checkpoint({{"a", a3}, {"extra", extra}, {"new_one", b}}).restore(dir.file("c"));
  expect_error([&] { status2.assert_existing_objects_matched(); }, ErrorCode::FAILED_PRECONDITION,
               {"new_one"});
  expect_error([&] { status2.assert_consumed(); }, ErrorCode::FAILED_PRECONDITION, {"new_one"});

  // Nothing but the root matches an unrelated checkpoint.
  Variable c(constant(0.f));
  auto status3 = Checkpoint({{"unrelated", c}}).read(dir.file("c"));
  expect_error([&] { status3.assert_nontrivial_match(); }, ErrorCode::FAILED_PRECONDITION,
               {"nothing except the root"});
  status3.expect_partial();
}

TEST(CheckpointTest, RestoreOfNoCheckpointIsANoOpWhoseAssertionsFail) {
  Variable v(constant(3.f));
  Checkpoint ckpt({{"v", v}});
  // ckpt.restore(manager.latest_checkpoint) on a fresh start: latest is None.
  auto status = ckpt.restore(std::nullopt);
  EXPECT_EQ(v.value().item<float>(), 3.f);
  expect_error([&] { status.assert_consumed(); }, ErrorCode::FAILED_PRECONDITION,
               {"No checkpoint specified"});
  expect_error([&] { status.assert_existing_objects_matched(); }, ErrorCode::FAILED_PRECONDITION,
               {"nothing is being restored"});
  status.expect_partial();
  expect_error([&] { ckpt.restore(std::string("/nonexistent/ckpt-1")); }, ErrorCode::NOT_FOUND,
               {"/nonexistent/ckpt-1", "-1"});
}

TEST(CheckpointTest, NestedCheckpointsAndSharedObjectsAreSavedOnce) {
  TempDir dir("ckpt_test");
  auto model = keras::Sequential({layers::Dense(2, {.input_shape = {2}})});
  auto opt = optimizers::SGD({.learning_rate = 0.1, .momentum = 0.5});
  model->compile({.optimizer = opt, .loss = "mse"});
  Variable v(constant(4.f));
  Checkpoint inner({{"v", v}});
  // The optimizer is reachable as "optimizer" and as "model/optimizer"; the
  // shorter path names it, and it is stored once.
  Checkpoint outer({{"inner", inner}, {"model", model}, {"optimizer", opt}});
  const std::string path = outer.write(dir.file("c"));
  const auto shapes = load_checkpoint(path).get_variable_to_shape_map();
  EXPECT_TRUE(shapes.contains("inner/v/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_TRUE(shapes.contains("optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_FALSE(shapes.contains("model/optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE"));

  // A model saved with its optimizer restores through "model/optimizer" alone.
  Variable v2(constant(0.f));
  auto model2 = keras::Sequential({layers::Dense(2, {.input_shape = {2}})});
  auto opt2 = optimizers::SGD({.learning_rate = 0.1, .momentum = 0.5});
  model2->compile({.optimizer = opt2, .loss = "mse"});
  opt->iterations_variable().assign(constant(int64_t{11}));
  Checkpoint({{"model", model}}).write(dir.file("m"));
  Checkpoint({{"model", model2}}).restore(dir.file("m")).assert_consumed();
  EXPECT_EQ(opt2->iterations(), 11);
  Checkpoint({{"inner", Checkpoint({{"v", v2}})}}).restore(path).expect_partial();
  EXPECT_EQ(v2.value().item<float>(), 4.f);
}

TEST(CheckpointTest, ReadLeavesTheSaveCounterToBeRestoredWhenCreated) {
  TempDir dir("ckpt_test");
  Variable v(constant(1.f));
  Checkpoint ckpt({{"v", v}});
  ckpt.save(dir.file("ckpt"));
  ckpt.save(dir.file("ckpt"));
  Variable v2(constant(0.f));
  Checkpoint fresh({{"v", v2}});
  auto status = fresh.read(dir.file("ckpt-2"));
  status.assert_existing_objects_matched();
  expect_error([&] { status.assert_consumed(); }, ErrorCode::FAILED_PRECONDITION, {"save_counter"});
  // The counter, created by save, takes the saved 2 first: the save is ckpt-3.
  EXPECT_EQ(fresh.save(dir.file("ckpt")), dir.file("ckpt-3"));
  status.assert_consumed();
}

TEST(CheckpointTest, ReservedAndRepeatedNamesAreRejected) {
  Variable v(constant(1.f));
  expect_error(
      [&] {
        Checkpoint({{"save_counter", v}});
      },
      ErrorCode::INVALID_ARGUMENT, {"save_counter"});
  expect_error([&] { Checkpoint({{"a", v}, {"a", v}}); }, ErrorCode::INVALID_ARGUMENT, {"'a'"});
  expect_error(
      [&] {
        Checkpoint({{"m", std::shared_ptr<keras::Layer>()}});
      },
      ErrorCode::INVALID_ARGUMENT, {"null"});
}

}  // namespace
}  // namespace strata::train
