#include "tools/strata/train_command.h"

#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/numbers.h"
#include "strata/base/str_cat.h"
#include "strata/cluster/tpu_cluster_resolver.h"
#include "strata/core/config.h"
#include "strata/core/variable.h"
#include "strata/data/dataset.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/distribute/multi_worker_mirrored_strategy.h"
#include "strata/distribute/step_profile.h"
#include "strata/distribute/strategy.h"
#include "strata/distribute/tpu_strategy.h"
#include "strata/distribute/tpu_system.h"
#include "strata/io/example.h"
#include "strata/keras/callbacks/csv_logger.h"
#include "strata/keras/callbacks/lambda_callback.h"
#include "strata/keras/callbacks/tensorboard.h"
#include "strata/keras/datasets/fashion_mnist.h"
#include "strata/keras/losses.h"
#include "strata/keras/model.h"
#include "strata/keras/optimizers/adam.h"
#include "strata/keras/optimizers/sgd.h"
#include "strata/ops/math_ops.h"
#include "strata/tpu/device_assignment.h"
#include "strata/tpu/local_topology.h"
#include "strata/train/checkpoint.h"
#include "strata/train/checkpoint_manager.h"
#include "tools/strata/flag_checks.h"
#include "tools/strata/gemm_floor.h"
#include "tools/strata/models.h"
#include "tools/strata/plot.h"
#include "tools/strata/tfrecord_command.h"

namespace strata::tools {

namespace {

namespace sd = strata::distribute;
namespace tpu = strata::tpu::experimental;
using Clock = std::chrono::steady_clock;

// --- Ctrl-C ----------------------------------------------------------------

// Set by the SIGINT handler, read by a callback after every step. A lock-free
// atomic is async-signal-safe.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);
// Set (on the fit thread) when a step's end saw g_interrupted and stopped
// training there, leaving the epoch partial. A Ctrl-C during validation stops
// at the next step instead, so the epoch it came in still counts as whole.
std::atomic<bool> g_stopped_mid_epoch{false};

extern "C" void on_sigint(int) {
  g_interrupted.store(true);
  constexpr char kMsg[] =
      "\nstrata train: Ctrl-C: stopping after the current step (press again to abort)\n";
  // write(2) is async-signal-safe; the result does not matter here.
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
}

// Installs the handler for the lifetime of the object. SA_RESETHAND makes a
// second Ctrl-C kill the process the default way.
class SigintGuard {
 public:
  SigintGuard() {
    g_interrupted.store(false);
    g_stopped_mid_epoch.store(false);
    struct sigaction sa = {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    ::sigaction(SIGINT, &sa, &previous_);
  }
  ~SigintGuard() { ::sigaction(SIGINT, &previous_, nullptr); }
  SigintGuard(const SigintGuard&) = delete;
  SigintGuard& operator=(const SigintGuard&) = delete;

 private:
  struct sigaction previous_ = {};
};

// --- callbacks ---------------------------------------------------------------

// Forwards every hook to `inner` except, once Ctrl-C stopped training inside an
// epoch, on_epoch_end and on_train_end: that epoch is partial, and a backup or a log row
// for it would claim a whole epoch. The checkpoint and logs therefore keep the
// last complete epoch, and a resumed run redoes the interrupted one.
class UnlessInterrupted : public keras::callbacks::Callback {
 public:
  explicit UnlessInterrupted(keras::callbacks::CallbackPtr inner) : inner_(std::move(inner)) {}
  void on_train_begin(keras::Logs& logs) override { bind(), inner_->on_train_begin(logs); }
  void on_train_end(keras::Logs& logs) override {
    if (!g_stopped_mid_epoch.load()) bind(), inner_->on_train_end(logs);
  }
  void on_epoch_begin(int epoch, keras::Logs& logs) override {
    bind(), inner_->on_epoch_begin(epoch, logs);
  }
  void on_epoch_end(int epoch, keras::Logs& logs) override {
    if (!g_stopped_mid_epoch.load()) bind(), inner_->on_epoch_end(epoch, logs);
  }
  void on_train_batch_begin(int64_t batch, keras::Logs& logs) override {
    bind(), inner_->on_train_batch_begin(batch, logs);
  }
  void on_train_batch_end(int64_t batch, keras::Logs& logs) override {
    if (!g_stopped_mid_epoch.load()) bind(), inner_->on_train_batch_end(batch, logs);
  }
  void on_test_begin(keras::Logs& logs) override { bind(), inner_->on_test_begin(logs); }
  void on_test_end(keras::Logs& logs) override { bind(), inner_->on_test_end(logs); }

 private:
  // The list binds the model and params to this wrapper only.
  void bind() {
    inner_->set_model(model());
    inner_->set_params(params());
  }
  keras::callbacks::CallbackPtr inner_;
};

// --checkpoint-dir: a tf.train.Checkpoint of the model (its optimizer and
// slots included), the optimizer, the epochs completed ("epoch") and the
// training steps completed ("step"), kept by a tf.train.CheckpointManager in
// the directory as "ckpt-<n>" (docs/formats/checkpoint.md), the last 3 kept.
// When fit starts, the latest checkpoint is restored (restore_or_initialize)
// and fit continues with the next epoch: fit(x, y) draws each epoch's order
// from the compile seed and the epoch index (Model::resume_at_epoch), so the
// resumed run trains on exactly the batches the uninterrupted one would. A
// checkpoint is saved at each epoch's end; a run killed at any moment leaves
// the previous checkpoint restorable (the file and the `checkpoint` state
// file are replaced atomically, the state file last).
// Under multi_worker every worker restores from the directory and saves (as
// TF's rule for distributed checkpoints), but only the chief's files stay:
// the others write into <dir>/workertemp_<task id>/ and remove it at once.
class EpochCheckpoint : public keras::callbacks::Callback {
 public:
  static constexpr int kMaxToKeep = 3;

  EpochCheckpoint(const std::string& dir, const keras::ModelPtr& model,
                  const sd::Strategy& strategy)
      : dir_(dir),
        chief_(strategy.extended().should_checkpoint()),
        epoch_(strata::constant(int64_t{0}), {.name = "epoch", .trainable = false}),
        step_(strata::constant(int64_t{0}), {.name = "step", .trainable = false}),
        checkpoint_({{"model", model},
                     {"optimizer", model->optimizer()},
                     {"epoch", epoch_},
                     {"step", step_}}),
        manager_(checkpoint_, dir, {.max_to_keep = kMaxToKeep}) {
    if (!chief_) {
      const auto* resolver = strategy.cluster_resolver();
      temp_dir_ = (std::filesystem::path(dir) /
                   ("workertemp_" + std::to_string(resolver ? resolver->task_id().value_or(0) : 0)))
                      .string();
    }
  }

