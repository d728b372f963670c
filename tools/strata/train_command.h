#pragma once
// `strata train`: trains a Fashion-MNIST classifier with keras fit under a
// tf.distribute strategy, and reports test accuracy and throughput.
//
//   strata train                                    # MLP, MirroredStrategy over every core
//   strata train --model cnn --epochs 3 --plot curves.svg
//   strata train --strategy tpu --tpu-topology 2x2x1x2 --computation-shape 1,1,1,2 --num-replicas 4
//   strata train --checkpoint-dir /tmp/ckpt         # Ctrl-C, then the same command resumes
//   strata train --json                             # one JSON line of final metrics on stdout
//
// Data: the gzipped IDX files of Debian's dataset-fashion-mnist
// (keras::datasets::fashion_mnist::load_data; --data-dir overrides the folder)
// or TFRecord files of tf.Examples {image: 784 raw bytes, label: int64} as
// `strata tfrecord convert-idx` writes them (--tfrecord, --tfrecord-test).
// Images become float32 in [0, 1]; labels int64.
//
// Errors: bad option values are InvalidArgumentError (the program exits 2),
// everything else a strata::Error of its code (exit 1). Ctrl-C stops after the
// current step: the interrupted epoch is not written to the checkpoint or the
// logs (they keep the last complete epoch), and the program exits 130.

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace strata::tools {

struct TrainOptions {
  std::string model = "mlp";          // mlp | cnn (tools/strata/models.h)
  std::string strategy = "mirrored";  // default | one_device | mirrored | multi_worker | tpu
  int devices = 0;                    // logical CPU devices; 0 = the strategy's default (below)
  std::string tpu_topology = "";      // XxYxZxC for --strategy tpu; "" = from the devices
  std::vector<int> computation_shape = {};  // tpu: cores of one replica (x, y, z, core)
  int num_replicas = 0;                     // tpu: replicas; 0 = as many as fit
  int epochs = 23;                          // the default run takes about a minute on 2 cores
  int batch_size = 128;                     // global: split across the replicas
  double learning_rate = 0;         // 0 = the optimizer's default here (adam 0.001, sgd 0.01)
  std::string optimizer = "adam";   // adam | sgd (sgd uses momentum 0.9)
  uint64_t seed = 1;                // weights and shuffling
  std::string data_dir = "";        // "" = $STRATA_DATA_DIR, else Debian's folder
  std::string tfrecord = "";        // glob of training TFRecord files
  std::string tfrecord_test = "";   // glob of test TFRecord files; "" = the IDX test set
  std::string checkpoint_dir = "";  // train::CheckpointManager folder; "" = none
  std::string log_dir = "";         // TensorBoard events + metrics.csv; "" = none
  std::string plot = "";            // .png or .svg; "" = none
  bool json = false;                // one JSON line on stdout instead of the human output
  int64_t limit_examples = 0;       // use only the first N train and test examples; 0 = all
  int64_t steps_per_epoch = 0;      // 0 = whole epochs
  // multi_worker: seconds each collective may wait, and the start-up deadline
  // (CommunicationOptions.timeout_seconds); 0 = the strategy's defaults (600 s
  // per collective, 60 s start-up). Also from $STRATA_COLLECTIVE_TIMEOUT.
  double collective_timeout = 0;
  // Record where each step's time goes per replica and worker (input,
  // forward, gradient, apply, collective wait and transfer), print the table
  // and the stragglers at the end, write it as JSON to profile_json and, with
  // --log-dir, as TensorBoard scalars of the run "profile".
  bool profile = false;
  std::string profile_json = "";  // "" = <log-dir>/step_profile.json, or ./step_profile.json
  // mirrored, multi_worker: CommunicationOptions.deterministic_reduction
  // (bit-identical weights for any replica count, docs/determinism.md).
  bool deterministic = false;
  // mirrored, multi_worker: CommunicationOptions.check_divergence_every_n_steps; 0 = never.
  int64_t check_divergence_every = 0;
  // multi_worker: CommunicationOptions.shared_memory, "auto" or "off".
  std::string shared_memory = "auto";
  // multi_worker: CommunicationOptions.overlap_gradient_reduction, "on" (the
  // library's default) or "off".
  std::string overlap_gradient_reduction = "on";
  // Write the final weights here (Model::save_weights; the chief only); "" = none.
  std::string save_weights = "";
};

// Registers the `train` subcommand and its flags on `app`, filling `options`.
CLI::App* add_train_command(CLI::App& app, TrainOptions& options);

// Checks the combinations of options that flag parsing cannot (e.g. --devices
// with --strategy default, a bad --tpu-topology): InvalidArgumentError naming
// the flag and value. --plot's extension, driver and folder are checked too
// (their own error codes), so a long run does not fail at its end.
void validate_train_options(const TrainOptions& options);

// Runs the training (validating the options first); returns the exit status (0, or 130 after
// Ctrl-C). Throws InvalidArgumentError for invalid options and other strata::Errors for failures.
int run_train(const TrainOptions& options);

}  // namespace strata::tools
