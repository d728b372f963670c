#pragma once
// keras.callbacks.BackupAndRestore: fault-tolerant training. At each epoch
// end it saves the model's weights, the optimizer's variables and the epoch
// to `backup_dir` (one file, written atomically); when fit starts and a
// backup exists, it restores all three and fit continues with the next
// epoch. When training finishes normally the backup is deleted (Keras's
// delete_checkpoint=True), so the next fit starts afresh.
//
//   auto backup = keras::callbacks::BackupAndRestore("/tmp/backup");
//   model->fit(x, y, {.epochs = 10, .callbacks = {backup}});   // killed in epoch 4 ...
//   // ... a new process builds the same model, compiles, calls the same fit:
//   model->fit(x, y, {.epochs = 10, .callbacks = {backup}});   // resumes at epoch 4
//
// A resumed run equals an uninterrupted one when everything else is
// reproducible: fit(x, y) shuffles with a seed derived from compile's seed
// and the epoch (model.h). The file is <backup_dir>/chief/training_state.weights
// (TF's read directory; docs/formats/weights.md, kind "training_state",
// metadata "epoch").
// Under a multi-worker strategy (as TF's WorkerTrainingState) every worker
// backs up at the same points, but only the chief's copy stays: the chief
// writes <backup_dir>/chief/training_state.weights (atomically), the others
// write <backup_dir>/workertemp_<task_id>/training_state.weights and delete
// that directory right after. On restart every worker restores from the
// chief's file, so all resume at the same epoch with the same state. After
// a complete fit the chief deletes <backup_dir>/chief.
// The model must be built when fit starts (give the first layer an
// input_shape, or call the model once) so the weights can be restored.
// save_freq: "epoch", or every N batches (counted across epochs, as Keras):
// such a backup also records the batch it follows (metadata "batch", TF's
// _ckpt_saved_batch), and a restarted fit continues with the next batch of
// that epoch (Model::resume_at_epoch: the batches already trained are drawn
// and dropped, so fit(x, y) and datasets that repeat their order end with the
// weights of an uninterrupted run); after the epoch's last batch it continues
// with the next epoch.
//
// Thread-safety: hooks run on the fit thread.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "strata/keras/callbacks/callback.h"
#include "strata/keras/callbacks/model_checkpoint.h"

namespace strata::keras::callbacks {

struct BackupAndRestoreOptions {
  SaveFreq save_freq = {};
  bool delete_checkpoint = true;
  bool save_before_preemption = false;  // true: UnimplementedError (no preemption notices)
};

class BackupAndRestoreCallback : public Callback {
 public:
  BackupAndRestoreCallback(std::string backup_dir, const BackupAndRestoreOptions& options);
  void on_train_begin(Logs& logs) override;
  void on_epoch_begin(int epoch, Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_batch_end(int64_t batch, Logs& logs) override;
  void on_train_end(Logs& logs) override;
  // The backup file's path (the chief's, which every worker restores from).
  std::string backup_path() const;
  // The epoch fit resumed at (nullopt when it started afresh).
  std::optional<int> resumed_epoch() const noexcept { return resumed_epoch_; }
  // The batch of resumed_epoch() fit resumed at (0: the epoch's start).
  int64_t resumed_step() const noexcept { return resumed_step_; }

 private:
  void save(int completed_epochs, std::optional<int64_t> batch);
  std::string chief_dir() const;
  std::string backup_dir_;
  BackupAndRestoreOptions options_;
  int current_epoch_ = 0;
  int64_t batches_seen_ = 0;
  std::optional<int> resumed_epoch_;
  int64_t resumed_step_ = 0;
};

std::shared_ptr<BackupAndRestoreCallback> BackupAndRestore(
    std::string backup_dir, const BackupAndRestoreOptions& options = {});

}  // namespace strata::keras::callbacks