  void on_train_begin(keras::Logs&) override {
    resumed_epoch_.reset();
    if (!manager_.restore_or_initialize()) return;
    const int64_t epoch = epoch_.value().item<int64_t>();
    STRATA_CHECK(DATA_LOSS, epoch >= 0 && epoch <= INT32_MAX, "strata train: checkpoint '",
                 *manager_.latest_checkpoint(), "' has epoch ", epoch,
                 ", expected a whole number in [0, ", INT32_MAX, "]");
    resumed_epoch_ = static_cast<int>(epoch);
    model()->resume_at_epoch(*resumed_epoch_);
  }
  void on_train_batch_end(int64_t, keras::Logs&) override {
    step_.assign_add(strata::constant(int64_t{1}));
  }
  void on_epoch_end(int epoch, keras::Logs&) override {
    epoch_.assign(strata::constant(int64_t{epoch + 1}));
    if (chief_) {
      manager_.save();
      return;
    }
    checkpoint_.save((std::filesystem::path(temp_dir_) / "ckpt").string());
    std::error_code ec;
    std::filesystem::remove_all(temp_dir_, ec);
    STRATA_CHECK(INTERNAL, !ec, "strata train: cannot remove the temporary checkpoint folder '",
                 temp_dir_, "': ", ec.message());
  }

  // The epoch fit resumed at (nullopt when it started afresh).
  std::optional<int> resumed_epoch() const noexcept { return resumed_epoch_; }
  // The newest checkpoint in the directory, if any.
  const std::optional<std::string>& latest_checkpoint() const noexcept {
    return manager_.latest_checkpoint();
  }

 private:
  std::string dir_;
  bool chief_;
  std::string temp_dir_;
  Variable epoch_;
  Variable step_;
  train::Checkpoint checkpoint_;
  train::CheckpointManager manager_;
  std::optional<int> resumed_epoch_;
};

// Keeps the logs and the backup in step across a crash. At an epoch's end the
// logs are written first, then the backup: a crash between the two leaves a
// log row for an epoch the backup does not hold, never a backed-up epoch
// without its row. At the start the backup restores first, then the CSV log
// drops its rows for the epochs the resumed run redoes (epoch >= the resumed
// epoch), before the logs open their files: every epoch is in metrics.csv
// exactly once. TensorBoard writes a new event file per run; an epoch redone
// after such a crash appears in two files, and TensorBoard shows the later
// point for a step.
class LogsBeforeBackup : public keras::callbacks::Callback {
 public:
  LogsBeforeBackup(std::shared_ptr<EpochCheckpoint> backup,
                   keras::callbacks::CallbackPtr backup_hooks,
                   std::vector<keras::callbacks::CallbackPtr> logs, std::string csv_path)
      : backup_(std::move(backup)),
        backup_hooks_(std::move(backup_hooks)),
        logs_(std::move(logs)),
        csv_path_(std::move(csv_path)) {}
  void on_train_begin(keras::Logs& logs) override {
    for_backup_then_logs([&](keras::callbacks::Callback& c) { c.on_train_begin(logs); },
                         [&] { drop_redone_rows(); });
  }
  void on_train_end(keras::Logs& logs) override {
    for_logs_then_backup([&](keras::callbacks::Callback& c) { c.on_train_end(logs); });
  }
  void on_epoch_begin(int epoch, keras::Logs& logs) override {
    for_backup_then_logs([&](keras::callbacks::Callback& c) { c.on_epoch_begin(epoch, logs); });
  }
  void on_epoch_end(int epoch, keras::Logs& logs) override {
    for_logs_then_backup([&](keras::callbacks::Callback& c) { c.on_epoch_end(epoch, logs); });
  }
  void on_train_batch_begin(int64_t batch, keras::Logs& logs) override {
    for_backup_then_logs(
        [&](keras::callbacks::Callback& c) { c.on_train_batch_begin(batch, logs); });
  }
  void on_train_batch_end(int64_t batch, keras::Logs& logs) override {
    for_logs_then_backup([&](keras::callbacks::Callback& c) { c.on_train_batch_end(batch, logs); });
  }
  void on_test_begin(keras::Logs& logs) override {
    for_backup_then_logs([&](keras::callbacks::Callback& c) { c.on_test_begin(logs); });
  }
  void on_test_end(keras::Logs& logs) override {
    for_logs_then_backup([&](keras::callbacks::Callback& c) { c.on_test_end(logs); });
  }

 private:
  template <typename Hook, typename Between = void (*)()>
  void for_backup_then_logs(
      Hook hook, Between between = [] {}) {
    if (backup_hooks_) bind(*backup_hooks_), hook(*backup_hooks_);
    between();
    for (const auto& c : logs_) bind(*c), hook(*c);
  }
  template <typename Hook>
  void for_logs_then_backup(Hook hook) {
    for (const auto& c : logs_) bind(*c), hook(*c);
    if (backup_hooks_) bind(*backup_hooks_), hook(*backup_hooks_);
  }
  void bind(keras::callbacks::Callback& c) {
    c.set_model(model());
    c.set_params(params());
  }
  // Rewrites metrics.csv (atomically) without the rows of epochs >= the
  // resumed one; a header and the earlier rows stay.
  void drop_redone_rows() {
    if (!backup_ || csv_path_.empty() || !file_exists(csv_path_)) return;
    const std::optional<int> resumed = backup_->resumed_epoch();
    const int keep_below = resumed.value_or(0);
    const std::string contents = read_file(csv_path_);
    std::string kept;
    size_t dropped = 0;
    for (size_t at = 0; at < contents.size();) {
      size_t end = contents.find('\n', at);
      end = end == std::string::npos ? contents.size() : end + 1;
      const std::string_view line(contents.data() + at, end - at);
      at = end;
      const std::string_view first = line.substr(0, line.find(','));
      const std::optional<int64_t> epoch = parse_whole_number(std::string(first));
      if (epoch && *epoch >= keep_below) {
        ++dropped;
        continue;
      }
      kept += line;
    }
    if (dropped > 0) write_file_atomically(csv_path_, kept);
  }

