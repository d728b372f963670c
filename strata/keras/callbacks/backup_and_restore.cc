#include "strata/keras/callbacks/backup_and_restore.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/numbers.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/internal/distributed_file_utils.h"
#include "strata/keras/model.h"
#include "strata/keras/weights_io.h"

namespace strata::keras::callbacks {

BackupAndRestoreCallback::BackupAndRestoreCallback(std::string backup_dir,
                                                   const BackupAndRestoreOptions& options)
    : backup_dir_(std::move(backup_dir)), options_(options) {
  STRATA_CHECK_ARG(!backup_dir_.empty(), "BackupAndRestore: backup_dir is empty");
  STRATA_CHECK(UNIMPLEMENTED, !options.save_before_preemption,
               "BackupAndRestore: save_before_preemption needs preemption notices, which Strata "
               "does not receive");
}

std::shared_ptr<BackupAndRestoreCallback> BackupAndRestore(std::string backup_dir,
                                                           const BackupAndRestoreOptions& options) {
  return std::make_shared<BackupAndRestoreCallback>(std::move(backup_dir), options);
}

namespace {
constexpr char kFileName[] = "training_state.weights";

// A count the backup's metadata records (a whole decimal number in [0, max]);
// anything else is a DataLossError naming the file, the field and the value.
int64_t metadata_count(const std::string& path, const char* field, const std::string& value,
                       int64_t max) {
  const std::optional<int64_t> n = parse_whole_number(value);
  STRATA_CHECK(DATA_LOSS, n && *n >= 0 && *n <= max, "BackupAndRestore: backup '", path,
               "' has metadata field '", field, "' = '", value,
               "', expected a whole number in [0, ", max, "]");
  return *n;
}
}  // namespace

std::string BackupAndRestoreCallback::chief_dir() const {
  return (std::filesystem::path(backup_dir_) / "chief").string();
}

std::string BackupAndRestoreCallback::backup_path() const {
  return (std::filesystem::path(chief_dir()) / kFileName).string();
}

void BackupAndRestoreCallback::on_train_begin(Logs&) {
  resumed_epoch_.reset();
  resumed_step_ = 0;
  batches_seen_ = 0;
  strata::make_dirs(backup_dir_);
  const std::string path = backup_path();
  if (!strata::file_exists(path)) return;
  const std::map<std::string, std::string> meta = load_training_state(*model(), path);
  const auto it = meta.find("epoch");
  STRATA_CHECK(DATA_LOSS, it != meta.end(), "BackupAndRestore: backup '", path, "' has no epoch");
  // "epoch" counts the epochs completed: training continues with that index,
  // after "batch" (the last batch trained in it) when a save_freq=N backup was
  // taken mid-epoch (TF's _ckpt_saved_epoch / _ckpt_saved_batch).
  const int completed = static_cast<int>(metadata_count(path, "epoch", it->second, INT32_MAX));
  const auto batch = meta.find("batch");
  const int64_t step =
      batch == meta.end() ? 0 : metadata_count(path, "batch", batch->second, INT64_MAX - 1) + 1;
  resumed_epoch_ = completed;
  resumed_step_ = step;
  model()->resume_at_epoch(completed, step);
}

void BackupAndRestoreCallback::on_epoch_begin(int epoch, Logs&) { current_epoch_ = epoch; }

void BackupAndRestoreCallback::on_train_batch_end(int64_t batch, Logs&) {
  if (options_.save_freq.per_epoch()) return;
  // Keras counts the batches since the last backup, across epochs.
  if (++batches_seen_ < options_.save_freq.batches()) return;
  batches_seen_ = 0;
  // A mid-epoch backup records the epochs completed before this one and the
  // batch it follows.
  save(current_epoch_, batch);
}

void BackupAndRestoreCallback::on_epoch_end(int epoch, Logs&) {
  if (options_.save_freq.per_epoch()) save(epoch + 1, std::nullopt);
}

void BackupAndRestoreCallback::on_train_end(Logs&) {
  // The chief owns the backup; the others' temporary copies are already gone.
  if (!options_.delete_checkpoint || !model()->distribute_strategy().extended().should_checkpoint())
    return;
  std::error_code ec;
  std::filesystem::remove_all(chief_dir(), ec);
  STRATA_CHECK(INTERNAL, !ec, "BackupAndRestore: cannot delete the backup '", chief_dir(),
               "': ", ec.message());
}

void BackupAndRestoreCallback::save(int completed_epochs, std::optional<int64_t> batch) {
  // Every worker saves (reading the variables can need all of them); the chief
  // into <backup_dir>/chief, the others into <backup_dir>/workertemp_<task_id>,
  // removed once written (TF's WorkerTrainingState.back_up).
  const distribute::Strategy& strategy = model()->distribute_strategy();
  const bool chief = strategy.extended().should_checkpoint();
  const std::string dir = chief ? chief_dir() : internal::write_dirpath(backup_dir_, strategy);
  strata::make_dirs(dir);
  std::map<std::string, std::string> meta = {{"epoch", std::to_string(completed_epochs)}};
  if (batch) meta["batch"] = std::to_string(*batch);
  save_training_state(*model(), (std::filesystem::path(dir) / kFileName).string(), meta);
  if (!chief) internal::remove_temp_dirpath(dir, strategy);
}

}  // namespace strata::keras::callbacks
