#pragma once
// keras.callbacks.ModelCheckpoint: saves the model (or its weights) during fit.
//
//   auto ckpt = keras::callbacks::ModelCheckpoint(dir + "/ckpt-{epoch:02d}-{val_loss:.2f}.weights",
//                                                 {.monitor = "val_loss", .save_best_only = true,
//                                                  .save_weights_only = true});
//   model->fit(ds, {.epochs = 10, .callbacks = {ckpt}, .validation_data = val});
//
// The file path is a Python format string (Keras calls filepath.format(epoch=
// epoch + 1, **logs)): "{name}" or "{name:spec}" with spec
// [[fill]align][sign][0][width][.precision][type], type one of d f e g s
// (format_filepath below). save_best_only saves only when the monitored
// value improves strictly on the best so far (mode as Keras: "auto" = max for
// names containing "acc"); a missing monitored value skips the save with a
// warning. save_weights_only chooses save_weights over save (weights plus
// optimizer variables). save_freq "epoch" saves at each epoch end; an integer
// saves every that many batches. Files are written atomically. Under a
// multi-worker strategy every worker saves at the same points (their logs are
// the same global values, so save_best_only decides alike), but only the
// chief's file appears at the path: the others write into
// <dir>/workertemp_<task_id>/ and remove it at once (Model::save_weights, as
// TF's ModelCheckpoint with distributed_file_utils).
//
// Thread-safety: hooks run on the fit thread.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "strata/keras/callbacks/callback.h"

namespace strata::keras::callbacks {

// Keras's save_freq: "epoch" or a number of batches.
class SaveFreq {
 public:
  SaveFreq(const char* epoch = "epoch");                 // NOLINT: as Keras
  SaveFreq(int64_t batches);                             // NOLINT
  SaveFreq(int batches) : SaveFreq(int64_t(batches)) {}  // NOLINT
  bool per_epoch() const noexcept { return batches_ == 0; }
  int64_t batches() const noexcept { return batches_; }

 private:
  int64_t batches_ = 0;
};

struct ModelCheckpointOptions {
  std::string monitor = "val_loss";
  int verbose = 0;
  bool save_best_only = false;
  bool save_weights_only = false;
  std::string mode = "auto";
  SaveFreq save_freq = {};
  std::optional<double> initial_value_threshold = std::nullopt;
};

class ModelCheckpointCallback : public Callback {
 public:
  ModelCheckpointCallback(std::string filepath, const ModelCheckpointOptions& options);
  void on_train_begin(Logs& logs) override;
  void on_epoch_begin(int epoch, Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_batch_end(int64_t batch, Logs& logs) override;
  // The best monitored value so far (save_best_only).
  std::optional<double> best() const noexcept { return best_; }

 private:
  void save(int epoch, const Logs& logs);
  std::string filepath_;
  ModelCheckpointOptions options_;
  bool maximize_;
  std::optional<double> best_;
  int current_epoch_ = 0;
  int64_t batches_seen_ = 0;
};

std::shared_ptr<ModelCheckpointCallback> ModelCheckpoint(
    std::string filepath, const ModelCheckpointOptions& options = {});

// Python's str.format for the fields ModelCheckpoint offers: "epoch" (an
// integer) and every log. InvalidArgumentError naming the field for a name
// that is neither, or an unsupported spec.
std::string format_filepath(const std::string& pattern, int epoch, const Logs& logs);

}  // namespace strata::keras::callbacks