  std::shared_ptr<EpochCheckpoint> backup_;
  keras::callbacks::CallbackPtr backup_hooks_;  // backup_, as the list sees it
  std::vector<keras::callbacks::CallbackPtr> logs_;
  std::string csv_path_;
};

// Training time and examples, without validation and callbacks' epoch-end
// work: from an epoch's start to its last step.
class ThroughputMeter : public keras::callbacks::Callback {
 public:
  ThroughputMeter(int64_t batch_size, int64_t examples_per_epoch)
      : batch_size_(batch_size), examples_per_epoch_(examples_per_epoch) {}
  void on_epoch_begin(int, keras::Logs&) override {
    begin_ = last_ = Clock::now();
    steps_ = 0;
  }
  void on_train_batch_end(int64_t batch, keras::Logs&) override {
    last_ = Clock::now();
    steps_ = batch + 1;
  }
  void on_epoch_end(int, keras::Logs&) override {
    seconds_ += std::chrono::duration<double>(last_ - begin_).count();
    // The last batch of an epoch may be partial.
    examples_ += std::min(steps_ * batch_size_, examples_per_epoch_);
    ++epochs_;
  }
  double seconds() const noexcept { return seconds_; }
  int64_t examples() const noexcept { return examples_; }
  int epochs() const noexcept { return epochs_; }

