#pragma once
// keras.callbacks.TensorBoard: scalar summaries for TensorBoard.
//
//   model->fit(ds, {.epochs = 5, .callbacks = {keras::callbacks::TensorBoard({.log_dir =
//   "/tmp/logs"})},
//                   .validation_data = val});
//   // tensorboard --logdir /tmp/logs
//
// As Keras (update_freq "epoch"): at each epoch end the training logs are
// written to <log_dir>/train and the "val_*" logs (prefix removed) to
// <log_dir>/validation, each as tag "epoch_<name>" with the epoch as step.
// An event file is TFRecord-framed tensorflow.Event protos (event.proto),
// named as TensorFlow names them, events.out.tfevents.<seconds>.<hostname>.<pid>.
// <n>.v2 (n counts the event files this process opened, so back-to-back runs never
// share a file), starting with a
// file_version "brain.Event:2" event; values are Summary.Value.simple_value.
// Each epoch rewrites the file atomically with every event so far, so
// TensorBoard sees whole records while training runs.
// Histograms, graphs, images, profiling and embeddings are not written:
// non-default values of those options are UnimplementedError.
//
// Thread-safety: hooks run on the fit thread.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/keras/callbacks/callback.h"

namespace strata::keras::callbacks {

struct TensorBoardOptions {
  std::string log_dir = "logs";
  int histogram_freq = 0;
  bool write_graph = true;  // accepted; no graph exists to write
  bool write_images = false;
  bool write_steps_per_second = false;
  std::string update_freq = "epoch";
  int profile_batch = 0;
  int embeddings_freq = 0;
};

class TensorBoardCallback : public Callback {
 public:
  explicit TensorBoardCallback(const TensorBoardOptions& options);
  void on_train_begin(Logs& logs) override;
  void on_epoch_begin(int epoch, Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_batch_end(int64_t batch, Logs& logs) override;

  // The event file of a run ("train" or "validation"), once written.
  std::string event_file(const std::string& run) const;
  // Writes `values` as scalars of `run` (a folder beside "train") at `step`,
  // tagged with their names as given, as tf.summary.scalar would under a
  // file writer of <log_dir>/<run>.
  void write_run_scalars(const std::string& run, int64_t step, const Logs& values);

 private:
  struct Writer {
    std::string path;
    std::vector<std::string> records;  // serialized Events
  };
  Writer& writer(const std::string& run);
  void write_scalars(const std::string& run, int64_t step, const Logs& logs,
                     const std::string& tag_prefix = "epoch_");
  TensorBoardOptions options_;
  std::map<std::string, Writer> writers_;
  double epoch_start_ = 0;
  int64_t epoch_steps_ = 0;
};

std::shared_ptr<TensorBoardCallback> TensorBoard(const TensorBoardOptions& options = {});

}  // namespace strata::keras::callbacks
