// TensorFlow's guide "Multi-worker training with Keras"
// (tensorflow.org/tutorials/distribute/multi_worker_with_keras), statement by
// statement. Each Python statement is quoted above its C++; docs/porting.md
// lists where the C++ cannot read the same.
//
// The guide is a notebook that writes two Python files: mnist_setup.py (the
// dataset and the model, here the functions in the anonymous namespace) and
// main.py (one worker's program, here main_py(), which this program runs when
// started with `--main`). The notebook starts two workers, `python main.py`
// with TF_CONFIG naming each one's task: here, this program again (`--main`,
// on free loopback ports), worker 0 in the background with its output in
// job_0.log, worker 1 in the foreground.
//
//   build/examples/tutorials/multi_worker_with_keras      # the guide: 3 epochs of 70 steps
//   build/examples/tutorials/multi_worker_with_keras --epochs 2 --steps 3 --limit-examples 2000
//
// Data: the guide's MNIST is Fashion-MNIST here (the same shapes), from
// Debian's dataset-fashion-mnist (or STRATA_DATA_DIR); without it the program
// says so and exits 0, as a skipped test. --limit-examples N keeps the first N
// training images; --steps N replaces the guide's steps_per_epoch (70, 20).
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../example_check.h"
#include "strata/keras/keras.h"
#include "strata/strata.h"
#include "tutorial.h"

namespace tf = strata;
namespace sd = strata::distribute;
namespace keras = strata::keras;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

tutorial::Flags flags;

// %%writefile mnist_setup.py

// def mnist_dataset(batch_size):
tf::data::Dataset mnist_dataset(int64_t batch_size) {
  //   (x_train, y_train), _ = tf.keras.datasets.mnist.load_data()
  auto [train, test] = keras::datasets::fashion_mnist::load_data();
  auto [x_train, y_train] = train;
  if (flags.limit_examples > 0) {
    x_train = tf::slice(x_train, {0, 0, 0}, {flags.limit_examples, 28, 28});
    y_train = tf::slice(y_train, {0}, {flags.limit_examples});
  }
  //   # The `x` arrays are in uint8 and have values in the [0, 255] range.
  //   # You need to convert them to float32 with values in the [0, 1] range.
  //   x_train = x_train / np.float32(255)
  //   y_train = y_train.astype(np.int64)
  x_train = x_train / 255.f;
  y_train = tf::cast(y_train, tf::DType::int64);
  //   train_dataset = tf.data.Dataset.from_tensor_slices(
  //       (x_train, y_train)).shuffle(60000).repeat().batch(batch_size)
  auto train_dataset = tf::data::Dataset::from_tensor_slices({x_train, y_train})
                           .shuffle(60000)
                           .repeat()
                           .batch(batch_size);
  //   return train_dataset
  return train_dataset;
}

// def build_and_compile_cnn_model():
std::shared_ptr<keras::SequentialModel> build_and_compile_cnn_model() {
  //   model = tf.keras.Sequential([
  //       tf.keras.layers.InputLayer(input_shape=(28, 28)),
  //       tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
  //       tf.keras.layers.Conv2D(32, 3, activation='relu'),
  //       tf.keras.layers.Flatten(),
  //       tf.keras.layers.Dense(128, activation='relu'),
  //       tf.keras.layers.Dense(10)
  //   ])
  auto model = keras::Sequential({
      keras::layers::InputLayer({.input_shape = {{28, 28}}}),
      keras::layers::Reshape({28, 28, 1}),
      keras::layers::Conv2D(32, 3, {.activation = "relu"}),
      keras::layers::Flatten(),
      keras::layers::Dense(128, {.activation = "relu"}),
      keras::layers::Dense(10),
  });
  //   model.compile(
  //       loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
  //       optimizer=tf.keras.optimizers.SGD(learning_rate=0.001),
  //       metrics=['accuracy'])
  model->compile({.optimizer = keras::optimizers::SGD({.learning_rate = 0.001}),
                  .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true}),
                  .metrics = {"accuracy"}});
  //   return model
  return model;
}

