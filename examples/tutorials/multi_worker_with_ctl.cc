// TensorFlow's guide "Multi-worker training with a custom training loop"
// (tensorflow.org/tutorials/distribute/multi_worker_with_ctl), statement by
// statement. Each Python statement is quoted above its C++; docs/porting.md
// lists where the C++ cannot read the same.
//
// The notebook writes mnist.py (the dataset and model functions below) and
// main.py (one worker's program: main_py(), run when this program is started
// with `--main`), trains once in the notebook's own process, then starts two
// workers (`python main.py` with TF_CONFIG): this program again, on free
// loopback ports, worker 0 in the background with its output in job_0.log.
//
//   build/examples/tutorials/multi_worker_with_ctl    # the guide: 3 epochs of 70 steps
//   build/examples/tutorials/multi_worker_with_ctl --epochs 2 --steps 5 --limit-examples 2000
//
// Data: the guide's MNIST is Fashion-MNIST here (the same shapes), from
// Debian's dataset-fashion-mnist (or STRATA_DATA_DIR); without it the program
// says so and exits 0, as a skipped test. --limit-examples N keeps the first N
// training images; --steps N replaces num_steps_per_epoch (70).
#include <cmath>
#include <cstdio>
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

// %%writefile mnist.py

// def mnist_dataset(batch_size):
tf::data::Dataset mnist_dataset(int64_t /*batch_size*/) {
  //   (x_train, y_train), _ = tf.keras.datasets.mnist.load_data()
  auto [train, test] = keras::datasets::fashion_mnist::load_data();
  auto [x_train, y_train] = train;
  if (flags.limit_examples > 0) {
    x_train = tf::slice(x_train, {0, 0, 0}, {flags.limit_examples, 28, 28});
    y_train = tf::slice(y_train, {0}, {flags.limit_examples});
  }
  //   # The `x` arrays are in uint8 and have values in the range [0, 255].
  //   # You need to convert them to float32 with values in the range [0, 1]
  //   x_train = x_train / np.float32(255)
  //   y_train = y_train.astype(np.int64)
  x_train = x_train / 255.f;
  y_train = tf::cast(y_train, tf::DType::int64);
  //   train_dataset = tf.data.Dataset.from_tensor_slices(
  //       (x_train, y_train)).shuffle(60000)
  //   return train_dataset
  auto train_dataset = tf::data::Dataset::from_tensor_slices({x_train, y_train}).shuffle(60000);
  return train_dataset;
}

// def dataset_fn(global_batch_size, input_context):
tf::data::Dataset dataset_fn(int64_t global_batch_size, const sd::InputContext& input_context) {
  //   batch_size = input_context.get_per_replica_batch_size(global_batch_size)
  //   dataset = mnist_dataset(batch_size)
  //   dataset = dataset.shard(input_context.num_input_pipelines,
  //                           input_context.input_pipeline_id)
  //   dataset = dataset.batch(batch_size)
  //   return dataset
  const int64_t batch_size = input_context.get_per_replica_batch_size(global_batch_size);
  auto dataset = mnist_dataset(batch_size);
  dataset = dataset.shard(input_context.num_input_pipelines(), input_context.input_pipeline_id());
  dataset = dataset.batch(batch_size);
  return dataset;
}

// def build_cnn_model():
std::shared_ptr<keras::SequentialModel> build_cnn_model() {
  //   regularizer = tf.keras.regularizers.L2(1e-5)
  //   return tf.keras.Sequential([
  //       tf.keras.Input(shape=(28, 28)),
  //       tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
  //       tf.keras.layers.Conv2D(32, 3, activation='relu', kernel_regularizer=regularizer),
  //       tf.keras.layers.Flatten(),
  //       tf.keras.layers.Dense(128, activation='relu', kernel_regularizer=regularizer),
  //       tf.keras.layers.Dense(10, kernel_regularizer=regularizer)
  //   ])
  auto regularizer = keras::regularizers::L2(1e-5);
  return keras::Sequential({
      keras::layers::InputLayer({.input_shape = {{28, 28}}}),
      keras::layers::Reshape({28, 28, 1}),
      keras::layers::Conv2D(32, 3, {.activation = "relu", .kernel_regularizer = regularizer}),
      keras::layers::Flatten(),
      keras::layers::Dense(128, {.activation = "relu", .kernel_regularizer = regularizer}),
      keras::layers::Dense(10, {.kernel_regularizer = regularizer}),
  });
}

