// TensorFlow's guide "Distributed training with Keras"
// (tensorflow.org/tutorials/distribute/keras), statement by statement.
// Each Python statement is quoted above its C++; docs/porting.md lists where
// the C++ cannot read the same.
//
//   build/examples/tutorials/keras                                   # the guide: 12 epochs
//   build/examples/tutorials/keras --epochs 4 --limit-examples 1280  # the test
//
// Data: the guide loads MNIST through tensorflow_datasets; this program reads
// Fashion-MNIST (the same shapes and dtypes: uint8 [28, 28, 1] images, int64
// labels) from Debian's dataset-fashion-mnist (or STRATA_DATA_DIR); without it
// the program says so and exits 0, as a skipped test. --limit-examples N keeps
// the first N training and N / 2 test images.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../example_check.h"
#include "strata/keras/keras.h"
#include "strata/strata.h"
#include "tutorial.h"

namespace tf = strata;
namespace sd = strata::distribute;
namespace keras = strata::keras;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  const tutorial::Flags flags = tutorial::parse_flags(argc, argv, {.epochs = 12});
  const std::string workdir = tutorial::make_temp_dir("keras_tutorial");

  // ## Setup

  // # Load the TensorBoard notebook extension.
  // %load_ext tensorboard
  // (A notebook command: nothing to do in a program.)

  // ## Download the dataset

  // datasets, info = tfds.load(name='mnist', with_info=True, as_supervised=True)
  // mnist_train, mnist_test = datasets['train'], datasets['test']
  std::pair<keras::datasets::fashion_mnist::XY, keras::datasets::fashion_mnist::XY> data;
  try {
    data = keras::datasets::fashion_mnist::load_data();
  } catch (const tf::NotFoundError& e) {
    std::cout << "skipped: " << e.what() << "\n";
    return 0;
  }
  // tfds's elements are (uint8 [28, 28, 1] image, int64 label) pairs.
  auto as_supervised = [&](const keras::datasets::fashion_mnist::XY& xy, int64_t limit) {
    tf::Tensor images = tf::expand_dims(xy.first, -1);
    tf::Tensor labels = tf::cast(xy.second, tf::DType::int64);
    if (limit > 0) {
      images = tf::slice(images, {0, 0, 0, 0}, {limit, 28, 28, 1});
      labels = tf::slice(labels, {0}, {limit});
    }
    return tf::data::Dataset::from_tensor_slices({images, labels});
  };
  tf::data::Dataset mnist_train = as_supervised(data.first, flags.limit_examples);
  tf::data::Dataset mnist_test = as_supervised(data.second, flags.limit_examples / 2);

  // ## Define the distribution strategy

  // strategy = tf.distribute.MirroredStrategy()
  sd::MirroredStrategy strategy;

  // print('Number of devices: {}'.format(strategy.num_replicas_in_sync))
  std::cout << "Number of devices: " << strategy.num_replicas_in_sync() << "\n";

  // ## Set up the input pipeline

  // num_train_examples = info.splits['train'].num_examples
  // num_test_examples = info.splits['test'].num_examples
  const int64_t num_train_examples = mnist_train.cardinality();
  const int64_t num_test_examples = mnist_test.cardinality();
  std::cout << "Examples: " << num_train_examples << " training, " << num_test_examples
            << " test\n";

  // BUFFER_SIZE = 10000
  const int64_t BUFFER_SIZE = 10000;

  // BATCH_SIZE_PER_REPLICA = 64
  // BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync
  const int64_t BATCH_SIZE_PER_REPLICA = 64;
  const int64_t BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync();

  // def scale(image, label):
  auto scale = [](const tf::data::Element& e) -> tf::data::Element {
    tf::Tensor image = e[0], label = e[1];
    // image = tf.cast(image, tf.float32)
    image = tf::cast(image, tf::DType::float32);
    // image /= 255
    image /= 255;
    // return image, label
    return {image, label};
  };

  // train_dataset = mnist_train.map(scale).cache().shuffle(BUFFER_SIZE).batch(BATCH_SIZE)
  // eval_dataset = mnist_test.map(scale).batch(BATCH_SIZE)
  auto train_dataset = mnist_train.map(scale).cache().shuffle(BUFFER_SIZE).batch(BATCH_SIZE);
  auto eval_dataset = mnist_test.map(scale).batch(BATCH_SIZE);

  // ## Create the model and instantiate the optimizer

  std::shared_ptr<keras::SequentialModel> model;
  // with strategy.scope():
  {
    auto scope = strategy.scope();
    // model = tf.keras.Sequential([
    //     tf.keras.layers.Conv2D(32, 3, activation='relu', input_shape=(28, 28, 1)),
    //     tf.keras.layers.MaxPooling2D(),
    //     tf.keras.layers.Flatten(),
    //     tf.keras.layers.Dense(64, activation='relu'),
    //     tf.keras.layers.Dense(10)
    // ])
    model = keras::Sequential({
        keras::layers::Conv2D(32, 3, {.activation = "relu", .input_shape = {28, 28, 1}}),
        keras::layers::MaxPooling2D(),
        keras::layers::Flatten(),
        keras::layers::Dense(64, {.activation = "relu"}),
        keras::layers::Dense(10),
    });

    // model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    //               optimizer=tf.keras.optimizers.Adam(learning_rate=0.001),
    //               metrics=['accuracy'])
    model->compile({.optimizer = keras::optimizers::Adam({.learning_rate = 0.001}),
                    .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true}),
                    .metrics = {"accuracy"}});
  }

  // ## Define the callbacks

  // # Define the checkpoint directory to store the checkpoints.
  // checkpoint_dir = './training_checkpoints'
  const std::string checkpoint_dir = workdir + "/training_checkpoints";
  // # Define the name of the checkpoint files.
  // checkpoint_prefix = os.path.join(checkpoint_dir, "ckpt_{epoch:04d}.weights.h5")
  const std::string checkpoint_prefix =
      (fs::path(checkpoint_dir) / "ckpt_{epoch:04d}.weights.h5").string();

  // # Define a function for decaying the learning rate.
  // # You can define any decay function you need.
  // def decay(epoch):
  auto decay = [](int epoch) {
    // if epoch < 3:
    //   return 1e-3
    // elif epoch >= 3 and epoch < 7:
    //   return 1e-4
    // else:
    //   return 1e-5
    if (epoch < 3) {
      return 1e-3;
    } else if (epoch >= 3 && epoch < 7) {
      return 1e-4;
    } else {
      return 1e-5;
    }
  };

  // # Define a callback for printing the learning rate at the end of each epoch.
  // class PrintLR(tf.keras.callbacks.Callback):
  //   def on_epoch_end(self, epoch, logs=None):
  //     print('\nLearning rate for epoch {} is {}'.format(
  //         epoch + 1, model.optimizer.learning_rate.numpy()))
  struct PrintLR : keras::callbacks::Callback {
    std::shared_ptr<keras::SequentialModel> model;
    std::vector<double> printed;  // not in the guide: what the check below reads
    explicit PrintLR(std::shared_ptr<keras::SequentialModel> m) : model(std::move(m)) {}
    void on_epoch_end(int epoch, keras::Logs& /*logs*/) override {
      std::cout << "\nLearning rate for epoch " << epoch + 1 << " is "
                << model->optimizer()->learning_rate() << "\n";
      printed.push_back(model->optimizer()->learning_rate());
    }
  };
  auto print_lr = std::make_shared<PrintLR>(model);

  // # Put all the callbacks together.
  // callbacks = [
  //     tf.keras.callbacks.TensorBoard(log_dir='./logs'),
  //     tf.keras.callbacks.ModelCheckpoint(filepath=checkpoint_prefix,
  //                                        save_weights_only=True),
  //     tf.keras.callbacks.LearningRateScheduler(decay),
  //     PrintLR()
  // ]
  std::vector<keras::callbacks::CallbackPtr> callbacks = {
      keras::callbacks::TensorBoard({.log_dir = workdir + "/logs"}),
      keras::callbacks::ModelCheckpoint(checkpoint_prefix, {.save_weights_only = true}),
      keras::callbacks::LearningRateScheduler(decay),
      print_lr,
  };

  // ## Train and evaluate

  // EPOCHS = 12
  const int EPOCHS = flags.epochs;

  // model.fit(train_dataset, epochs=EPOCHS, callbacks=callbacks)
  keras::History history = model->fit(train_dataset, {.epochs = EPOCHS, .callbacks = callbacks});
  const std::vector<double>& losses = history.history["loss"];
  example::expect(losses.back() < losses.front() || EPOCHS == 1, "the training loss decreases");
  for (int epoch = 0; epoch < EPOCHS; ++epoch) {
    // The learning rate is a float32 variable, as in Keras.
    example::expect(std::abs(print_lr->printed.at(epoch) - decay(epoch)) < 1e-9,
                    "PrintLR prints the learning rate decay() gives");
  }

  // # Check the checkpoint directory.
  // !ls {checkpoint_dir}
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(checkpoint_dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) std::cout << f.filename().string() << "\n";
  example::expect(files.size() == static_cast<size_t>(EPOCHS),
                  "ModelCheckpoint wrote one file per epoch");

  // latest_checkpoint = sorted(pathlib.Path(checkpoint_dir).glob('*'))[-1]
  const fs::path latest_checkpoint = files.back();
  char expected_name[64];
  std::snprintf(expected_name, sizeof expected_name, "ckpt_%04d.weights.h5", EPOCHS);
  example::expect(latest_checkpoint.filename() == expected_name,
                  "the latest checkpoint is the last epoch's");

  // model.load_weights(latest_checkpoint)
  model->load_weights(latest_checkpoint.string());

  // eval_loss, eval_acc = model.evaluate(eval_dataset)
  keras::Logs result = model->evaluate(eval_dataset);
  double eval_loss = result.at("loss"), eval_acc = result.at("accuracy");

  // print('Eval loss: {}, Eval accuracy: {}'.format(eval_loss, eval_acc))
  std::cout << "Eval loss: " << eval_loss << ", Eval accuracy: " << eval_acc << "\n";
  example::expect(eval_acc > 0.3, "the eval accuracy is far above chance (0.1)");
  const double trained_loss = eval_loss, trained_acc = eval_acc;

  // %tensorboard --logdir=logs
  // !ls -sh ./logs
  for (const auto& entry : fs::recursive_directory_iterator(workdir + "/logs")) {
    if (entry.is_regular_file())
      std::cout << entry.file_size() << " " << fs::relative(entry.path(), workdir).string() << "\n";
  }

  // ## Save the model

  // path = 'my_model.keras'
  const std::string path = workdir + "/my_model.keras";

  // model.save(path)
  model->save(path);

  // unreplicated_model = tf.keras.models.load_model(path)
  auto unreplicated_model = keras::models::load_model(path);
  example::expect(unreplicated_model->get_config() == model->get_config(),
                  "the loaded model has the saved model's architecture");

  // unreplicated_model.compile(
  //     loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
  //     optimizer=tf.keras.optimizers.Adam(),
  //     metrics=['accuracy'])
  unreplicated_model->compile(
      {.optimizer = keras::optimizers::Adam({}),
       .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true}),
       .metrics = {"accuracy"}});

  // eval_loss, eval_acc = unreplicated_model.evaluate(eval_dataset)
  result = unreplicated_model->evaluate(eval_dataset);
  eval_loss = result.at("loss"), eval_acc = result.at("accuracy");

  // print('Eval loss: {}, Eval Accuracy: {}'.format(eval_loss, eval_acc))
  std::cout << "Eval loss: " << eval_loss << ", Eval Accuracy: " << eval_acc << "\n";
  example::expect(std::abs(eval_loss - trained_loss) < 1e-5 && eval_acc == trained_acc,
                  "the reloaded model evaluates as the trained one, without a strategy");

  // with strategy.scope():
  {
    auto scope = strategy.scope();
    //   replicated_model = tf.keras.models.load_model(path)
    auto replicated_model = keras::models::load_model(path);
    example::expect(sd::is_mirrored_variable(replicated_model->trainable_variables().front()),
                    "the model loaded in the strategy's scope has mirrored variables");
    //   replicated_model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    //                            optimizer=tf.keras.optimizers.Adam(),
    //                            metrics=['accuracy'])
    replicated_model->compile(
        {.optimizer = keras::optimizers::Adam({}),
         .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true}),
         .metrics = {"accuracy"}});

    //   eval_loss, eval_acc = replicated_model.evaluate(eval_dataset)
    result = replicated_model->evaluate(eval_dataset);
    eval_loss = result.at("loss"), eval_acc = result.at("accuracy");
    //   print ('Eval loss: {}, Eval Accuracy: {}'.format(eval_loss, eval_acc))
    std::cout << "Eval loss: " << eval_loss << ", Eval Accuracy: " << eval_acc << "\n";
    example::expect(std::abs(eval_loss - trained_loss) < 1e-5 && eval_acc == trained_acc,
                    "the reloaded model evaluates as the trained one, under the strategy");
  }

  fs::remove_all(workdir);
  return example::exit_code();
}