 private:
  int64_t batch_size_;
  int64_t examples_per_epoch_;
  Clock::time_point begin_{}, last_{};
  int64_t steps_ = 0;
  double seconds_ = 0;
  int64_t examples_ = 0;
  int epochs_ = 0;
};

// --- data ----------------------------------------------------------------------

struct Split {
  Tensor x = {};  // float32 [n, 28, 28] in [0, 1]
  Tensor y = {};  // int64 [n]
};

struct Data {
  Split train = {};
  Split test = {};
  std::string source = "";  // for the header
};

Split preprocess(const Tensor& images, const Tensor& labels, int64_t limit) {
  Tensor x = images, y = labels;
  if (limit > 0 && limit < x.shape()[0]) x = x.slice_rows(0, limit), y = y.slice_rows(0, limit);
  return {strata::multiply(strata::cast(x, DType::float32), strata::constant(1.f / 255.f)),
          strata::cast(y, DType::int64)};
}

std::vector<std::string> matching_files(const std::string& pattern, const char* flag) {
  std::vector<std::string> files;
  try {
    for (const data::Element& e : data::Dataset::list_files(pattern, {.shuffle = false})) {
      files.push_back(e[0].item<std::string>());
    }
  } catch (const InvalidArgumentError&) {
    throw NotFoundError(
        str_cat(flag, ": no files match '", pattern,
                "' (write them with `strata tfrecord convert-idx IMAGES LABELS OUT`)"));
  }
  return files;
}

// tf.Examples {image: 784 bytes, label: int64} from every file matching
// `pattern`, through TFRecordDataset (which checks every CRC) and
// parse_single_example.
Split load_tfrecords(const std::string& pattern, const char* flag, int64_t limit) {
  const io::FeatureSpecs specs = {{"image", io::FixedLenFeature({}, io::FeatureDType::string)},
                                  {"label", io::FixedLenFeature({}, io::FeatureDType::int64)}};
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  for (const std::string& file : matching_files(pattern, flag)) {
    const data::Dataset records =
        data::TFRecordDataset({file}, {.compression_type = detect_compression(file)});
    int64_t index = 0;
    for (const data::Element& e : records) {
      if (limit > 0 && static_cast<int64_t>(labels.size()) == limit) break;
      io::ParsedFeatures f;
      try {
        f = io::parse_single_example_features(e[0].item<std::string>(), specs);
      } catch (const InvalidArgumentError& err) {
        throw DataLossError(
            str_cat(flag, ": ", file, " record ", index, " is not an image example: ", err.what()));
      }
      const std::string& image = f.at("image").values.string_values.at(0);
      const int64_t label = f.at("label").values.int64_values.at(0);
      STRATA_CHECK(DATA_LOSS, image.size() == 28 * 28, flag, ": ", file, " record ", index,
                   ": expected a 784-byte 28x28 image, got ", image.size(), " bytes");
      STRATA_CHECK(DATA_LOSS, label >= 0 && label < 10, flag, ": ", file, " record ", index,
                   ": expected a label in [0, 10), got ", label);
      pixels.insert(pixels.end(), image.begin(), image.end());
      labels.push_back(label);
      ++index;
    }
  }
  const auto n = static_cast<int64_t>(labels.size());
  STRATA_CHECK(NOT_FOUND, n > 0, flag, ": the files matching '", pattern, "' hold no records");
  return preprocess(strata::constant(pixels, TensorShape({n, 28, 28})),
                    strata::constant(labels, TensorShape({n})), 0);
}

Data load(const TrainOptions& o) {
  if (!o.data_dir.empty()) ::setenv("STRATA_DATA_DIR", o.data_dir.c_str(), 1);
  Data d;
  // The IDX files are needed unless both splits come from TFRecord files.
  if (o.tfrecord.empty() || o.tfrecord_test.empty()) {
    namespace fm = keras::datasets::fashion_mnist;
    auto [train, test] = fm::load_data();
    d.train = preprocess(train.first, train.second, o.limit_examples);
    d.test = preprocess(test.first, test.second, o.limit_examples);
    d.source = "Fashion-MNIST (IDX) from " + fm::data_dir();
  }
  if (!o.tfrecord.empty()) {
    d.train = load_tfrecords(o.tfrecord, "--tfrecord", o.limit_examples);
    d.source = "TFRecord files " + o.tfrecord +
               (o.tfrecord_test.empty() ? ", test set from " + d.source : "");
  }
  if (!o.tfrecord_test.empty()) {
    d.test = load_tfrecords(o.tfrecord_test, "--tfrecord-test", o.limit_examples);
    d.source += ", test set from TFRecord files " + o.tfrecord_test;
  }
  return d;
}

// --- devices and strategies ------------------------------------------------------

// Splits the CPU into the logical devices the strategy needs. Without
// --devices: one per hardware thread for mirrored and tpu (as many as the
// mesh has cores when --tpu-topology is given); the default and one_device
// strategies keep a single device that gets every thread, and so does each
// multi_worker process (the workers of `strata launch` share the machine's
// cores; --devices-per-worker splits them further). STRATA_CPU_DEVICES
// (set by `strata launch --devices-per-worker`) wins over those defaults.
void configure_devices(const TrainOptions& o) {
  int n = o.devices;
  if (n == 0 && std::getenv("STRATA_CPU_DEVICES") == nullptr) {
    if (o.strategy == "tpu" && !o.tpu_topology.empty()) {
      n = 1;
      for (int d : tpu::parse_mesh_shape(o.tpu_topology)) n *= d;
    } else if (o.strategy == "mirrored" || o.strategy == "tpu") {
      n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    }
  }
  if (n > 0) {
    config::set_logical_device_configuration(config::list_physical_devices("CPU").at(0),
                                             std::vector<config::LogicalDeviceConfiguration>(n));
  }
}

std::unique_ptr<sd::Strategy> make_strategy(const TrainOptions& o) {
  if (o.strategy == "default") return nullptr;
  if (o.strategy == "one_device") {
    return std::make_unique<sd::OneDeviceStrategy>(config::list_logical_devices("CPU").at(0).name);
  }
  sd::CommunicationOptions comm;
  comm.deterministic_reduction = o.deterministic;
  comm.check_divergence_every_n_steps = o.check_divergence_every;
  if (o.strategy == "mirrored") {
    std::vector<std::string> devices;
    for (const config::LogicalDevice& d : config::list_logical_devices("CPU"))
      devices.push_back(d.name);
    return std::make_unique<sd::MirroredStrategy>(devices, comm);
  }
  // TF_CONFIG says which worker this is (`strata launch` sets it); without it, one worker.
  if (o.strategy == "multi_worker") {
    if (o.collective_timeout > 0) comm.timeout_seconds = o.collective_timeout;
    comm.shared_memory = o.shared_memory == "off" ? sd::SharedMemory::OFF : sd::SharedMemory::AUTO;
    comm.overlap_gradient_reduction = o.overlap_gradient_reduction == "on";
    return std::make_unique<sd::MultiWorkerMirroredStrategy>(
        sd::MultiWorkerMirroredStrategyOptions{.communication_options = comm});
  }
  if (o.strategy == "tpu") {
    // TF's sequence: resolve the system, connect, initialise, then build the
    // device assignment when the replica shape is given.
    // "" resolves from the environment: the local system, or a pod of hosts
    // when TF_CONFIG names a worker job, which Strata's TPU system cannot
    // address yet (tpu_system.h: local system only).
    const sd::cluster_resolver::TPUClusterResolver resolver("");
    STRATA_CHECK(
        UNIMPLEMENTED, resolver.cluster_spec().empty(),
        "--strategy tpu: TPUClusterResolver(\"\") found a multi-host pod in TF_CONFIG (master ",
        resolver.master(), "); only the local TPU system is supported, unset TF_CONFIG");
    config::experimental_connect_to_cluster();
    const tpu::Topology topology = tpu::initialize_tpu_system();
    if (o.computation_shape.empty() && o.num_replicas == 0)
      return std::make_unique<sd::TPUStrategy>();
    tpu::DeviceAssignmentOptions da{.computation_shape = o.computation_shape};
    if (da.computation_shape.empty()) da.computation_shape = {1, 1, 1, 1};
    if (o.num_replicas > 0) {
      da.num_replicas = o.num_replicas;
    } else {
      int cores_per_replica = 1;
      for (int c : da.computation_shape) cores_per_replica *= c;
      da.num_replicas =
          std::max(1, topology.num_tasks() * topology.num_tpus_per_task() / cores_per_replica);
    }
    return std::make_unique<sd::TPUStrategy>(tpu::DeviceAssignment::build(topology, da));
  }
  STRATA_CHECK_ARG(false,
                   "--strategy: expected default, one_device, mirrored, multi_worker or tpu, got '",
                   o.strategy, "'");
  return nullptr;
}

// Multi-worker: every worker must train the same job. The flags that shape it
// (model, batch, epochs, examples, steps, seed, optimizer, learning rate,
// collective timeout, TFRecord glob) become one int64 vector; a variable made
// from it under the strategy's scope starts as the chief's vector on every
// worker (MultiWorkerMirroredStrategy broadcasts initial values), so each
// worker compares its own flags with the chief's, then all add up how many
// differ. A worker that differs names the flags and both values; the chief
// and the others fail too, naming how many workers differ, before any data is
// read. Data folders are not compared: they may differ from host to host.
void check_workers_agree(sd::Strategy& strategy, const TrainOptions& o, const std::string& task) {
  const auto* mw = dynamic_cast<const sd::MultiWorkerMirroredStrategy*>(&strategy);
  if (mw == nullptr || mw->num_workers() == 1) return;
  struct Field {
    const char* flag;
    int64_t value;
    std::string text;  // how the value prints ("" = the number itself)
  };
  const auto& models = model_names();
  const auto model_index = std::find(models.begin(), models.end(), o.model) - models.begin();
  int64_t lr_bits = 0;
  std::memcpy(&lr_bits, &o.learning_rate, sizeof(lr_bits));
  int64_t timeout_bits = 0;
  std::memcpy(&timeout_bits, &o.collective_timeout, sizeof(timeout_bits));
  const std::vector<Field> fields = {
      {"--model", model_index, o.model},
      {"--batch-size", o.batch_size, ""},
      {"--epochs", o.epochs, ""},
      {"--limit-examples", o.limit_examples, ""},
      {"--steps-per-epoch", o.steps_per_epoch, ""},
      {"--seed", static_cast<int64_t>(o.seed), ""},
      {"--optimizer", o.optimizer == "sgd" ? 1 : 0, o.optimizer},
      {"--learning-rate", lr_bits, str_cat(o.learning_rate)},
      {"--collective-timeout", timeout_bits, str_cat(o.collective_timeout)},
      {"--profile", o.profile ? 1 : 0, o.profile ? "on" : "off"},
      {"--deterministic", o.deterministic ? 1 : 0, o.deterministic ? "on" : "off"},
      {"--check-divergence-every", o.check_divergence_every, ""},
      {"--overlap-gradient-reduction", o.overlap_gradient_reduction == "on" ? 1 : 0,
       o.overlap_gradient_reduction},
      {"--tfrecord", static_cast<int64_t>(std::hash<std::string>{}(o.tfrecord)),
       "'" + o.tfrecord + "'"},
  };
  std::vector<int64_t> mine;
  mine.reserve(fields.size());
  for (const Field& f : fields) mine.push_back(f.value);
  Variable chiefs;
  {
    const sd::StrategyScope scope(strategy);
    chiefs = Variable(constant(mine), {.name = "strata_train_flags", .trainable = false});
  }
  const Tensor theirs = chiefs.value();
  std::string differences;
  for (size_t i = 0; i < fields.size(); ++i) {
    const int64_t chief_value = theirs.data<int64_t>()[i];
    if (chief_value == mine[i]) continue;
    const Field& f = fields[i];
    std::string chief_text = str_cat(chief_value);
    if (std::string_view(f.flag) == "--model" && chief_value >= 0 &&
        chief_value < static_cast<int64_t>(models.size()))
      chief_text = models[chief_value];
    if (std::string_view(f.flag) == "--optimizer") chief_text = chief_value == 1 ? "sgd" : "adam";
    if (std::string_view(f.flag) == "--learning-rate" ||
        std::string_view(f.flag) == "--collective-timeout") {
      double d = 0;
      std::memcpy(&d, &chief_value, sizeof(d));
      chief_text = str_cat(d);
    }
    if (std::string_view(f.flag) == "--tfrecord") chief_text = "another glob";
    if (std::string_view(f.flag) == "--profile" ||
        std::string_view(f.flag) == "--overlap-gradient-reduction") {
      chief_text = chief_value == 1 ? "on" : "off";
    }
    differences += str_cat(differences.empty() ? "" : "; ", f.flag, ": the chief has ", chief_text,
                           ", this worker ", f.text.empty() ? str_cat(f.value) : f.text);
  }
  const int64_t differing =
      strategy.sum_across_workers(constant(int64_t{differences.empty() ? 0 : 1})).item<int64_t>();
  STRATA_CHECK_ARG(
      differences.empty(), "--strategy multi_worker: task ", task,
      " runs with other flags than the chief (every worker must run the same job): ", differences);
  STRATA_CHECK(FAILED_PRECONDITION, differing == 0, "--strategy multi_worker: ", differing,
               " worker", differing == 1 ? "" : "s", " of ", mw->num_workers(),
               " run with other flags than the chief (their errors name the flags); task ", task,
               " stops too");
}

std::vector<std::string> strategy_devices(sd::Strategy& s) {
  if (s.is_default()) return {config::list_logical_devices("CPU").at(0).name};
  return s.extended().worker_devices();
}

keras::optimizers::OptimizerPtr make_optimizer(const TrainOptions& o, double lr) {
  if (o.optimizer == "sgd") return keras::optimizers::SGD({.learning_rate = lr, .momentum = 0.9});
  return keras::optimizers::Adam({.learning_rate = lr});
}

// The step profile as a table, as JSON, and where the JSON went.
struct StepProfileOutput {
  std::string table;
  nlohmann::json json;
  std::string path;  // "" on a worker other than the chief
};

nlohmann::json phase_json(const sd::PhaseSeconds& seconds) {
  nlohmann::json j = nlohmann::json::object();
  for (int p = 0; p < sd::kNumStepPhases; ++p) {
    j[std::string(sd::step_phase_name(static_cast<sd::StepPhase>(p)))] = seconds[p];
  }
  return j;
}

// Every worker gets the whole report; the chief writes it as JSON (to
// --profile-json, or step_profile.json in --log-dir or the current folder)
// and, with --log-dir, as TensorBoard scalars of the run "profile": per
// worker and phase, the seconds per step, at the last epoch.
StepProfileOutput write_step_profile(const TrainOptions& o, const sd::StepProfileReport& report,
                                     bool chief, keras::callbacks::TensorBoardCallback* tensorboard,
                                     int64_t epochs) {
  StepProfileOutput out{.table = report.table(), .json = nlohmann::json::object(), .path = ""};
  nlohmann::json& j = out.json;
  j["steps"] = report.steps;
  j["num_workers"] = report.num_workers;
  j["replicas"] = nlohmann::json::array();
  for (const sd::ReplicaStepTimes& r : report.replicas) {
    j["replicas"].push_back({{"worker", r.worker},
                             {"replica", r.replica},
                             {"seconds", phase_json(r.seconds)},
                             {"busy_seconds", r.busy()}});
  }
  std::vector<int> workers;
  for (const sd::ReplicaStepTimes& r : report.replicas) {
    if (std::find(workers.begin(), workers.end(), r.worker) == workers.end())
      workers.push_back(r.worker);
  }
  j["workers"] = nlohmann::json::array();
  keras::Logs scalars;
  for (int w : workers) {
    const sd::PhaseSeconds s = report.worker_seconds(w);
    j["workers"].push_back({{"worker", w}, {"seconds", phase_json(s)}});
    for (int p = 0; p < sd::kNumStepPhases; ++p) {
      scalars.set(str_cat("worker_", w, "/", sd::step_phase_name(static_cast<sd::StepPhase>(p)),
                          "_seconds_per_step"),
                  report.steps > 0 ? s[p] / double(report.steps) : 0.0);
    }
  }
  j["stragglers"] = nlohmann::json::array();
  for (const sd::Straggler& s : report.stragglers) {
    j["stragglers"].push_back({{"who", s.who},
                               {"phase", std::string(sd::step_phase_name(s.dominant_phase))},
                               {"busy_seconds", s.busy_seconds},
                               {"median_busy_seconds", s.median_busy_seconds},
                               {"message", s.describe()}});
  }
  if (!chief) return out;
  out.path = !o.profile_json.empty() ? o.profile_json
             : !o.log_dir.empty()
                 ? (std::filesystem::path(o.log_dir) / "step_profile.json").string()
                 : std::string("step_profile.json");
  write_file_atomically(out.path, j.dump(2) + "\n");
  if (tensorboard != nullptr) tensorboard->write_run_scalars("profile", epochs, scalars);
  return out;
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

}  // namespace

void validate_train_options(const TrainOptions& o) {
  if (!o.tpu_topology.empty()) {
    STRATA_CHECK_ARG(o.strategy == "tpu", "--tpu-topology is for --strategy tpu, got --strategy ",
                     o.strategy);
    int64_t cores = 1;
    try {
      for (int d : tpu::parse_mesh_shape(o.tpu_topology)) cores *= d;
    } catch (const InvalidArgumentError& e) {
      throw InvalidArgumentError(str_cat("--tpu-topology ", o.tpu_topology, ": ", e.what()));
    }
    // Each core of the emulated mesh is a logical CPU device with its own thread.
    STRATA_CHECK_ARG(cores <= config::max_cpu_threads(), "--tpu-topology ", o.tpu_topology,
                     ": expected at most ", config::max_cpu_threads(),
                     " cores in all (64 per hardware thread), got ", cores);
  }
  STRATA_CHECK_ARG(o.strategy == "tpu" || (o.computation_shape.empty() && o.num_replicas == 0),
                   "--computation-shape and --num-replicas are for --strategy tpu, got --strategy ",
                   o.strategy);
  STRATA_CHECK_ARG(
      (!o.deterministic && o.check_divergence_every == 0) || o.strategy == "mirrored" ||
          o.strategy == "multi_worker",
      "--deterministic and --check-divergence-every are for --strategy mirrored or multi_worker, "
      "got --strategy ",
      o.strategy);
  STRATA_CHECK_ARG(!o.deterministic || o.batch_size % 8 == 0,
                   "--deterministic splits every batch into 8 micro-batches: --batch-size must be "
                   "a multiple of 8, got ",
                   o.batch_size);
  STRATA_CHECK_ARG(o.devices <= 1 || o.strategy != "default",
                   "--strategy default runs on one device, got --devices ", o.devices,
                   " (use --strategy mirrored)");
  if (!o.plot.empty()) check_can_plot(o.plot);
  STRATA_CHECK_ARG(o.profile_json.empty() || o.profile,
                   "--profile-json needs --profile, got only --profile-json ", o.profile_json);
  STRATA_CHECK_ARG(
      o.tfrecord_test.empty() || !o.tfrecord.empty(),
      "--tfrecord-test needs --tfrecord (the training files), got only --tfrecord-test ",
      o.tfrecord_test);
}

CLI::App* add_train_command(CLI::App& app, TrainOptions& o) {
  CLI::App* train = app.add_subcommand(
      "train", "Train a Fashion-MNIST classifier (keras fit) under a tf.distribute strategy");
  train->add_option("--model", o.model, "mlp (784-512-256-10) or cnn (2 conv + 2 dense)")
      ->capture_default_str()
      ->check(CLI::IsMember(model_names()));
  train->add_option("--strategy", o.strategy, "default, one_device, mirrored, multi_worker or tpu")
      ->capture_default_str()
      ->check(CLI::IsMember({"default", "one_device", "mirrored", "multi_worker", "tpu"}));
  train
      ->add_option(
          "--devices", o.devices,
          "Logical CPU devices (default: one per core for mirrored/tpu, the mesh's cores with "
          "--tpu-topology, 1 otherwise)")
      ->check(whole_in(1, config::max_cpu_threads()));
  train->add_option("--tpu-topology", o.tpu_topology,
                    "tpu: mesh shape XxYxZxC (default: from the devices)");
  train
      ->add_option("--computation-shape", o.computation_shape,
                   "tpu: cores of one replica in x,y,z,core")
      ->delimiter(',')
      ->expected(4)
      ->check(whole_in(1, config::max_cpu_threads()));
  train->add_option("--num-replicas", o.num_replicas, "tpu: replicas (default: as many as fit)")
      ->check(whole_in(1, config::max_cpu_threads()));
  train->add_option("--epochs", o.epochs, "Epochs to train")
      ->capture_default_str()
      ->check(whole_in(1, 1000000));
  train->add_option("--batch-size", o.batch_size, "Global batch size (split across the replicas)")
      ->capture_default_str()
      ->check(whole_in(1, 1 << 24));
  train
      ->add_option("--learning-rate", o.learning_rate,
                   "Learning rate (default: 0.001 for adam, 0.01 for sgd)")
      ->check(finite_in(0, 1e6, /*exclusive_low=*/true));
  train->add_option("--optimizer", o.optimizer, "adam or sgd (momentum 0.9)")
      ->capture_default_str()
      ->check(CLI::IsMember({"adam", "sgd"}));
  // TensorFlow's seeds are int64; a negative one is refused rather than wrapped.
  train->add_option("--seed", o.seed, "Seed of the initial weights and the shuffling")
      ->capture_default_str()
      ->check(whole_in(0, INT64_MAX));
  train
      ->add_option("--data-dir", o.data_dir,
                   "Folder of the Fashion-MNIST IDX files (default: $STRATA_DATA_DIR, else "
                   "/usr/share/datasets/fashion-mnist)")
      ->check(CLI::ExistingDirectory);
  train->add_option(
      "--tfrecord", o.tfrecord,
      "Train from TFRecord files matching this glob (tf.Examples: image bytes, label int64)");
  train->add_option("--tfrecord-test", o.tfrecord_test,
                    "Test TFRecord files (default: the IDX test set)");
  train
      ->add_option(
          "--checkpoint-dir", o.checkpoint_dir,
          "Save a checkpoint (tf.train.Checkpoint: model, optimizer, epoch, step) here after every "
          "epoch, keeping the last 3, and resume from the latest one (CheckpointManager)")
      ->check(folder_to_write());
  train->add_option("--log-dir", o.log_dir, "Write TensorBoard event files and metrics.csv here");
  train->add_option("--plot", o.plot, "Draw loss and accuracy per epoch to this .png or .svg file")
      ->check(CLI::Validator(
          [](std::string& path) {
            try {
              plot_format(path);
              return std::string();
            } catch (const InvalidArgumentError&) {
              // CLI11 puts "--plot: " in front.
              return "expected a file ending in .png or .svg, got '" + path + "'";
            }
          },
          "FILE.png|FILE.svg"));
  train->add_flag("--json", o.json, "Print only one JSON line of final metrics on stdout");
  train
      ->add_option("--limit-examples", o.limit_examples,
                   "Use only the first N training and N test examples (quick runs, tests)")
      ->check(whole_in(1, int64_t{1} << 40));
  train
      ->add_option("--steps-per-epoch", o.steps_per_epoch,
                   "Steps per epoch (default: the whole training set)")
      ->check(whole_in(1, int64_t{1} << 40));
  // A day at most: the timeout is also the start-up deadline, and a longer
  // one only hides a hang.
  train
      ->add_option("--collective-timeout", o.collective_timeout,
                   "multi_worker: seconds a collective (and the start-up) may wait before the job "
                   "fails naming the task that never came (default: 600 per collective, 60 for "
                   "the start-up)")
      ->envname("STRATA_COLLECTIVE_TIMEOUT")
      ->check(finite_in(0, 86400, /*exclusive_low=*/true));
  train->add_flag("--profile", o.profile,
                  "Time every step's phases per replica and worker (input, forward, gradient, "
                  "apply, collective wait and transfer), print the table and name stragglers");
  train->add_option("--profile-json", o.profile_json,
                    "--profile: write the table here as JSON (default: step_profile.json in "
                    "--log-dir, or in the current folder)");
  train->add_flag("--deterministic", o.deterministic,
                  "mirrored, multi_worker: bit-identical weights for any number of replicas "
                  "(CommunicationOptions.deterministic_reduction; the batch size must be a "
                  "multiple of 8)");
  train
      ->add_option("--check-divergence-every", o.check_divergence_every,
                   "mirrored, multi_worker: compare every replica's copy of every variable every "
                   "N steps and fail naming the ones that differ (0 = never)")
      ->check(whole_in(0, int64_t{1} << 40));
  train
      ->add_option("--shared-memory", o.shared_memory,
                   "multi_worker: auto (workers on one host exchange through shared memory, "
                   "docs/PERFORMANCE.md) or off (Gloo over TCP only); "
                   "CommunicationOptions.shared_memory")
      ->check(CLI::IsMember({"auto", "off"}));
  train
      ->add_option("--overlap-gradient-reduction", o.overlap_gradient_reduction,
                   "multi_worker: on (default: all-reduce the gradients in buckets while the "
                   "backward pass runs, docs/PERFORMANCE.md) or off; "
                   "CommunicationOptions.overlap_gradient_reduction")
      ->check(CLI::IsMember({"on", "off"}));
  train->add_option("--save-weights", o.save_weights,
                    "Write the final weights to this file (keras save_weights; the chief only)");
  return train;
}

int run_train(const TrainOptions& o) {
  const Clock::time_point start = Clock::now();
  validate_train_options(o);
  if (!o.tpu_topology.empty()) ::setenv("STRATA_TPU_TOPOLOGY", o.tpu_topology.c_str(), 1);
  // Devices first: the first tensor (loading the data) fixes the configuration.
  configure_devices(o);
  std::unique_ptr<sd::Strategy> owned = make_strategy(o);
  sd::Strategy& strategy = owned ? *owned : sd::get_strategy();
  std::string task;
  if (const auto* resolver = strategy.cluster_resolver();
      resolver != nullptr && resolver->task_type()) {
    task = *resolver->task_type() + ":" + std::to_string(resolver->task_id().value_or(0));
  }
  check_workers_agree(strategy, o, task);
  const Data data = load(o);
  const int64_t n_train = data.train.x.shape()[0];
  const int64_t n_test = data.test.x.shape()[0];
  const double lr = o.learning_rate > 0 ? o.learning_rate : (o.optimizer == "sgd" ? 0.01 : 0.001);
  std::ostream& out = std::cout;
  // Multi-worker: every worker trains; only the chief writes the logs and the
  // plot, and draws the progress bar (TF's should_checkpoint/should_save_summary).
  const bool chief = strategy.extended().should_checkpoint();
  const bool human = !o.json;
  const bool show_progress = human && chief;

  // The model, its optimizer and metrics under the strategy's scope, so their
  // variables are distributed.
  keras::ModelPtr model;
  {
    std::optional<sd::StrategyScope> scope;
    if (owned) scope.emplace(strategy);
    model = build_model(o.model, o.seed);
    model->compile({.optimizer = make_optimizer(o, lr),
                    // The loss as a function of (labels, logits): compile reduces it
                    // with SUM_OVER_BATCH_SIZE and fit scales it for the replicas.
                    .loss = keras::LossFunction([](const Tensor& labels, const Tensor& logits) {
                      return keras::losses::sparse_categorical_crossentropy(labels, logits,
                                                                            {.from_logits = true});
                    }),
                    .metrics = {"accuracy"},
                    .seed = o.seed});
  }
  const int replicas = strategy.num_replicas_in_sync();
  if (show_progress) {
    const std::vector<std::string> devices = strategy_devices(strategy);
    out << "strategy: " << (owned ? strategy.name() : std::string("default (no distribution)"))
        << ", " << replicas << " replica" << (replicas == 1 ? "" : "s") << " on " << devices.size()
        << " device" << (devices.size() == 1 ? "" : "s") << "\n";
    for (const std::string& d : devices) out << "  " << d << "\n";
    out << "data: " << data.source << ": " << n_train << " training, " << n_test
        << " test examples\n";
    out << "model: " << o.model << ", optimizer " << o.optimizer << " (learning rate " << lr
        << "), global batch " << o.batch_size;
    if (replicas > 1)
      out << " (" << o.batch_size / replicas << (o.batch_size % replicas ? "+" : "")
          << " per replica)";
    out << ", " << o.epochs << " epoch" << (o.epochs == 1 ? "" : "s") << ", seed " << o.seed
        << "\n";
    model->summary(out);
    out.flush();
  }

  std::vector<keras::callbacks::CallbackPtr> callbacks;
  callbacks.push_back(
      keras::callbacks::LambdaCallback({.on_batch_end = [&model](int64_t, keras::Logs&) {
        if (g_interrupted.load()) {
          model->stop_training = true;
          g_stopped_mid_epoch.store(true);
        }
      }}));
  auto meter = std::make_shared<ThroughputMeter>(
      o.batch_size,
      o.steps_per_epoch > 0 ? std::min(n_train, o.steps_per_epoch * o.batch_size) : n_train);
  callbacks.push_back(meter);
  std::shared_ptr<EpochCheckpoint> backup;
  keras::callbacks::CallbackPtr backup_hooks;
  bool resuming = false;
  if (!o.checkpoint_dir.empty()) {
    // Every worker gets the same directory and restores from it; only the
    // chief's checkpoints stay there (EpochCheckpoint). They stay after a
    // complete run: the same command then trains no more epochs and reports
    // the checkpoint's accuracy; more --epochs continue.
    std::filesystem::create_directories(o.checkpoint_dir);
    backup = std::make_shared<EpochCheckpoint>(o.checkpoint_dir, model, strategy);
    resuming = backup->latest_checkpoint().has_value();
    backup_hooks = std::make_shared<UnlessInterrupted>(backup);
  }
  std::string csv_path;
  const bool write_logs = !o.log_dir.empty() && chief;
  const bool write_plot = !o.plot.empty() && chief;
  std::vector<keras::callbacks::CallbackPtr> log_callbacks;
  std::shared_ptr<keras::callbacks::TensorBoardCallback> tensorboard;
  if (write_logs) {
    std::filesystem::create_directories(o.log_dir);
    csv_path = (std::filesystem::path(o.log_dir) / "metrics.csv").string();
    tensorboard = keras::callbacks::TensorBoard({.log_dir = o.log_dir});
    log_callbacks.push_back(std::make_shared<UnlessInterrupted>(tensorboard));
    // A resumed run appends to the rows of the epochs already done.
    log_callbacks.push_back(
        std::make_shared<UnlessInterrupted>(keras::callbacks::CSVLogger(csv_path, ",", resuming)));
  }
  if (backup_hooks || !log_callbacks.empty()) {
    callbacks.push_back(std::make_shared<LogsBeforeBackup>(backup, backup_hooks,
                                                           std::move(log_callbacks), csv_path));
  }

  if (o.profile) strategy.enable_step_profile();
  keras::History history;
  {
    const SigintGuard sigint;
    keras::FitOptions fit{.batch_size = o.batch_size,
                          .epochs = o.epochs,
                          .verbose = show_progress ? keras::Verbosity::kAuto : 0,
                          .callbacks = callbacks,
                          .validation_data = std::pair<Tensor, Tensor>(data.test.x, data.test.y),
                          .shuffle = true};
    if (o.steps_per_epoch > 0) fit.steps_per_epoch = o.steps_per_epoch;
    fit.validation_batch_size = o.batch_size;
    history = model->fit(data.train.x, data.train.y, fit);
  }
  const bool interrupted = g_stopped_mid_epoch.load();
  if (!o.save_weights.empty() && chief && !interrupted) model->save_weights(o.save_weights);
  const std::optional<int> resumed_at = backup ? backup->resumed_epoch() : std::nullopt;
  std::optional<StepProfileOutput> profile;
  if (o.profile) {
    std::optional<sd::StrategyScope> scope;
    if (owned) scope.emplace(strategy);
    profile = write_step_profile(o, sd::gather_step_profile(strategy), chief, tensorboard.get(),
                                 history.epoch.empty() ? 0 : history.epoch.back() + 1);
  }

  keras::Logs test;
  if (!interrupted)
    test = model->evaluate(data.test.x, data.test.y, {.batch_size = o.batch_size, .verbose = 0});
  // The training is done and its checkpoint and logs written: a plot that
  // cannot be written (a full disk) is reported, and the run still succeeds.
  std::string plot_error;
  if (write_plot && !interrupted && !history.epoch.empty()) {
    try {
      plot_training_curves(history.epoch, history.history, o.plot);
    } catch (const Error& e) {
      plot_error = str_cat(error_code_name(e.code()), ": ", e.what());
      std::cerr << "strata: warning: the plot was not written: " << plot_error << "\n";
    }
  }
  const bool plotted = write_plot && !interrupted && !history.epoch.empty() && plot_error.empty();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const double throughput =
      meter->seconds() > 0 ? double(meter->examples()) / meter->seconds() : 0.0;
  const int last_epoch = history.epoch.empty() ? resumed_at.value_or(0) : history.epoch.back() + 1;
  // The GEMM floor (tools/strata/gemm_floor.h): this process's share of the
  // global batch through direct cblas_sgemm calls at the threads of its
  // devices, at most one per core, measured now that no kernel runs; as a global rate.
  int floor_threads = 0;
  for (const Device* d : local_devices()) floor_threads += d->num_threads();
  floor_threads = std::clamp(floor_threads, 1,
                             static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const int local_replicas = strategy.num_local_replicas();
  const int64_t local_batch = std::max<int64_t>(1, o.batch_size * local_replicas / replicas);
  const double floor_rate = static_cast<double>(local_batch) *
                            (static_cast<double>(replicas) / static_cast<double>(local_replicas)) /
                            gemm_floor_seconds(step_gemms(o.model, local_batch), floor_threads);
  const double floor_ratio = throughput / floor_rate;

  if (o.json) {
    nlohmann::json j = {{"model", o.model},
                        {"strategy", o.strategy},
                        {"replicas", replicas},
                        {"chief", chief},
                        {"global_batch_size", o.batch_size},
                        {"epochs", last_epoch},
                        {"epochs_this_run", meter->epochs()},
                        {"train_examples", meter->examples()},
                        {"train_time_s", meter->seconds()},
                        {"examples_per_second", throughput},
                        {"gemm_floor_examples_per_second", floor_rate},
                        {"gemm_floor_threads", floor_threads},
                        {"floor_ratio", floor_ratio},
                        {"wall_time_s", wall},
                        {"interrupted", interrupted}};
    if (!interrupted) {
      j["test_accuracy"] = test.at("accuracy");
      j["test_loss"] = test.at("loss");
    }
    if (!task.empty()) j["task"] = task;
    if (resumed_at) j["resumed_from_epoch"] = *resumed_at;
    // The chief's checkpoints are the ones kept (as its logs).
    if (backup && chief && backup->latest_checkpoint())
      j["checkpoint"] = *backup->latest_checkpoint();
    if (write_logs) j["log_dir"] = o.log_dir;
    if (plotted) j["plot"] = o.plot;
    if (!plot_error.empty()) j["plot_error"] = plot_error;
    if (profile) {
      j["step_profile"] = profile->json;
      if (!profile->path.empty()) j["step_profile_json"] = profile->path;
    }
    out << j.dump() << "\n";
  } else {
    out << "\n";
    if (!task.empty()) out << "task " << task << (chief ? " (chief)" : "") << "\n";
    if (resumed_at) out << "resumed from the checkpoint after epoch " << *resumed_at << "\n";
    if (interrupted) {
      out << "interrupted by Ctrl-C during epoch " << last_epoch
          << "; the partial epoch was not saved\n";
    } else {
      out << "test accuracy " << fixed(test.at("accuracy"), 4) << ", test loss "
          << fixed(test.at("loss"), 4) << " (" << n_test << " examples)\n";
    }
    out << "trained " << meter->epochs() << " epoch" << (meter->epochs() == 1 ? "" : "s") << " ("
        << meter->examples() << " examples) in " << fixed(meter->seconds(), 1)
        << " s: " << fixed(throughput, 0) << " examples/s (" << fixed(floor_ratio, 2)
        << " of the GEMM floor, " << fixed(floor_rate, 0) << " examples/s at " << floor_threads
        << " thread" << (floor_threads == 1 ? "" : "s") << "); wall time " << fixed(wall, 1)
        << " s\n";
    if (backup && chief) {
      if (backup->latest_checkpoint()) {
        out << "checkpoint: " << *backup->latest_checkpoint()
            << " (rerun the same command to resume, or add --epochs)\n";
      } else {
        out << "checkpoint: none written yet in " << o.checkpoint_dir << " (no epoch completed)\n";
      }
    }
    if (write_logs) {
      out << "logs: " << o.log_dir << " (TensorBoard: tensorboard --logdir " << o.log_dir << "; "
          << csv_path << ")\n";
    }
    if (profile) {
      out << "\n" << profile->table;
      if (!profile->path.empty()) out << "step profile: " << profile->path << "\n";
    }
    if (write_plot && !interrupted) {
      out << "plot: "
          << (history.epoch.empty() ? "not drawn (no epochs trained in this run)"
              : plot_error.empty()  ? o.plot
                                    : "not written (" + plot_error + ")")
          << "\n";
    }
  }
  out.flush();
  return interrupted ? 128 + SIGINT : 0;
}

}  // namespace strata::tools