// ### Checkpoint saving and restoring

// def _is_chief(task_type, task_id, cluster_spec):
bool _is_chief(const std::optional<std::string>& task_type, const std::optional<int>& task_id,
               const tf::train::ClusterSpec& cluster_spec) {
  //   return (task_type is None
  //           or task_type == 'chief'
  //           or (task_type == 'worker'
  //               and task_id == 0
  //               and "chief" not in cluster_spec.as_dict()))
  return (!task_type.has_value() || task_type == "chief" ||
          (task_type == "worker" && task_id == 0 && !cluster_spec.has_job("chief")));
}

// def _get_temp_dir(dirpath, task_id):
std::string _get_temp_dir(const std::string& dirpath, const std::optional<int>& task_id) {
  //   base_dirpath = 'workertemp_' + str(task_id)
  //   temp_dir = os.path.join(dirpath, base_dirpath)
  //   tf.io.gfile.makedirs(temp_dir)
  //   return temp_dir
  const std::string base_dirpath =
      "workertemp_" + (task_id ? std::to_string(*task_id) : std::string("None"));
  std::string temp_dir = (fs::path(dirpath) / base_dirpath).string();
  fs::create_directories(temp_dir);
  return temp_dir;
}

// def write_filepath(filepath, task_type, task_id, cluster_spec):
std::string write_filepath(const std::string& filepath, const std::optional<std::string>& task_type,
                           const std::optional<int>& task_id,
                           const tf::train::ClusterSpec& cluster_spec) {
  //   dirpath = os.path.dirname(filepath)
  //   base = os.path.basename(filepath)
  //   if not _is_chief(task_type, task_id, cluster_spec):
  //     dirpath = _get_temp_dir(dirpath, task_id)
  //   return os.path.join(dirpath, base)
  std::string dirpath = fs::path(filepath).parent_path().string();
  const std::string base = fs::path(filepath).filename().string();
  if (!_is_chief(task_type, task_id, cluster_spec)) dirpath = _get_temp_dir(dirpath, task_id);
  return (fs::path(dirpath) / base).string();
}

// What one training run reports (not in the guide: the checks read it).
struct Trained {
  std::vector<double> losses;
  double weights_sum = 0;
  int64_t epoch = 0;
};

