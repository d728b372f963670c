// The checkpoint section of TensorFlow's "Custom training with
// tf.distribute.Strategy" guide, in C++, carried one step further: the run
// is continued under another replica count and must not notice.
//
//   with strategy.scope():
//     model = create_model(); optimizer = tf.keras.optimizers.Adam()
//     checkpoint = tf.train.Checkpoint(optimizer=optimizer, model=model,
//                                      iterator=iterator, step=step)
//   manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=3)
//   for step in range(...):
//     distributed_train_step(next(iterator)); ...; manager.save()
//
//   # Restore the latest checkpoint and test (no strategy)
//   new_model = create_model(); new_optimizer = tf.keras.optimizers.Adam()
//   checkpoint = tf.train.Checkpoint(optimizer=new_optimizer, model=new_model)
//   checkpoint.restore(tf.train.latest_checkpoint(checkpoint_dir)).expect_partial()
//   for images, labels in test_dataset: eval_step(images, labels)
//
// 1. Under MirroredStrategy over 2 devices the model trains for 30 steps on a
//    shuffled, repeated dataset (global batch 16); a CheckpointManager saves
//    the model, the optimizer (Adam: its slots too), the step and the
//    distributed iterator after step 12. This is the uninterrupted run.
// 2. Without a strategy a new model restores the checkpoint and is evaluated:
//    it scores exactly what the 2-replica model scored at step 12.
// 3. Under MirroredStrategy over 4 devices a new model, optimizer and
//    iterator restore the checkpoint and train steps 13 to 30: the iterator
//    gives the same global batches (each now split in 4), so every step's
//    loss equals the uninterrupted run's within 1e-5.
//
//   STRATA_CPU_DEVICES=4 build/examples/checkpoint_training
#include <cmath>
#include <iostream>
#include <vector>

#include "example_check.h"
#include "strata/base/file.h"
#include "strata/keras/keras.h"
#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;
namespace keras = strata::keras;
namespace train = strata::train;

namespace {

constexpr int kGlobalBatch = 16;
constexpr int kSaveAfter = 12;
constexpr int kSteps = 30;

std::shared_ptr<keras::SequentialModel> create_model() {
  return keras::Sequential({keras::layers::Dense(16, {.activation = "relu", .input_shape = {8}}),
                            keras::layers::Dense(3)});
}

// Three classes from a fixed linear teacher over 8 uniform features.
struct Data {
  tf::Tensor x, y, x_test, y_test;
};
Data make_data() {
  const tf::Tensor teacher = tf::random::uniform({8, 3}, {.minval = -1, .maxval = 1, .seed = 2});
  Data d;
  d.x = tf::random::uniform({256, 8}, {.minval = -1, .maxval = 1, .seed = 1});
  d.y = tf::argmax(tf::matmul(d.x, teacher), 1);
  d.x_test = tf::random::uniform({64, 8}, {.minval = -1, .maxval = 1, .seed = 4});
  d.y_test = tf::argmax(tf::matmul(d.x_test, teacher), 1);
  return d;
}

tf::data::Dataset train_dataset(const Data& d) {
  return tf::data::Dataset::from_tensor_slices({d.x, d.y})
      .shuffle(256, {.seed = 3})
      .repeat()
      .batch(kGlobalBatch, /*drop_remainder=*/true)
      .prefetch(tf::data::AUTOTUNE);
}

// One training step under `strategy`; returns the global batch's mean loss.
double distributed_train_step(sd::Strategy& strategy, keras::Model& model,
                              keras::optimizers::Optimizer& optimizer,
                              const sd::PerReplica<tf::data::Element>& inputs) {
  auto step_fn = [&](const tf::data::Element& batch) {
    tf::GradientTape tape;
    tf::Tensor logits = model(batch[0], /*training=*/true);
    tf::Tensor per_example =
        keras::losses::sparse_categorical_crossentropy(batch[1], logits, {.from_logits = true});
    tf::Tensor loss =
        tf::nn::compute_average_loss(per_example, {.global_batch_size = kGlobalBatch});
    std::vector<tf::Tensor> grads = tape.gradient(loss, model.trainable_variables());
    optimizer.apply_gradients(tf::zip(grads, model.trainable_variables()));
    return loss;
  };
  sd::PerReplica<tf::Tensor> losses = strategy.run(step_fn, inputs);
  return strategy.reduce(sd::ReduceOp::SUM, losses, std::nullopt).scalar_as_double();
}

// The test set's mean loss and accuracy.
std::pair<double, double> evaluate(keras::Model& model, const Data& d) {
  tf::Tensor logits = model(d.x_test, /*training=*/false);
  const double loss = tf::reduce_mean(keras::losses::sparse_categorical_crossentropy(
                                          d.y_test, logits, {.from_logits = true}))
                          .scalar_as_double();
  const double accuracy =
      tf::reduce_mean(tf::cast(tf::equal(tf::argmax(logits, 1), d.y_test), tf::float32))
          .scalar_as_double();
  return {loss, accuracy};
}

}  // namespace