// Not in the guide: fixed examples (the first 256 test images, in order) on
// which the notebook compares the saved model with the loaded one.
tf::data::Dataset comparison_dataset() {
  auto [train, test] = keras::datasets::fashion_mnist::load_data();
  const tf::Tensor x = tf::slice(test.first, {0, 0, 0}, {256, 28, 28}) / 255.f;
  const tf::Tensor y = tf::cast(tf::slice(test.second, {0}, {256}), tf::DType::int64);
  return tf::data::Dataset::from_tensor_slices({x, y}).batch(64);
}

// The guide's steps_per_epoch, or --steps.
int64_t steps(int64_t guide) { return flags.steps > 0 ? flags.steps : guide; }
int epochs(int guide) { return flags.epochs > 0 ? std::min(flags.epochs, guide) : guide; }

// Not in the guide: a fingerprint of the weights, which every worker prints
// so that the notebook can check that the workers stayed in sync.
double weights_sum(const keras::Model& model) {
  double sum = 0;
  for (const tf::Tensor& w : model.get_weights())
    for (float v : w.to_vector<float>()) sum += std::abs(v);
  return sum;
}

// %%writefile main.py
int main_py() {
  //   per_worker_batch_size = 64
  //   tf_config = json.loads(os.environ['TF_CONFIG'])
  //   num_workers = len(tf_config['cluster']['worker'])
  const int64_t per_worker_batch_size = 64;
  const json tf_config = json::parse(std::getenv("TF_CONFIG"));
  const int64_t num_workers = static_cast<int64_t>(tf_config["cluster"]["worker"].size());

  //   strategy = tf.distribute.MultiWorkerMirroredStrategy()
  sd::MultiWorkerMirroredStrategy strategy;

  //   global_batch_size = per_worker_batch_size * num_workers
  //   multi_worker_dataset = mnist_setup.mnist_dataset(global_batch_size)
  const int64_t global_batch_size = per_worker_batch_size * num_workers;
  auto multi_worker_dataset = mnist_dataset(global_batch_size);

  std::shared_ptr<keras::SequentialModel> multi_worker_model;
  //   with strategy.scope():
  {
    auto scope = strategy.scope();
    //     # Model building/compiling need to be within `strategy.scope()`.
    //     multi_worker_model = mnist_setup.build_and_compile_cnn_model()
    multi_worker_model = build_and_compile_cnn_model();
  }

  //   multi_worker_model.fit(multi_worker_dataset, epochs=3, steps_per_epoch=70)
  keras::History history = multi_worker_model->fit(
      multi_worker_dataset, {.epochs = epochs(3), .steps_per_epoch = steps(70)});
  const auto& loss = history.history["loss"];
  example::expect(std::isfinite(loss.back()) && loss.back() < 2.5,
                  "the worker's loss is finite and below chance (ln 10 = 2.30) plus noise");
  std::cout << "weights sum: " << weights_sum(*multi_worker_model) << "\n";
  return example::exit_code();
}

// The last "weights sum: X" a worker printed.
std::optional<double> printed_weights_sum(const std::string& log) {
  const std::string key = "weights sum: ";
  const size_t at = log.rfind(key);
  if (at == std::string::npos) return std::nullopt;
  return std::stod(log.substr(at + key.size()));
}

}  // namespace