// The guide's training, from "with strategy.scope(): multi_worker_model = ..."
// to the end of the epoch loop. The notebook runs it in its own process
// (cluster_spec from its tf_config) and main.py runs the same statements on
// each worker (cluster_spec from the strategy's resolver).
Trained train(sd::MultiWorkerMirroredStrategy& strategy, int64_t global_batch_size,
              const tf::train::ClusterSpec& cluster_spec, const std::string& checkpoint_dir) {
  std::shared_ptr<keras::SequentialModel> multi_worker_model;
  // with strategy.scope():
  {
    auto scope = strategy.scope();
    //   # Model building needs to be within `strategy.scope()`.
    //   multi_worker_model = mnist.build_cnn_model()
    multi_worker_model = build_cnn_model();
  }

  // ## Auto-shard your data across workers

  std::optional<sd::DistributedDataset> multi_worker_dataset;  // no default constructor
  // with strategy.scope():
  {
    auto scope = strategy.scope();
    //   multi_worker_dataset = strategy.distribute_datasets_from_function(
    //       lambda input_context: mnist.dataset_fn(global_batch_size, input_context))
    multi_worker_dataset.emplace(
        strategy.distribute_datasets_from_function([&](const sd::InputContext& input_context) {
          return dataset_fn(global_batch_size, input_context);
        }));
  }

  // ## Define a custom training loop and train the model

  std::shared_ptr<keras::optimizers::RMSpropOptimizer> optimizer;
  std::shared_ptr<keras::metrics::SparseCategoricalAccuracyMetric> train_accuracy;
  // with strategy.scope():
  {
    auto scope = strategy.scope();
    //   # The creation of optimizer and train_accuracy needs to be in
    //   # `strategy.scope()` as well, since they create variables.
    //   optimizer = tf.keras.optimizers.RMSprop(learning_rate=0.001)
    //   train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(
    //       name='train_accuracy')
    optimizer = keras::optimizers::RMSprop({.learning_rate = 0.001});
    train_accuracy = keras::metrics::SparseCategoricalAccuracy({.name = "train_accuracy"});
  }

  // @tf.function
  // def train_step(iterator):
  //   """Training step function."""
  auto train_step = [&](sd::DistributedIterator& iterator) {
    //   def step_fn(inputs):
    //     """Per-Replica step function."""
    auto step_fn = [&](const tf::data::Element& inputs) {
      //     x, y = inputs
      const tf::Tensor& x = inputs[0];
      const tf::Tensor& y = inputs[1];
      //     with tf.GradientTape() as tape:
      tf::Tensor predictions, loss;
      std::vector<tf::Tensor> grads;
      {
        tf::GradientTape tape;
        //       predictions = multi_worker_model(x, training=True)
        predictions = (*multi_worker_model)(x, /*training=*/true);
        //       per_example_loss = tf.keras.losses.SparseCategoricalCrossentropy(
        //           from_logits=True,
        //           reduction=tf.keras.losses.Reduction.NONE)(y, predictions)
        tf::Tensor per_example_loss = (*keras::losses::SparseCategoricalCrossentropy(
            {.from_logits = true, .reduction = keras::losses::Reduction::NONE}))(y, predictions);
        //       loss = tf.nn.compute_average_loss(per_example_loss)
        loss = tf::nn::compute_average_loss(per_example_loss);
        //       model_losses = multi_worker_model.losses
        //       if model_losses:
        //         loss += tf.nn.scale_regularization_loss(tf.add_n(model_losses))
        std::vector<tf::Tensor> model_losses = multi_worker_model->losses();
        if (!model_losses.empty())
          loss += tf::nn::scale_regularization_loss(tf::add_n(model_losses));
        //     grads = tape.gradient(loss, multi_worker_model.trainable_variables)
        grads = tape.gradient(loss, multi_worker_model->trainable_variables());
      }
      //     optimizer.apply_gradients(
      //         zip(grads, multi_worker_model.trainable_variables))
      optimizer->apply_gradients(tf::zip(grads, multi_worker_model->trainable_variables()));
      //     train_accuracy.update_state(y, predictions)
      train_accuracy->update_state(y, predictions);
      //     return loss
      return loss;
    };

    //   per_replica_losses = strategy.run(step_fn, args=(next(iterator),))
    //   return strategy.reduce(
    //       tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)
    sd::PerReplica<tf::Tensor> per_replica_losses = strategy.run(step_fn, iterator.get_next());
    return strategy.reduce(sd::ReduceOp::SUM, per_replica_losses, /*axis=*/std::nullopt);
  };

  // ### Checkpoint saving and restoring

  // epoch = tf.Variable(
  //     initial_value=tf.constant(0, dtype=tf.dtypes.int64), name='epoch')
  // step_in_epoch = tf.Variable(
  //     initial_value=tf.constant(0, dtype=tf.dtypes.int64),
  //     name='step_in_epoch')
  tf::Variable epoch(tf::constant(int64_t{0}), {.name = "epoch"});
  tf::Variable step_in_epoch(tf::constant(int64_t{0}), {.name = "step_in_epoch"});
  // task_type, task_id = (strategy.cluster_resolver.task_type,
  //                       strategy.cluster_resolver.task_id)
  const std::optional<std::string> task_type = strategy.cluster_resolver()->task_type();
  const std::optional<int> task_id = strategy.cluster_resolver()->task_id();

  // checkpoint = tf.train.Checkpoint(
  //     model=multi_worker_model, epoch=epoch, step_in_epoch=step_in_epoch)
  tf::train::Checkpoint checkpoint(
      {{"model", multi_worker_model}, {"epoch", epoch}, {"step_in_epoch", step_in_epoch}});

  // write_checkpoint_dir = write_filepath(checkpoint_dir, task_type, task_id,
  //                                       cluster_spec)
  // checkpoint_manager = tf.train.CheckpointManager(
  //     checkpoint, directory=write_checkpoint_dir, max_to_keep=1)
  const std::string write_checkpoint_dir =
      write_filepath(checkpoint_dir, task_type, task_id, cluster_spec);
  tf::train::CheckpointManager checkpoint_manager(checkpoint, write_checkpoint_dir,
                                                  {.max_to_keep = 1});

  // latest_checkpoint = tf.train.latest_checkpoint(checkpoint_dir)
  // if latest_checkpoint:
  //   checkpoint.restore(latest_checkpoint)
  const std::optional<std::string> latest_checkpoint = tf::train::latest_checkpoint(checkpoint_dir);
  if (latest_checkpoint) checkpoint.restore(latest_checkpoint);

  // num_epochs = 3
  // num_steps_per_epoch = 70
  const int64_t num_epochs = flags.epochs;
  const int64_t num_steps_per_epoch = flags.steps > 0 ? flags.steps : 70;

  Trained trained;
  // while epoch.numpy() < num_epochs:
  while (epoch.value().item<int64_t>() < num_epochs) {
    //   iterator = iter(multi_worker_dataset)
    //   total_loss = 0.0
    //   num_batches = 0
    sd::DistributedIterator iterator = multi_worker_dataset->iter();
    tf::Tensor total_loss = tf::constant(0.0f);
    int num_batches = 0;

    //   while step_in_epoch.numpy() < num_steps_per_epoch:
    //     total_loss += train_step(iterator)
    //     num_batches += 1
    //     step_in_epoch.assign_add(1)
    while (step_in_epoch.value().item<int64_t>() < num_steps_per_epoch) {
      total_loss += train_step(iterator);
      num_batches += 1;
      step_in_epoch.assign_add(tf::constant(int64_t{1}));
    }

    //   train_loss = total_loss / num_batches
    //   print('Epoch: %d, accuracy: %f, train_loss: %f.'
    //                 %(epoch.numpy(), train_accuracy.result(), train_loss))
    tf::Tensor train_loss = total_loss / num_batches;
    std::printf("Epoch: %d, accuracy: %f, train_loss: %f.\n",
                static_cast<int>(epoch.value().item<int64_t>()),
                train_accuracy->result().item<float>(), train_loss.item<float>());
    std::fflush(stdout);
    trained.losses.push_back(train_loss.item<float>());

    //   train_accuracy.reset_states()
    train_accuracy->reset_states();

    //   # Once the `CheckpointManager` is set up, you're now ready to save, and remove
    //   # the checkpoints non-chief workers saved.
    //   checkpoint_manager.save()
    //   if not _is_chief(task_type, task_id, cluster_spec):
    //     tf.io.gfile.rmtree(write_checkpoint_dir)
    checkpoint_manager.save();
    if (!_is_chief(task_type, task_id, cluster_spec)) fs::remove_all(write_checkpoint_dir);

    //   epoch.assign_add(1)
    //   step_in_epoch.assign(0)
    epoch.assign_add(tf::constant(int64_t{1}));
    step_in_epoch.assign(tf::constant(int64_t{0}));
  }
  for (const tf::Tensor& w : multi_worker_model->get_weights())
    for (float v : w.to_vector<float>()) trained.weights_sum += std::abs(v);
  trained.epoch = epoch.value().item<int64_t>();
  return trained;
}