int main() {
  const Data data = make_data();
  tf::TempDir dir("checkpoint_training");
  const std::string checkpoint_dir = dir.path() + "/training_checkpoints";

  // --- 1. 2 replicas: the uninterrupted run, checkpointed after step 12 ----
  std::vector<double> losses_2;
  std::pair<double, double> eval_at_save;
  {
    sd::MirroredStrategy strategy({"CPU:0", "CPU:1"});
    std::shared_ptr<keras::SequentialModel> model;
    std::shared_ptr<keras::optimizers::AdamOptimizer> optimizer;
    {
      auto scope = strategy.scope();
      model = create_model();
      optimizer = keras::optimizers::Adam({.learning_rate = 0.01});
      optimizer->build(model->trainable_variables());
    }
    tf::Variable step(tf::constant(int64_t{0}), {.name = "step", .trainable = false});
    sd::DistributedIterator iterator =
        strategy.experimental_distribute_dataset(train_dataset(data)).iter();
    train::Checkpoint checkpoint(
        {{"optimizer", optimizer}, {"model", model}, {"iterator", iterator}, {"step", step}});
    train::CheckpointManager manager(checkpoint, checkpoint_dir, {.max_to_keep = 3});
    for (int i = 0; i < kSteps; ++i) {
      losses_2.push_back(distributed_train_step(strategy, *model, *optimizer, iterator.get_next()));
      step.assign_add(tf::constant(int64_t{1}));
      if (i + 1 == kSaveAfter) {
        std::cout << "saved " << manager.save().value_or("nothing") << " after step " << kSaveAfter
                  << "\n";
        eval_at_save = evaluate(*model, data);
      }
    }
    std::cout << "2 replicas: loss " << losses_2.front() << " -> " << losses_2.back() << "\n";
    example::expect(losses_2.back() < losses_2.front(), "the 2-replica run learns");
  }

  // --- 2. no strategy: restore the model and evaluate ----------------------
  {
    auto new_model = create_model();
    auto new_optimizer = keras::optimizers::Adam({.learning_rate = 0.01});
    train::Checkpoint checkpoint({{"optimizer", new_optimizer}, {"model", new_model}});
    checkpoint.restore(train::latest_checkpoint(checkpoint_dir)).expect_partial();
    const auto [loss, accuracy] = evaluate(*new_model, data);
    std::cout << "restored without a strategy: test loss " << loss << ", accuracy " << accuracy
              << " (at the save: " << eval_at_save.first << ", " << eval_at_save.second << ")\n";
    example::expect(std::abs(loss - eval_at_save.first) < 1e-6 && accuracy == eval_at_save.second,
                    "the restored model scores what the saved one did");
  }

  // --- 3. 4 replicas: restore everything and continue ----------------------
  {
    sd::MirroredStrategy strategy({"CPU:0", "CPU:1", "CPU:2", "CPU:3"});
    std::shared_ptr<keras::SequentialModel> model;
    std::shared_ptr<keras::optimizers::AdamOptimizer> optimizer;
    {
      auto scope = strategy.scope();
      model = create_model();
      optimizer = keras::optimizers::Adam({.learning_rate = 0.01});
      optimizer->build(model->trainable_variables());
    }
    tf::Variable step(tf::constant(int64_t{0}), {.name = "step", .trainable = false});
    sd::DistributedIterator iterator =
        strategy.experimental_distribute_dataset(train_dataset(data)).iter();
    train::Checkpoint checkpoint(
        {{"optimizer", optimizer}, {"model", model}, {"iterator", iterator}, {"step", step}});
    train::CheckpointManager manager(checkpoint, checkpoint_dir, {.max_to_keep = 3});
    checkpoint.restore(manager.latest_checkpoint()).assert_consumed();
    example::expect(step.value().item<int64_t>() == kSaveAfter, "the step is restored");
    double max_diff = 0;
    for (int i = kSaveAfter; i < kSteps; ++i) {
      const double loss = distributed_train_step(strategy, *model, *optimizer, iterator.get_next());
      step.assign_add(tf::constant(int64_t{1}));
      max_diff = std::max(max_diff, std::abs(loss - losses_2[i]));
      if (i % 6 == 0)
        std::cout << "step " << i + 1 << ": 4 replicas " << loss << ", uninterrupted "
                  << losses_2[i] << "\n";
    }
    std::cout << "4 replicas after the restore: max |loss - uninterrupted loss| over steps "
              << kSaveAfter + 1 << " to " << kSteps << ": " << max_diff << "\n";
    example::expect(max_diff < 1e-5, "the continued run's losses equal the uninterrupted run's");
  }
  return example::exit_code();
}