int main(int argc, char** argv) {
  const bool is_main_py = argc > 1 && std::string(argv[1]) == "--main";
  flags = tutorial::parse_flags(is_main_py ? argc - 1 : argc, is_main_py ? argv + 1 : argv,
                                {.epochs = 3});
  try {
    if (is_main_py) return main_py();
    keras::datasets::fashion_mnist::load_data();
  } catch (const tf::NotFoundError& e) {
    std::cout << "skipped: " << e.what() << "\n";
    return 0;
  }
  const std::string workdir = tutorial::make_temp_dir("multi_worker_with_keras");

  // ## Setup

  // os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
  // (No GPUs: nothing to hide.)

  // os.environ.pop('TF_CONFIG', None)
  ::unsetenv("TF_CONFIG");

  // ### Model training on a single worker

  // batch_size = 64
  // single_worker_dataset = mnist_setup.mnist_dataset(batch_size)
  // single_worker_model = mnist_setup.build_and_compile_cnn_model()
  // single_worker_model.fit(single_worker_dataset, epochs=3, steps_per_epoch=70)
  const int64_t batch_size = 64;
  auto single_worker_dataset = mnist_dataset(batch_size);
  auto single_worker_model = build_and_compile_cnn_model();
  single_worker_model->fit(single_worker_dataset,
                           {.epochs = epochs(3), .steps_per_epoch = steps(70)});

  // ## Multi-worker configuration

  // ### A cluster with jobs and tasks

  // tf_config = {
  //     'cluster': {
  //         'worker': ['localhost:12345', 'localhost:23456']
  //     },
  //     'task': {'type': 'worker', 'index': 0}
  // }
  const std::vector<int> ports = tutorial::pick_free_ports(2);
  json tf_config = {
      {"cluster",
       {{"worker",
         {"localhost:" + std::to_string(ports[0]), "localhost:" + std::to_string(ports[1])}}}},
      {"task", {{"type", "worker"}, {"index", 0}}},
  };

  // json.dumps(tf_config)
  std::cout << tf_config.dump() << "\n";

  // ### Environment variables and subprocesses in notebooks

  // os.environ['GREETINGS'] = 'Hello TensorFlow!'
  ::setenv("GREETINGS", "Hello TensorFlow!", 1);

  // %%bash
  // echo ${GREETINGS}
  std::cout.flush();
  example::expect(std::system("echo ${GREETINGS}") == 0, "a subprocess sees the variable");

  // ## Train the model

  // strategy = tf.distribute.MultiWorkerMirroredStrategy()
  sd::MultiWorkerMirroredStrategy strategy;

  std::shared_ptr<keras::SequentialModel> multi_worker_model;
  // with strategy.scope():
  {
    auto scope = strategy.scope();
    //   # Model building/compiling need to be within `strategy.scope()`.
    //   multi_worker_model = mnist_setup.build_and_compile_cnn_model()
    multi_worker_model = build_and_compile_cnn_model();
  }

  // os.environ['TF_CONFIG'] = json.dumps(tf_config)
  // (Each worker process gets its TF_CONFIG from Processes::spawn.)
  std::vector<std::string> worker_args = {"--main"};
  for (int k = 1; k < argc; ++k) worker_args.push_back(argv[k]);
  tutorial::Processes processes;

  // %%bash --bg
  // python main.py &> job_0.log
  const std::string job_0_log = workdir + "/job_0.log";
  const pid_t job_0 = processes.spawn(worker_args, tf_config.dump(), job_0_log);

  // import time
  // time.sleep(10)
  // (Shortened: worker 0 waits for worker 1 however long it takes.)
  std::this_thread::sleep_for(std::chrono::seconds(1));

  // %%bash
  // cat job_0.log
  std::cout << tutorial::read_text(job_0_log);

  // tf_config['task']['index'] = 1
  // os.environ['TF_CONFIG'] = json.dumps(tf_config)
  tf_config["task"]["index"] = 1;

  // %%bash
  // python main.py
  const std::string job_1_log = workdir + "/job_1.log";  // also printed, as the cell shows it
  const pid_t job_1 = processes.spawn(worker_args, tf_config.dump(), job_1_log);
  const int status_1 = processes.wait(job_1, std::chrono::seconds(300));
  std::cout << tutorial::read_text(job_1_log);
  const int status_0 = processes.wait(job_0, std::chrono::seconds(60));

  // %%bash
  // cat job_0.log
  std::cout << tutorial::read_text(job_0_log);
  example::expect(status_0 == 0 && status_1 == 0, "both workers trained and passed their checks");
  const auto sum_0 = printed_weights_sum(tutorial::read_text(job_0_log));
  const auto sum_1 = printed_weights_sum(tutorial::read_text(job_1_log));
  example::expect(sum_0 && sum_1 && std::abs(*sum_0 - *sum_1) <= 1e-5 * std::abs(*sum_0),
                  "the two workers end with the same weights");

  // # Delete the `TF_CONFIG`, and kill any background tasks so they don't affect the next section.
  // os.environ.pop('TF_CONFIG', None)
  // %killbgscripts
  // (The workers have finished; Processes kills any left when it goes.)

  // ## Multi-worker training in depth

  // ### Dataset sharding

  // options = tf.data.Options()
  // options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
  tf::data::Options options;
  options.experimental_distribute.auto_shard_policy = tf::data::AutoShardPolicy::OFF;

  // global_batch_size = 64
  // multi_worker_dataset = mnist_setup.mnist_dataset(batch_size=64)
  // dataset_no_auto_shard = multi_worker_dataset.with_options(options)
  [[maybe_unused]] const int64_t global_batch_size = 64;
  auto multi_worker_dataset = mnist_dataset(/*batch_size=*/64);
  auto dataset_no_auto_shard = multi_worker_dataset.with_options(options);

  // ### Model saving and loading

  // model_path = '/tmp/keras-model'
  const std::string model_path = workdir + "/keras-model";

  // def _is_chief(task_type, task_id):
  auto _is_chief = [](const std::optional<std::string>& task_type,
                      const std::optional<int>& task_id) {
    //   # Note: there are two possible `TF_CONFIG` configurations.
    //   #   1) In addition to `worker` tasks, a `chief` task type is use;
    //   #      in this case, this function should be modified to
    //   #      `return task_type == 'chief'`.
    //   #   2) Only `worker` task type is used; in this case, worker 0 is
    //   #      regarded as the chief. The implementation demonstrated here
    //   #      is for this case.
    //   # For the purpose of this Colab section, the `task_type` is `None` case
    //   # is added because it is effectively run with only a single worker.
    //   return (task_type == 'worker' and task_id == 0) or task_type is None
    return (task_type == "worker" && task_id == 0) || !task_type.has_value();
  };

  // def _get_temp_dir(dirpath, task_id):
  auto _get_temp_dir = [](const std::string& dirpath, const std::optional<int>& task_id) {
    //   base_dirpath = 'workertemp_' + str(task_id)
    //   temp_dir = os.path.join(dirpath, base_dirpath)
    //   tf.io.gfile.makedirs(temp_dir)
    //   return temp_dir
    const std::string base_dirpath =
        "workertemp_" + (task_id ? std::to_string(*task_id) : std::string("None"));
    std::string temp_dir = (fs::path(dirpath) / base_dirpath).string();
    fs::create_directories(temp_dir);
    return temp_dir;
  };

  // def write_filepath(filepath, task_type, task_id):
  auto write_filepath = [&](const std::string& filepath,
                            const std::optional<std::string>& task_type,
                            const std::optional<int>& task_id) {
    //   dirpath = os.path.dirname(filepath)
    //   base = os.path.basename(filepath)
    std::string dirpath = fs::path(filepath).parent_path().string();
    const std::string base = fs::path(filepath).filename().string();
    //   if not _is_chief(task_type, task_id):
    //     dirpath = _get_temp_dir(dirpath, task_id)
    if (!_is_chief(task_type, task_id)) dirpath = _get_temp_dir(dirpath, task_id);
    //   return os.path.join(dirpath, base)
    return (fs::path(dirpath) / base).string();
  };

  // task_type, task_id = (strategy.cluster_resolver.task_type,
  //                       strategy.cluster_resolver.task_id)
  // write_model_path = write_filepath(model_path, task_type, task_id)
  const std::optional<std::string> task_type = strategy.cluster_resolver()->task_type();
  const std::optional<int> task_id = strategy.cluster_resolver()->task_id();
  const std::string write_model_path = write_filepath(model_path, task_type, task_id);

  // multi_worker_model.save(write_model_path)
  multi_worker_model->save(write_model_path);

  // if not _is_chief(task_type, task_id):
  //   tf.io.gfile.rmtree(os.path.dirname(write_model_path))
  if (!_is_chief(task_type, task_id)) fs::remove_all(fs::path(write_model_path).parent_path());

  // loaded_model = tf.keras.models.load_model(model_path)
  auto loaded_model = keras::models::load_model(model_path);
  example::expect(weights_sum(*loaded_model) == weights_sum(*multi_worker_model),
                  "the loaded model has the saved weights");
  const keras::Logs saved_eval = multi_worker_model->evaluate(comparison_dataset());
  const keras::Logs loaded_eval = loaded_model->evaluate(comparison_dataset());
  example::expect(std::abs(loaded_eval.at("loss") - saved_eval.at("loss")) < 1e-5 &&
                      loaded_eval.at("accuracy") == saved_eval.at("accuracy"),
                  "the loaded model, compiled from the file, evaluates as the saved one");

  // # Now that the model is restored, and can continue with the training.
  // loaded_model.fit(single_worker_dataset, epochs=2, steps_per_epoch=20)
  loaded_model->fit(single_worker_dataset, {.epochs = epochs(2), .steps_per_epoch = steps(20)});

  // ### Checkpoint saving and restoring

  // checkpoint_dir = '/tmp/ckpt'
  const std::string checkpoint_dir = workdir + "/ckpt";

  // checkpoint = tf.train.Checkpoint(model=multi_worker_model)
  // write_checkpoint_dir = write_filepath(checkpoint_dir, task_type, task_id)
  // checkpoint_manager = tf.train.CheckpointManager(
  //     checkpoint, directory=write_checkpoint_dir, max_to_keep=1)
  tf::train::Checkpoint checkpoint({{"model", multi_worker_model}});
  const std::string write_checkpoint_dir = write_filepath(checkpoint_dir, task_type, task_id);
  tf::train::CheckpointManager checkpoint_manager(checkpoint, write_checkpoint_dir,
                                                  {.max_to_keep = 1});

  // checkpoint_manager.save()
  // if not _is_chief(task_type, task_id):
  //   tf.io.gfile.rmtree(write_checkpoint_dir)
  checkpoint_manager.save();
  if (!_is_chief(task_type, task_id)) fs::remove_all(write_checkpoint_dir);
  const double saved_sum = weights_sum(*multi_worker_model);

  // latest_checkpoint = tf.train.latest_checkpoint(checkpoint_dir)
  // checkpoint.restore(latest_checkpoint)
  // multi_worker_model.fit(multi_worker_dataset, epochs=2, steps_per_epoch=20)
  const std::optional<std::string> latest_checkpoint = tf::train::latest_checkpoint(checkpoint_dir);
  checkpoint.restore(latest_checkpoint).assert_existing_objects_matched();
  example::expect(weights_sum(*multi_worker_model) == saved_sum,
                  "the restored model has the checkpoint's weights");
  multi_worker_model->fit(multi_worker_dataset,
                          {.epochs = epochs(2), .steps_per_epoch = steps(20)});

  // #### The `BackupAndRestore` callback

  // # Multi-worker training with `MultiWorkerMirroredStrategy`
  // # and the `BackupAndRestore` callback. The training state
  // # is backed up at epoch boundaries by default.
  const std::string backup_dir = workdir + "/backup";
  for (int variant = 0; variant < 3; ++variant) {
    // (The guide's cell three times: the first two as written, the third with
    // `save_freq=30`, "backed up at every 30 steps".)
    // callbacks = [tf.keras.callbacks.BackupAndRestore(backup_dir='/tmp/backup')]
    // callbacks = [tf.keras.callbacks.BackupAndRestore(backup_dir='/tmp/backup', save_freq=30)]
    std::vector<keras::callbacks::CallbackPtr> callbacks = {
        variant < 2
            ? keras::callbacks::BackupAndRestore(backup_dir)
            : keras::callbacks::BackupAndRestore(
                  backup_dir, {.save_freq = static_cast<int>(std::min<int64_t>(30, steps(70)))})};
    // with strategy.scope():
    //   multi_worker_model = mnist_setup.build_and_compile_cnn_model()
    {
      auto scope = strategy.scope();
      multi_worker_model = build_and_compile_cnn_model();
    }
    // multi_worker_model.fit(multi_worker_dataset,
    //                        epochs=3,
    //                        steps_per_epoch=70,
    //                        callbacks=callbacks)
    keras::History history = multi_worker_model->fit(
        multi_worker_dataset,
        {.epochs = epochs(3), .callbacks = callbacks, .steps_per_epoch = steps(70)});
    example::expect(history.history["loss"].size() == static_cast<size_t>(epochs(3)),
                    "BackupAndRestore: every epoch ran");
    example::expect(!fs::exists(backup_dir) || fs::is_empty(backup_dir),
                    "BackupAndRestore deletes its backup when training completes");
  }

  fs::remove_all(workdir);
  return example::exit_code();
}