// %%writefile main.py
int main_py() {
  // per_worker_batch_size = 64
  // tf_config = json.loads(os.environ['TF_CONFIG'])
  // num_workers = len(tf_config['cluster']['worker'])
  // global_batch_size = per_worker_batch_size * num_workers
  const int64_t per_worker_batch_size = 64;
  const json tf_config = json::parse(std::getenv("TF_CONFIG"));
  const int64_t num_workers = static_cast<int64_t>(tf_config["cluster"]["worker"].size());
  const int64_t global_batch_size = per_worker_batch_size * num_workers;

  // checkpoint_dir = os.path.join(util.get_temp_dir(), 'ckpt')
  const std::string temp_dir = tutorial::make_temp_dir("pymp");
  const std::string checkpoint_dir = (fs::path(temp_dir) / "ckpt").string();

  // # Define Strategy
  // strategy = tf.distribute.MultiWorkerMirroredStrategy()
  sd::MultiWorkerMirroredStrategy strategy;

  // task_type, task_id, cluster_spec = (strategy.cluster_resolver.task_type,
  //                                     strategy.cluster_resolver.task_id,
  //                                     strategy.cluster_resolver.cluster_spec())
  // ... (the rest of main.py repeats the notebook's statements: train() above)
  const Trained trained = train(strategy, global_batch_size,
                                strategy.cluster_resolver()->cluster_spec(), checkpoint_dir);
  std::cout << "weights sum: " << trained.weights_sum << "\n";
  example::expect(trained.epoch == flags.epochs, "the worker trained every epoch");
  example::expect(std::isfinite(trained.losses.back()), "the worker's loss is finite");
  fs::remove_all(temp_dir);
  return example::exit_code();
}

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
  const std::string workdir = tutorial::make_temp_dir("multi_worker_with_ctl");

  // ## Setup

  // os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
  // os.environ.pop('TF_CONFIG', None)
  ::unsetenv("TF_CONFIG");

  // ## Multi-worker configuration

  // ### Describe your cluster

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
  // %%bash
  // echo ${GREETINGS}
  ::setenv("GREETINGS", "Hello TensorFlow!", 1);
  std::cout.flush();
  example::expect(std::system("echo ${GREETINGS}") == 0, "a subprocess sees the variable");

  // ## MultiWorkerMirroredStrategy

  // strategy = tf.distribute.MultiWorkerMirroredStrategy()
  sd::MultiWorkerMirroredStrategy strategy;

  // ## Auto-shard your data across workers

  // per_worker_batch_size = 64
  // num_workers = len(tf_config['cluster']['worker'])
  // global_batch_size = per_worker_batch_size * num_workers
  const int64_t per_worker_batch_size = 64;
  const int64_t num_workers = static_cast<int64_t>(tf_config["cluster"]["worker"].size());
  const int64_t global_batch_size = per_worker_batch_size * num_workers;

  // ### Checkpoint saving and restoring

  // from multiprocessing import util
  // checkpoint_dir = os.path.join(util.get_temp_dir(), 'ckpt')
  const std::string checkpoint_dir = (fs::path(workdir) / "ckpt").string();

  // # Normally, you don't need to manually instantiate a `ClusterSpec`, but in this
  // # illustrative example you did not set `'TF_CONFIG'` before initializing the
  // # strategy. Check out the next section for "real-world" usage.
  // cluster_spec = tf.train.ClusterSpec(tf_config['cluster'])
  const tf::train::ClusterSpec cluster_spec =
      tf::train::ClusterSpec::from_json(tf_config["cluster"].dump());

  // (Model, dataset, optimizer, train_step, checkpoint and the epoch loop: train().)
  const Trained trained = train(strategy, global_batch_size, cluster_spec, checkpoint_dir);
  example::expect(trained.losses.back() < trained.losses.front() || flags.epochs == 1,
                  "the training loss decreases from the first epoch to the last");
  example::expect(trained.epoch == flags.epochs, "the epoch variable counts the epochs");
  example::expect(tf::train::latest_checkpoint(checkpoint_dir).has_value(),
                  "the chief (the notebook's only task) keeps its checkpoint");

  // ## Complete code at a glance

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
  // time.sleep(20)
  // (Shortened: worker 0 waits for worker 1 however long it takes.)
  std::this_thread::sleep_for(std::chrono::seconds(1));

  // %%bash
  // cat job_0.log
  std::cout << tutorial::read_text(job_0_log);

  // tf_config['task']['index'] = 1
  // os.environ['TF_CONFIG'] = json.dumps(tf_config)
  tf_config["task"]["index"] = 1;

  // %%bash
  // python main.py > /dev/null 2>&1
  const std::string job_1_log = workdir + "/job_1.log";  // read by the check below
  const pid_t job_1 = processes.spawn(worker_args, tf_config.dump(), job_1_log);
  const int status_1 = processes.wait(job_1, std::chrono::seconds(300));
  const int status_0 = processes.wait(job_0, std::chrono::seconds(60));

  // %%bash
  // cat job_0.log
  std::cout << tutorial::read_text(job_0_log);
  example::expect(status_0 == 0 && status_1 == 0, "both workers trained and passed their checks");
  const auto sum_0 = printed_weights_sum(tutorial::read_text(job_0_log));
  const auto sum_1 = printed_weights_sum(tutorial::read_text(job_1_log));
  example::expect(sum_0 && sum_1 && std::abs(*sum_0 - *sum_1) <= 1e-5 * std::abs(*sum_0),
                  "the two workers end with the same weights");

  // # Delete the `'TF_CONFIG'`, and kill any background tasks so they don't affect the next
  // # section.
  // os.environ.pop('TF_CONFIG', None)
  // %killbgscripts
  // (The workers have finished; Processes kills any left when it goes.)

  fs::remove_all(workdir);
  return example::exit_code();
}
