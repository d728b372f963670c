// TensorFlow's guide "Use TPUs" (tensorflow.org/guide/tpu), its TPUStrategy
// sections, statement by statement, on Strata's emulated TPU system: a mesh of
// logical CPU devices (STRATA_CPU_DEVICES, STRATA_TPU_TOPOLOGY; see
// docs/tpu.md). Each Python statement is quoted above its C++;
// docs/porting.md lists where the C++ cannot read the same.
//
//   STRATA_CPU_DEVICES=8 build/examples/tutorials/tpu                # the guide's sizes
//   STRATA_CPU_DEVICES=2 build/examples/tutorials/tpu --epochs 2 --steps 5
//       --limit-examples 2000 --width 32                                # the test (one line)
//
// Data: the guide loads MNIST through tensorflow_datasets; this program reads
// Fashion-MNIST (the same shapes and dtypes) from Debian's
// dataset-fashion-mnist (or STRATA_DATA_DIR); without it the program says so
// and exits 0, as a skipped test. --limit-examples N keeps the first N
// training and N / 2 test images; --steps N sets steps_per_epoch and
// validation_steps; --width N makes the 256-wide layers N wide (128: N / 2).
#include <cmath>
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
  const tutorial::Flags flags = tutorial::parse_flags(argc, argv, {.epochs = 5});
  const int64_t wide = flags.width > 0 ? flags.width : 256;

  std::pair<keras::datasets::fashion_mnist::XY, keras::datasets::fashion_mnist::XY> data;
  try {
    data = keras::datasets::fashion_mnist::load_data();
  } catch (const tf::NotFoundError& e) {
    std::cout << "skipped: " << e.what() << "\n";
    return 0;
  }

  // ## TPU initialization

  // resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu='local')
  sd::cluster_resolver::TPUClusterResolver resolver("local");
  // tf.config.experimental_connect_to_cluster(resolver)
  tf::config::experimental_connect_to_cluster(resolver);
  // # This is the TPU initialization code that has to be at the beginning.
  // tf.tpu.experimental.initialize_tpu_system(resolver)
  tf::tpu::experimental::Topology topology = tf::tpu::experimental::initialize_tpu_system(resolver);
  // print("All devices: ", tf.config.list_logical_devices('TPU'))
  std::cout << "All devices: ";
  for (const tf::config::LogicalDevice& d : tf::config::list_logical_devices("TPU"))
    std::cout << "LogicalDevice(name='" << d.name << "', device_type='" << d.device_type << "') ";
  std::cout << "\n";
  example::expect(static_cast<int64_t>(tf::config::list_logical_devices("TPU").size()) ==
                      topology.num_tpus_per_task(),
                  "every logical device is a core of the TPU system");

  // ## Manual device placement

  // a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
  // b = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
  tf::Tensor a = tf::constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  tf::Tensor b = tf::constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {3, 2});

  // with tf.device('/TPU:0'):
  //   c = tf.matmul(a, b)
  tf::Tensor c;
  {
    auto device_scope = tf::device("/TPU:0");
    c = tf::matmul(a, b);
  }

  // print("c device: ", c.device)
  // print(c)
  std::cout << "c device: " << c.device() << "\n";
  std::cout << c << "\n";
  // The guide's output: [[22. 28.] [49. 64.]].
  example::expect(c.to_vector<float>() == std::vector<float>{22, 28, 49, 64}, "c = a b");

  // ## Distribution strategies

  // strategy = tf.distribute.TPUStrategy(resolver)
  sd::TPUStrategy strategy(resolver);

  // @tf.function
  // def matmul_fn(x, y):
  auto matmul_fn = [](const tf::Tensor& x, const tf::Tensor& y) {
    // z = tf.matmul(x, y)
    tf::Tensor z = tf::matmul(x, y);
    // return z
    return z;
  };

  // z = strategy.run(matmul_fn, args=(a, b))
  // print(z)
  sd::PerReplica<tf::Tensor> z = strategy.run(matmul_fn, a, b);
  std::cout << z << "\n";
  for (const tf::Tensor& zi : strategy.experimental_local_results(z))
    example::expect(zi.to_vector<float>() == std::vector<float>{22, 28, 49, 64},
                    "every replica computes a b");

  // ## Classification on TPUs

  // ### Define a Keras model

  // def create_model():
  auto create_model = [wide] {
    // regularizer = tf.keras.regularizers.L2(1e-5)
    auto regularizer = keras::regularizers::L2(1e-5);
    // return tf.keras.Sequential(
    //     [tf.keras.layers.Conv2D(256, 3, input_shape=(28, 28, 1),
    //                             activation='relu',
    //                             kernel_regularizer=regularizer),
    //      tf.keras.layers.Conv2D(256, 3,
    //                             activation='relu',
    //                             kernel_regularizer=regularizer),
    //      tf.keras.layers.Flatten(),
    //      tf.keras.layers.Dense(256,
    //                            activation='relu',
    //                            kernel_regularizer=regularizer),
    //      tf.keras.layers.Dense(128,
    //                            activation='relu',
    //                            kernel_regularizer=regularizer),
    //      tf.keras.layers.Dense(10,
    //                            kernel_regularizer=regularizer)])
    return keras::Sequential({
        keras::layers::Conv2D(
            wide, 3,
            {.activation = "relu", .kernel_regularizer = regularizer, .input_shape = {28, 28, 1}}),
        keras::layers::Conv2D(wide, 3, {.activation = "relu", .kernel_regularizer = regularizer}),
        keras::layers::Flatten(),
        keras::layers::Dense(wide, {.activation = "relu", .kernel_regularizer = regularizer}),
        keras::layers::Dense(wide / 2, {.activation = "relu", .kernel_regularizer = regularizer}),
        keras::layers::Dense(10, {.kernel_regularizer = regularizer}),
    });
  };

  // ### Load the dataset

  // def get_dataset(batch_size, is_training=True):
  auto get_dataset = [&](int64_t batch_size, bool is_training = true) {
    // split = 'train' if is_training else 'test'
    // dataset, info = tfds.load(name='mnist', split=split, with_info=True,
    //                           as_supervised=True, try_gcs=True)
    const keras::datasets::fashion_mnist::XY& split = is_training ? data.first : data.second;
    tf::Tensor images = tf::expand_dims(split.first, -1);
    tf::Tensor labels = tf::cast(split.second, tf::DType::int64);
    if (flags.limit_examples > 0) {
      const int64_t n = is_training ? flags.limit_examples : flags.limit_examples / 2;
      images = tf::slice(images, {0, 0, 0, 0}, {n, 28, 28, 1});
      labels = tf::slice(labels, {0}, {n});
    }
    tf::data::Dataset dataset = tf::data::Dataset::from_tensor_slices({images, labels});

    // # Normalize the input data.
    // def scale(image, label):
    auto scale = [](const tf::data::Element& e) -> tf::data::Element {
      tf::Tensor image = e[0], label = e[1];
      // image = tf.cast(image, tf.float32)
      image = tf::cast(image, tf::DType::float32);
      // image /= 255.0
      image /= 255.f;
      // return image, label
      return {image, label};
    };

    // dataset = dataset.map(scale)
    dataset = dataset.map(scale);

    // # Only shuffle and repeat the dataset in training. The advantage of having an
    // # infinite dataset for training is to avoid the potential last partial batch
    // # in each epoch, so that you don't need to think about scaling the gradients
    // # based on the actual batch size.
    // if is_training:
    //   dataset = dataset.shuffle(10000)
    //   dataset = dataset.repeat()
    if (is_training) {
      dataset = dataset.shuffle(10000);
      dataset = dataset.repeat();
    }

    // dataset = dataset.batch(batch_size)
    dataset = dataset.batch(batch_size);

    // return dataset
    return dataset;
  };

  // ### Train the model using Keras high-level APIs

  std::shared_ptr<keras::SequentialModel> model;
  // with strategy.scope():
  {
    auto scope = strategy.scope();
    //   model = create_model()
    model = create_model();
    //   model.compile(optimizer='adam',
    //                 loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    //                 metrics=['sparse_categorical_accuracy'])
    model->compile({.optimizer = "adam",
                    .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true}),
                    .metrics = {"sparse_categorical_accuracy"}});
  }

  // batch_size = 200
  // steps_per_epoch = 60000 // batch_size
  // validation_steps = 10000 // batch_size
  const int64_t batch_size = 200;
  const int64_t steps_per_epoch = flags.steps > 0 ? flags.steps : 60000 / batch_size;
  const int64_t validation_steps = flags.steps > 0 ? flags.steps : 10000 / batch_size;

  // train_dataset = get_dataset(batch_size, is_training=True)
  // test_dataset = get_dataset(batch_size, is_training=False)
  auto train_dataset = get_dataset(batch_size, /*is_training=*/true);
  auto test_dataset = get_dataset(batch_size, /*is_training=*/false);

  // model.fit(train_dataset,
  //           epochs=5,
  //           steps_per_epoch=steps_per_epoch,
  //           validation_data=test_dataset,
  //           validation_steps=validation_steps)
  keras::History history = model->fit(train_dataset, {.epochs = flags.epochs,
                                                      .validation_data = test_dataset,
                                                      .steps_per_epoch = steps_per_epoch,
                                                      .validation_steps = validation_steps});
  const auto& val_accuracy = history.history["val_sparse_categorical_accuracy"];
  example::expect(history.history["loss"].back() < history.history["loss"].front(),
                  "fit: the training loss decreases");
  const auto& val_loss = history.history["val_loss"];
  // After a few steps only: twice chance (0.1), and the validation loss falls.
  example::expect(val_accuracy.back() > 0.2, "fit: the validation accuracy is above chance");
  example::expect(val_loss.back() < val_loss.front(), "fit: the validation loss decreases");

  // with strategy.scope():
  {
    auto scope = strategy.scope();
    //   model = create_model()
    model = create_model();
    //   model.compile(optimizer='adam',
    //                 # Anything between 2 and `steps_per_epoch` could help here.
    //                 steps_per_execution = 50,
    //                 loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    //                 metrics=['sparse_categorical_accuracy'])
    model->compile({.optimizer = "adam",
                    .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true}),
                    .metrics = {"sparse_categorical_accuracy"},
                    .steps_per_execution = 50});
  }

  // model.fit(train_dataset,
  //           epochs=5,
  //           steps_per_epoch=steps_per_epoch,
  //           validation_data=test_dataset,
  //           validation_steps=validation_steps)
  history = model->fit(train_dataset, {.epochs = flags.epochs,
                                       .validation_data = test_dataset,
                                       .steps_per_epoch = steps_per_epoch,
                                       .validation_steps = validation_steps});
  example::expect(history.history["loss"].back() < history.history["loss"].front(),
                  "fit with steps_per_execution: the training loss decreases");
  example::expect(history.history["val_loss"].back() < history.history["val_loss"].front(),
                  "fit with steps_per_execution: the validation loss decreases");

  // ### Train the model using a custom training loop

  // # Create the model, optimizer and metrics inside the `tf.distribute.Strategy`
  // # scope, so that the variables can be mirrored on each device.
  std::shared_ptr<keras::optimizers::AdamOptimizer> optimizer;
  std::shared_ptr<keras::metrics::MeanMetric> training_loss;
  std::shared_ptr<keras::metrics::SparseCategoricalAccuracyMetric> training_accuracy;
  // with strategy.scope():
  {
    auto scope = strategy.scope();
    //   model = create_model()
    model = create_model();
    //   optimizer = tf.keras.optimizers.Adam()
    optimizer = keras::optimizers::Adam({});
    //   training_loss = tf.keras.metrics.Mean('training_loss', dtype=tf.float32)
    training_loss = keras::metrics::Mean({.name = "training_loss", .dtype = tf::DType::float32});
    //   training_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(
    //       'training_accuracy', dtype=tf.float32)
    training_accuracy = keras::metrics::SparseCategoricalAccuracy(
        {.name = "training_accuracy", .dtype = tf::DType::float32});
  }

  // # Calculate per replica batch size, and distribute the `tf.data.Dataset`s
  // # on each TPU worker.
  // per_replica_batch_size = batch_size // strategy.num_replicas_in_sync
  const int64_t per_replica_batch_size = batch_size / strategy.num_replicas_in_sync();

  // train_dataset = strategy.distribute_datasets_from_function(
  //     lambda _: get_dataset(per_replica_batch_size, is_training=True))
  sd::DistributedDataset train_dist_dataset =
      strategy.distribute_datasets_from_function([&](const sd::InputContext&) {
        return get_dataset(per_replica_batch_size, /*is_training=*/true);
      });

  // """The computation to run on each TPU device."""
  // def step_fn(inputs):
  //   (the guide defines it inside train_step and again inside train_multiple_steps)
  auto step_fn = [&](const tf::data::Element& inputs) {
    // images, labels = inputs
    const tf::Tensor& images = inputs[0];
    const tf::Tensor& labels = inputs[1];
    // with tf.GradientTape() as tape:
    tf::Tensor logits, loss;
    std::vector<tf::Tensor> grads;
    {
      tf::GradientTape tape;
      // logits = model(images, training=True)
      logits = (*model)(images, /*training=*/true);
      // per_example_loss = tf.keras.losses.sparse_categorical_crossentropy(
      //     labels, logits, from_logits=True)
      tf::Tensor per_example_loss =
          keras::losses::sparse_categorical_crossentropy(labels, logits, {.from_logits = true});
      // loss = tf.nn.compute_average_loss(per_example_loss)
      loss = tf::nn::compute_average_loss(per_example_loss);
      // model_losses = model.losses
      std::vector<tf::Tensor> model_losses = model->losses();
      // if model_losses:
      //   loss += tf.nn.scale_regularization_loss(tf.add_n(model_losses))
      if (!model_losses.empty()) loss += tf::nn::scale_regularization_loss(tf::add_n(model_losses));
      // grads = tape.gradient(loss, model.trainable_variables)
      grads = tape.gradient(loss, model->trainable_variables());
    }
    // optimizer.apply_gradients(list(zip(grads, model.trainable_variables)))
    optimizer->apply_gradients(tf::zip(grads, model->trainable_variables()));
    // training_loss.update_state(loss * strategy.num_replicas_in_sync)
    training_loss->update_state(loss * static_cast<float>(strategy.num_replicas_in_sync()));
    // training_accuracy.update_state(labels, logits)
    training_accuracy->update_state(labels, logits);
  };

  // @tf.function
  // def train_step(iterator):
  //   """The step function for one training step."""
  auto train_step = [&](sd::DistributedIterator& iterator) {
    //   strategy.run(step_fn, args=(next(iterator),))
    strategy.run(step_fn, iterator.get_next());
  };

  // steps_per_eval = 10000 // batch_size
  [[maybe_unused]] const int64_t steps_per_eval = 10000 / batch_size;

  // train_iterator = iter(train_dataset)
  sd::DistributedIterator train_iterator = train_dist_dataset.iter();
  std::vector<double> ctl_losses;
  // for epoch in range(5):
  for (int epoch = 0; epoch < flags.epochs; ++epoch) {
    //   print('Epoch: {}/5'.format(epoch))
    std::cout << "Epoch: " << epoch << "/" << flags.epochs << "\n";

    //   for step in range(steps_per_epoch):
    //     train_step(train_iterator)
    for (int64_t step = 0; step < steps_per_epoch; ++step) train_step(train_iterator);
    //   print('Current step: {}, training loss: {}, training accuracy: {}%'.format(
    //       optimizer.iterations.numpy(),
    //       round(float(training_loss.result()), 4),
    //       round(float(training_accuracy.result()) * 100, 2)))
    std::cout << "Current step: " << optimizer->iterations() << ", training loss: "
              << std::round(training_loss->result().item<float>() * 1e4) / 1e4
              << ", training accuracy: "
              << std::round(training_accuracy->result().item<float>() * 100 * 100) / 100 << "%\n";
    example::expect(optimizer->iterations() == (epoch + 1) * steps_per_epoch,
                    "one optimizer step per training step");
    ctl_losses.push_back(training_loss->result().item<float>());
    //   training_loss.reset_states()
    //   training_accuracy.reset_states()
    training_loss->reset_states();
    training_accuracy->reset_states();
  }
  example::expect(ctl_losses.back() < ctl_losses.front() || flags.epochs == 1,
                  "custom loop: the training loss decreases");

  // ### Improving performance with multiple steps inside `tf.function`

  // @tf.function
  // def train_multiple_steps(iterator, steps):
  //   """The step function for one training step."""
  auto train_multiple_steps = [&](sd::DistributedIterator& iterator, const tf::Tensor& steps) {
    //   for _ in tf.range(steps):
    //     strategy.run(step_fn, args=(next(iterator),))
    for (int64_t i = 0; i < steps.scalar_as_double(); ++i)
      strategy.run(step_fn, iterator.get_next());
  };

  // # Convert `steps_per_epoch` to `tf.Tensor` so the `tf.function` won't get
  // # retraced if the value changes.
  // train_multiple_steps(train_iterator, tf.convert_to_tensor(steps_per_epoch))
  train_multiple_steps(train_iterator, tf::constant(steps_per_epoch));

  // print('Current step: {}, training loss: {}, training accuracy: {}%'.format(
  //       optimizer.iterations.numpy(),
  //       round(float(training_loss.result()), 4),
  //       round(float(training_accuracy.result()) * 100, 2)))
  std::cout << "Current step: " << optimizer->iterations()
            << ", training loss: " << std::round(training_loss->result().item<float>() * 1e4) / 1e4
            << ", training accuracy: "
            << std::round(training_accuracy->result().item<float>() * 100 * 100) / 100 << "%\n";
  example::expect(optimizer->iterations() == (flags.epochs + 1) * steps_per_epoch,
                  "train_multiple_steps runs steps_per_epoch more steps");
  example::expect(training_accuracy->result().item<float>() > 0.3,
                  "the training accuracy is above chance (0.1)");

  tf::tpu::experimental::shutdown_tpu_system();
  return example::exit_code();
}
