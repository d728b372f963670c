// TensorFlow's guide "Custom training with tf.distribute.Strategy"
// (tensorflow.org/tutorials/distribute/custom_training), statement by statement.
// Each Python statement is quoted above its C++; docs/porting.md lists where
// the C++ cannot read the same.
//
//   build/examples/tutorials/custom_training                    # the guide: 10 epochs, all data
//   build/examples/tutorials/custom_training --epochs 2 --limit-examples 1280   # the test
//
// Data: Fashion-MNIST from Debian's dataset-fashion-mnist (or STRATA_DATA_DIR);
// without it the program says so and exits 0, as a skipped test.
// --limit-examples N keeps the first N training and N / 2 test images.
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "../example_check.h"
#include "strata/keras/keras.h"
#include "strata/strata.h"
#include "tutorial.h"

namespace tf = strata;
namespace sd = strata::distribute;
namespace keras = strata::keras;

int main(int argc, char** argv) {
  const tutorial::Flags flags = tutorial::parse_flags(argc, argv, {.epochs = 10});

  // ## Download the Fashion MNIST dataset

  // fashion_mnist = tf.keras.datasets.fashion_mnist
  // (train_images, train_labels), (test_images, test_labels) = fashion_mnist.load_data()
  std::pair<keras::datasets::fashion_mnist::XY, keras::datasets::fashion_mnist::XY> data;
  try {
    data = keras::datasets::fashion_mnist::load_data();
  } catch (const tf::NotFoundError& e) {
    std::cout << "skipped: " << e.what() << "\n";
    return 0;
  }
  auto [train, test] = data;
  auto [train_images, train_labels] = train;
  auto [test_images, test_labels] = test;
  if (flags.limit_examples > 0) {
    // Not in the guide: the test trains on the first examples only.
    auto first = [](const tf::Tensor& t, int64_t n) {
      std::vector<int64_t> begin(t.shape().rank(), 0), size = t.shape().dims();
      size[0] = n;
      return tf::slice(t, begin, size);
    };
    train_images = first(train_images, flags.limit_examples);
    train_labels = first(train_labels, flags.limit_examples);
    test_images = first(test_images, flags.limit_examples / 2);
    test_labels = first(test_labels, flags.limit_examples / 2);
  }

  // # Add a dimension to the array -> new shape == (28, 28, 1)
  // train_images = train_images[..., None]
  // test_images = test_images[..., None]
  train_images = tf::expand_dims(train_images, -1);
  test_images = tf::expand_dims(test_images, -1);

  // # Scale the images to the [0, 1] range.
  // train_images = train_images / np.float32(255)
  // test_images = test_images / np.float32(255)
  train_images = train_images / 255.f;
  test_images = test_images / 255.f;

  // ## Create a strategy to distribute the variables and the graph

  // strategy = tf.distribute.MirroredStrategy()
  sd::MirroredStrategy strategy;

  // print('Number of devices: {}'.format(strategy.num_replicas_in_sync))
  std::cout << "Number of devices: " << strategy.num_replicas_in_sync() << "\n";

  // ## Setup input pipeline

  // BUFFER_SIZE = len(train_images)
  const int64_t BUFFER_SIZE = train_images.shape()[0];

  // BATCH_SIZE_PER_REPLICA = 64
  // GLOBAL_BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync
  const int64_t BATCH_SIZE_PER_REPLICA = 64;
  const int64_t GLOBAL_BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync();

  // EPOCHS = 10
  const int EPOCHS = flags.epochs;

  // train_dataset = tf.data.Dataset.from_tensor_slices((train_images, train_labels))
  //     .shuffle(BUFFER_SIZE).batch(GLOBAL_BATCH_SIZE)
  // test_dataset = tf.data.Dataset.from_tensor_slices((test_images, test_labels))
  //     .batch(GLOBAL_BATCH_SIZE)
  auto train_dataset = tf::data::Dataset::from_tensor_slices({train_images, train_labels})
                           .shuffle(BUFFER_SIZE)
                           .batch(GLOBAL_BATCH_SIZE);
  auto test_dataset =
      tf::data::Dataset::from_tensor_slices({test_images, test_labels}).batch(GLOBAL_BATCH_SIZE);

  // train_dist_dataset = strategy.experimental_distribute_dataset(train_dataset)
  // test_dist_dataset = strategy.experimental_distribute_dataset(test_dataset)
  sd::DistributedDataset train_dist_dataset =
      strategy.experimental_distribute_dataset(train_dataset);
  sd::DistributedDataset test_dist_dataset = strategy.experimental_distribute_dataset(test_dataset);

  // ## Create the model

  // def create_model():
  auto create_model = [] {
    // regularizer = tf.keras.regularizers.L2(1e-5)
    auto regularizer = keras::regularizers::L2(1e-5);
    // model = tf.keras.Sequential([
    //     tf.keras.layers.Conv2D(32, 3, activation='relu', kernel_regularizer=regularizer),
    //     tf.keras.layers.MaxPooling2D(),
    //     tf.keras.layers.Conv2D(64, 3, activation='relu', kernel_regularizer=regularizer),
    //     tf.keras.layers.MaxPooling2D(),
    //     tf.keras.layers.Flatten(),
    //     tf.keras.layers.Dense(64, activation='relu', kernel_regularizer=regularizer),
    //     tf.keras.layers.Dense(10, kernel_regularizer=regularizer)
    //   ])
    auto model = keras::Sequential({
        keras::layers::Conv2D(32, 3, {.activation = "relu", .kernel_regularizer = regularizer}),
        keras::layers::MaxPooling2D(),
        keras::layers::Conv2D(64, 3, {.activation = "relu", .kernel_regularizer = regularizer}),
        keras::layers::MaxPooling2D(),
        keras::layers::Flatten(),
        keras::layers::Dense(64, {.activation = "relu", .kernel_regularizer = regularizer}),
        keras::layers::Dense(10, {.kernel_regularizer = regularizer}),
    });
    // return model
    return model;
  };

  // # Create a checkpoint directory to store the checkpoints.
  // checkpoint_dir = './training_checkpoints'
  // checkpoint_prefix = os.path.join(checkpoint_dir, "ckpt")
  const std::string checkpoint_dir = tutorial::make_temp_dir("training_checkpoints");
  const std::string checkpoint_prefix = (std::filesystem::path(checkpoint_dir) / "ckpt").string();

  // ## Define the loss function

  std::shared_ptr<keras::losses::SparseCategoricalCrossentropyLoss> loss_object;
  std::function<tf::Tensor(const tf::Tensor&, const tf::Tensor&, const std::vector<tf::Tensor>&)>
      compute_loss;
  // with strategy.scope():
  {
    auto scope = strategy.scope();
    // # Set reduction to `NONE` so you can do the reduction yourself.
    // loss_object = tf.keras.losses.SparseCategoricalCrossentropy(
    //     from_logits=True,
    //     reduction=tf.keras.losses.Reduction.NONE)
    loss_object = keras::losses::SparseCategoricalCrossentropy(
        {.from_logits = true, .reduction = keras::losses::Reduction::NONE});
    // def compute_loss(labels, predictions, model_losses):
    compute_loss = [&](const tf::Tensor& labels, const tf::Tensor& predictions,
                       const std::vector<tf::Tensor>& model_losses) {
      // per_example_loss = loss_object(labels, predictions)
      tf::Tensor per_example_loss = (*loss_object)(labels, predictions);
      // loss = tf.nn.compute_average_loss(per_example_loss)
      tf::Tensor loss = tf::nn::compute_average_loss(per_example_loss);
      // if model_losses:
      //   loss += tf.nn.scale_regularization_loss(tf.add_n(model_losses))
      if (!model_losses.empty()) loss += tf::nn::scale_regularization_loss(tf::add_n(model_losses));
      // return loss
      return loss;
    };
  }

  // ## Define the metrics to track loss and accuracy

  std::shared_ptr<keras::metrics::MeanMetric> test_loss;
  std::shared_ptr<keras::metrics::SparseCategoricalAccuracyMetric> train_accuracy, test_accuracy;
  // with strategy.scope():
  {
    auto scope = strategy.scope();
    // test_loss = tf.keras.metrics.Mean(name='test_loss')
    test_loss = keras::metrics::Mean({.name = "test_loss"});
    // train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name='train_accuracy')
    // test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name='test_accuracy')
    train_accuracy = keras::metrics::SparseCategoricalAccuracy({.name = "train_accuracy"});
    test_accuracy = keras::metrics::SparseCategoricalAccuracy({.name = "test_accuracy"});
  }

  // ## Training loop

  // # A model, an optimizer, and a checkpoint must be created under `strategy.scope`.
  std::shared_ptr<keras::SequentialModel> model;
  std::shared_ptr<keras::optimizers::AdamOptimizer> optimizer;
  std::optional<tf::train::Checkpoint> checkpoint;
  // with strategy.scope():
  {
    auto scope = strategy.scope();
    // model = create_model()
    model = create_model();
    // optimizer = tf.keras.optimizers.Adam(learning_rate=0.001)
    optimizer = keras::optimizers::Adam({.learning_rate = 0.001});
    // checkpoint = tf.train.Checkpoint(optimizer=optimizer, model=model)
    checkpoint.emplace(tf::train::Checkpoint({{"optimizer", optimizer}, {"model", model}}));
  }

  // def train_step(inputs):
  auto train_step = [&](const tf::data::Element& inputs) {
    // images, labels = inputs
    const tf::Tensor& images = inputs[0];
    const tf::Tensor& labels = inputs[1];
    // with tf.GradientTape() as tape:
    //   predictions = model(images, training=True)
    //   loss = compute_loss(labels, predictions, model.losses)
    tf::Tensor predictions, loss;
    std::vector<tf::Tensor> gradients;
    {
      tf::GradientTape tape;
      predictions = (*model)(images, /*training=*/true);
      loss = compute_loss(labels, predictions, model->losses());
      // gradients = tape.gradient(loss, model.trainable_variables)
      gradients = tape.gradient(loss, model->trainable_variables());
    }
    // optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    optimizer->apply_gradients(tf::zip(gradients, model->trainable_variables()));
    // train_accuracy.update_state(labels, predictions)
    train_accuracy->update_state(labels, predictions);
    // return loss
    return loss;
  };

  // def test_step(inputs):
  auto test_step = [&](const tf::data::Element& inputs) {
    // images, labels = inputs
    const tf::Tensor& images = inputs[0];
    const tf::Tensor& labels = inputs[1];
    // predictions = model(images, training=False)
    tf::Tensor predictions = (*model)(images, /*training=*/false);
    // t_loss = loss_object(labels, predictions)
    tf::Tensor t_loss = (*loss_object)(labels, predictions);
    // test_loss.update_state(t_loss)
    test_loss->update_state(t_loss);
    // test_accuracy.update_state(labels, predictions)
    test_accuracy->update_state(labels, predictions);
  };

  // # `run` replicates the provided computation and runs it
  // # with the distributed input.
  // @tf.function
  // def distributed_train_step(dataset_inputs):
  auto distributed_train_step = [&](const sd::PerReplica<tf::data::Element>& dataset_inputs) {
    // per_replica_losses = strategy.run(train_step, args=(dataset_inputs,))
    sd::PerReplica<tf::Tensor> per_replica_losses = strategy.run(train_step, dataset_inputs);
    // return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)
    return strategy.reduce(sd::ReduceOp::SUM, per_replica_losses, /*axis=*/std::nullopt);
  };

  // @tf.function
  // def distributed_test_step(dataset_inputs):
  //   return strategy.run(test_step, args=(dataset_inputs,))
  auto distributed_test_step = [&](const sd::PerReplica<tf::data::Element>& dataset_inputs) {
    strategy.run(test_step, dataset_inputs);
  };

  std::vector<double> train_losses, test_accuracies;
  // for epoch in range(EPOCHS):
  int epoch = 0;
  for (epoch = 0; epoch < EPOCHS; ++epoch) {
    // # TRAIN LOOP
    // total_loss = 0.0
    // num_batches = 0
    tf::Tensor total_loss = tf::constant(0.0f);
    int num_batches = 0;
    // for x in train_dist_dataset:
    //   total_loss += distributed_train_step(x)
    //   num_batches += 1
    for (const auto& x : train_dist_dataset) {
      total_loss += distributed_train_step(x);
      num_batches += 1;
    }
    // train_loss = total_loss / num_batches
    tf::Tensor train_loss = total_loss / num_batches;

    // # TEST LOOP
    // for x in test_dist_dataset:
    //   distributed_test_step(x)
    for (const auto& x : test_dist_dataset) distributed_test_step(x);

    // if epoch % 2 == 0:
    //   checkpoint.save(checkpoint_prefix)
    if (epoch % 2 == 0) checkpoint->save(checkpoint_prefix);

    // template = ("Epoch {}, Loss: {}, Accuracy: {}, Test Loss: {}, "
    //             "Test Accuracy: {}")
    // print(template.format(epoch + 1, train_loss,
    //                        train_accuracy.result() * 100, test_loss.result(),
    //                        test_accuracy.result() * 100))
    std::cout << "Epoch " << epoch + 1 << ", Loss: " << train_loss.item<float>()
              << ", Accuracy: " << (train_accuracy->result() * 100.f).item<float>()
              << ", Test Loss: " << test_loss->result().item<float>()
              << ", Test Accuracy: " << (test_accuracy->result() * 100.f).item<float>() << "\n";
    train_losses.push_back(train_loss.item<float>());
    test_accuracies.push_back(test_accuracy->result().item<float>());

    // test_loss.reset_states()
    // train_accuracy.reset_states()
    // test_accuracy.reset_states()
    test_loss->reset_states();
    train_accuracy->reset_states();
    test_accuracy->reset_states();
  }
  example::expect(train_losses.back() < train_losses.front() || EPOCHS == 1,
                  "the training loss decreases from the first epoch to the last");
  example::expect(test_accuracies.back() > 0.3, "the test accuracy is far above chance (0.1)");
  epoch = EPOCHS - 1;  // Python's loop variable keeps its last value, which the guide prints below

  // ## Restore the latest checkpoint and test

  // eval_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name='eval_accuracy')
  auto eval_accuracy = keras::metrics::SparseCategoricalAccuracy({.name = "eval_accuracy"});

  // new_model = create_model()
  // new_optimizer = tf.keras.optimizers.Adam()
  auto new_model = create_model();
  auto new_optimizer = keras::optimizers::Adam({});

  // test_dataset = tf.data.Dataset.from_tensor_slices((test_images, test_labels))
  //     .batch(GLOBAL_BATCH_SIZE)
  test_dataset =
      tf::data::Dataset::from_tensor_slices({test_images, test_labels}).batch(GLOBAL_BATCH_SIZE);

  // @tf.function
  // def eval_step(images, labels):
  auto eval_step = [&](const tf::Tensor& images, const tf::Tensor& labels) {
    // predictions = new_model(images, training=False)
    tf::Tensor predictions = (*new_model)(images, /*training=*/false);
    // eval_accuracy(labels, predictions)
    (*eval_accuracy)(labels, predictions);
  };

  // checkpoint = tf.train.Checkpoint(optimizer=new_optimizer, model=new_model)
  // checkpoint.restore(tf.train.latest_checkpoint(checkpoint_dir))
  checkpoint.emplace(tf::train::Checkpoint({{"optimizer", new_optimizer}, {"model", new_model}}));
  checkpoint->restore(tf::train::latest_checkpoint(checkpoint_dir));

  // for images, labels in test_dataset:
  //   eval_step(images, labels)
  for (const tf::data::Element& e : test_dataset) {
    const tf::Tensor& images = e[0];
    const tf::Tensor& labels = e[1];
    eval_step(images, labels);
  }

  // print('Accuracy after restoring the saved model without strategy: {}'.format(
  //     eval_accuracy.result() * 100))
  std::cout << "Accuracy after restoring the saved model without strategy: "
            << (eval_accuracy->result() * 100.f).item<float>() << "\n";
  // The latest checkpoint is the one saved after the last even-numbered epoch.
  const int saved_epoch = (EPOCHS - 1) / 2 * 2;
  example::expect(
      std::abs(eval_accuracy->result().item<float>() - test_accuracies[saved_epoch]) < 1e-6,
      "the restored model scores the test accuracy of the epoch its checkpoint was saved in");

  // ## Alternate ways of iterating over a dataset

  // ### Using iterators

  // for _ in range(EPOCHS):
  for (int e = 0; e < EPOCHS; ++e) {
    // total_loss = 0.0
    // num_batches = 0
    // train_iter = iter(train_dist_dataset)
    tf::Tensor total_loss = tf::constant(0.0f);
    int num_batches = 0;
    sd::DistributedIterator train_iter = train_dist_dataset.iter();

    // for _ in range(10):
    //   total_loss += distributed_train_step(next(train_iter))
    //   num_batches += 1
    for (int s = 0; s < 10; ++s) {
      total_loss += distributed_train_step(train_iter.get_next());
      num_batches += 1;
    }
    // average_train_loss = total_loss / num_batches
    tf::Tensor average_train_loss = total_loss / num_batches;

    // template = ("Epoch {}, Loss: {}, Accuracy: {}")
    // print(template.format(epoch + 1, average_train_loss, train_accuracy.result() * 100))
    // (The guide prints the `epoch` left over from the training loop above.)
    std::cout << "Epoch " << epoch + 1 << ", Loss: " << average_train_loss.item<float>()
              << ", Accuracy: " << (train_accuracy->result() * 100.f).item<float>() << "\n";
    example::expect(std::isfinite(average_train_loss.item<float>()),
                    "training through an iterator gives a finite loss");
    // train_accuracy.reset_states()
    train_accuracy->reset_states();
  }

  // ### Iterating inside a `tf.function`

  // @tf.function
  // def distributed_train_epoch(dataset):
  auto distributed_train_epoch = [&](const sd::DistributedDataset& dataset) {
    // total_loss = 0.0
    // num_batches = 0
    tf::Tensor total_loss = tf::constant(0.0f);
    int num_batches = 0;
    // for x in dataset:
    for (const auto& x : dataset) {
      // per_replica_losses = strategy.run(train_step, args=(x,))
      sd::PerReplica<tf::Tensor> per_replica_losses = strategy.run(train_step, x);
      // total_loss += strategy.reduce(
      //   tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)
      total_loss += strategy.reduce(sd::ReduceOp::SUM, per_replica_losses, std::nullopt);
      // num_batches += 1
      num_batches += 1;
    }
    // return total_loss / tf.cast(num_batches, dtype=tf.float32)
    return total_loss / tf::cast(tf::constant(num_batches), tf::DType::float32);
  };

  std::vector<double> epoch_losses;
  // for epoch in range(EPOCHS):
  for (epoch = 0; epoch < EPOCHS; ++epoch) {
    // train_loss = distributed_train_epoch(train_dist_dataset)
    tf::Tensor train_loss = distributed_train_epoch(train_dist_dataset);

    // template = ("Epoch {}, Loss: {}, Accuracy: {}")
    // print(template.format(epoch + 1, train_loss, train_accuracy.result() * 100))
    std::cout << "Epoch " << epoch + 1 << ", Loss: " << train_loss.item<float>()
              << ", Accuracy: " << (train_accuracy->result() * 100.f).item<float>() << "\n";
    epoch_losses.push_back(train_loss.item<float>());

    // train_accuracy.reset_states()
    train_accuracy->reset_states();
  }
  // Two more passes of training: the loss keeps below the first epoch's.
  example::expect(epoch_losses.back() < train_losses.front(),
                  "the loss keeps decreasing while training continues");

  std::filesystem::remove_all(checkpoint_dir);
  return example::exit_code();
}
