// Checkpoints of models trained under MirroredStrategy: each mirrored variable is
// saved once (its value in cross-replica context), and a restore without a
// strategy or under another replica count gives every copy the saved value,
// also for weights and optimizer slots created after the restore.
//
//   strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
//   with strategy.scope():
//     model = tf.keras.Sequential([...]); model.compile(optimizer=SGD(0.1, momentum=0.9),
//     loss="mse")
//   model.fit(x, y, batch_size=8, epochs=2)
//   path = tf.train.Checkpoint(model=model).save(prefix)
//   with tf.distribute.MirroredStrategy([... 4 devices ...]).scope():
//     fresh = ...; tf.train.Checkpoint(model=fresh).restore(path)

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/keras/keras.h"
#include "strata/strata.h"
#include "strata/testing/logical_devices.h"

namespace strata {
namespace {

using strata::testing::cpu_device_names;

namespace keras = strata::keras;
namespace sd = strata::distribute;
namespace train = strata::train;

std::shared_ptr<keras::SequentialModel> make_model(bool with_input_shape) {
  keras::OptionalShape shape = std::nullopt;
  if (with_input_shape) shape = keras::OptionalShape{3};
  return keras::Sequential({keras::layers::Dense(4, {.activation = "relu", .input_shape = shape}),
                            keras::layers::Dense(1)});
}

class CheckpointUnderStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(4); }
};

TEST_F(CheckpointUnderStrategyTest, MirroredValuesAreSavedOnceAndRestoredIntoEveryCopy) {
  TempDir dir("ckpt_strategy");
  const Tensor x = random::uniform({32, 3}, {.seed = 5});
  const Tensor y = random::uniform({32, 1}, {.seed = 6});

  sd::MirroredStrategy two(cpu_device_names(2));
  std::shared_ptr<keras::SequentialModel> model;
  {
    sd::StrategyScope scope(two);
    model = make_model(true);
    model->compile({.optimizer = keras::optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9}),
                    .loss = "mse"});
  }
  model->fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false});
  const std::string path = train::Checkpoint({{"model", model}}).save(dir.file("ckpt"));
  const std::vector<Tensor> saved_weights = model->get_weights();
  std::vector<Tensor> saved_optimizer;
  for (const Variable& v : model->optimizer()->variables()) saved_optimizer.push_back(v.value());

  // Once per variable: 4 weights, their 4 momentum slots, iter, save_counter.
  EXPECT_EQ(train::list_variables(path).size(), 10u);

  // Without a strategy, into a model not built yet and an optimizer without slots.
  auto plain = make_model(false);
  auto plain_opt = keras::optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9});
  plain->compile({.optimizer = plain_opt, .loss = "mse"});
  auto status = train::Checkpoint({{"model", plain}}).restore(path);
  (*plain)(x);
  plain_opt->build(plain->trainable_variables());
  status.assert_consumed();
  const std::vector<Tensor> plain_weights = plain->get_weights();
  ASSERT_EQ(plain_weights.size(), saved_weights.size());
  for (size_t i = 0; i < saved_weights.size(); ++i) {
    EXPECT_EQ(plain_weights[i].to_vector<float>(), saved_weights[i].to_vector<float>()) << i;
  }
  const auto plain_vars = plain_opt->variables();
  ASSERT_EQ(plain_vars.size(), saved_optimizer.size());
  EXPECT_EQ(plain_vars[0].value().item<int64_t>(), saved_optimizer[0].item<int64_t>());
  for (size_t i = 1; i < plain_vars.size(); ++i) {
    EXPECT_EQ(plain_vars[i].value().to_vector<float>(), saved_optimizer[i].to_vector<float>());
  }

  // Under four replicas: every copy of every weight and slot.
  sd::MirroredStrategy four(cpu_device_names(4));
  std::shared_ptr<keras::SequentialModel> fresh;
  std::shared_ptr<keras::optimizers::SGDOptimizer> fresh_opt;
  {
    sd::StrategyScope scope(four);
    fresh = make_model(true);
    fresh_opt = keras::optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9});
    fresh->compile({.optimizer = fresh_opt, .loss = "mse"});
    auto four_status = train::Checkpoint({{"model", fresh}}).restore(path);
    fresh_opt->build(fresh->trainable_variables());
    four_status.assert_consumed();
  }
  const auto fresh_weights = fresh->weights();
  for (size_t i = 0; i < fresh_weights.size(); ++i) {
    const auto copies = sd::distributed_components(fresh_weights[i]);
    ASSERT_EQ(copies.size(), 4u);
    for (const Variable& copy : copies) {
      EXPECT_EQ(copy.value().to_vector<float>(), saved_weights[i].to_vector<float>()) << i;
    }
  }
  const auto fresh_vars = fresh_opt->variables();
  for (size_t i = 1; i < fresh_vars.size(); ++i) {
    for (const Variable& copy : sd::distributed_components(fresh_vars[i])) {
      EXPECT_EQ(copy.value().to_vector<float>(), saved_optimizer[i].to_vector<float>()) << i;
    }
  }
}

}  // namespace
}  // namespace strata
