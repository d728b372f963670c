#pragma once
// tf.train.CheckpointManager and the `checkpoint` state file
// (tf.train.latest_checkpoint, get_checkpoint_state, update_checkpoint_state).
//
//   train::Checkpoint ckpt({{"step", step}, {"optimizer", opt}, {"net", net}});
//   train::CheckpointManager manager(ckpt, "./tf_ckpts", {.max_to_keep = 3});
//   ckpt.restore(manager.latest_checkpoint());   // nothing on a fresh start
//   ...
//   std::optional<std::string> path = manager.save();  // "./tf_ckpts/ckpt-<save_counter>"
//
// The state file "<dir>/checkpoint" is TF's CheckpointState message in
// protobuf text format, one field per line:
//   model_checkpoint_path: "ckpt-3"
//   all_model_checkpoint_paths: "ckpt-2"
//   all_model_checkpoint_paths: "ckpt-3"
//   all_model_checkpoint_timestamps: 1700000000.25
//   all_model_checkpoint_timestamps: 1700000123.5
//   last_preserved_timestamp: 1699999999.5
// Paths are written relative to the directory when they lie in it and are
// read back joined to it. The file is replaced atomically (strata/base/file.h).
//
// Manager semantics (TF's):
//   - Checkpoints are "<directory>/<checkpoint_name>-<n>", n the checkpoint's
//     save_counter after save() increments it, or `checkpoint_number`.
//   - The manager tracks the checkpoints it may delete, oldest first. After
//     each save, while more than max_to_keep are tracked, the oldest is dropped
//     from the list and deleted, unless keep_checkpoint_every_n_hours is set
//     and at least that long has passed since the last one so kept (TF's
//     last_preserved_timestamp): then its file stays on disk (no longer
//     tracked). max_to_keep unset (TF's None) keeps and tracks everything.
//   - The state file is written before the deletions (so a crash while
//     deleting still finds the new checkpoint) and again after them.
//   - A new manager over an existing directory recovers the tracked list from
//     the state file (timestamps clamped to now, entries older than the last
//     preserved timestamp dropped), so deletion continues across restarts.
//   - With checkpoint_interval, save() does nothing (returns std::nullopt)
//     unless step_counter advanced by at least the interval since the last
//     save (or check_interval is false and the step changed).
//
// Thread-safety: one thread at a time.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/variable.h"
#include "strata/train/checkpoint.h"

namespace strata::train {

// TF's CheckpointState proto.
struct CheckpointState {
  std::string model_checkpoint_path;
  std::vector<std::string> all_model_checkpoint_paths = {};
  std::vector<double> all_model_checkpoint_timestamps = {};
  double last_preserved_timestamp = 0.0;
};

// The state in "<checkpoint_dir>/<latest_filename>", relative paths joined to
// checkpoint_dir; std::nullopt when the file does not exist. DataLossError
// naming the file and line when it is not CheckpointState text or names no
// model_checkpoint_path (TF logs and ignores such a file; see docs/porting.md).
std::optional<CheckpointState> get_checkpoint_state(
    const std::string& checkpoint_dir, const std::string& latest_filename = "checkpoint");

// The newest checkpoint recorded in the directory's state file, if that
// checkpoint's file exists (tf.train.latest_checkpoint).
std::optional<std::string> latest_checkpoint(const std::string& checkpoint_dir,
                                             const std::string& latest_filename = "checkpoint");

struct UpdateCheckpointStateOptions {
  std::string latest_filename = "checkpoint";
  // Write paths relative to save_dir (what Checkpoint.save and the manager do).
  bool save_relative_paths = false;
};
// Writes `state` as "<save_dir>/<latest_filename>" atomically. As TF, a
// model_checkpoint_path missing from the end of all_model_checkpoint_paths is
// appended to it; InvalidArgumentError when the timestamps (if any) do not
// pair with the paths, or a path names the state file itself.
void update_checkpoint_state(const std::string& save_dir, CheckpointState state,
                             const UpdateCheckpointStateOptions& options = {});

// tf.train.CheckpointManager's arguments, in TF's order.
struct CheckpointManagerOptions {
  // Checkpoints to keep; TF has no default, and its None (std::nullopt)
  // keeps every checkpoint. InvalidArgumentError if <= 0.
  std::optional<int> max_to_keep = std::nullopt;
  // Keep one checkpoint per this many hours beyond max_to_keep.
  std::optional<double> keep_checkpoint_every_n_hours = std::nullopt;
  std::string checkpoint_name = "ckpt";
  // An integer variable counting steps (required by checkpoint_interval).
  Variable step_counter = {};
  // Minimum steps between two checkpoints.
  std::optional<int64_t> checkpoint_interval = std::nullopt;
  // Called by restore_or_initialize when there is no checkpoint.
  std::function<void()> init_fn = nullptr;
};

class CheckpointManager {
 public:
  // Reads the directory's state file (if any) to recover the checkpoints it
  // manages. InvalidArgumentError for max_to_keep <= 0, checkpoint_interval
  // <= 0, or checkpoint_interval without step_counter.
  CheckpointManager(Checkpoint checkpoint, std::string directory,
                    CheckpointManagerOptions options = {});

  // Saves a numbered checkpoint and deletes the ones no longer kept; returns
  // its path, or std::nullopt when checkpoint_interval skips this save.
  std::optional<std::string> save(std::optional<int64_t> checkpoint_number = std::nullopt,
                                  bool check_interval = true);
  // Restores the latest checkpoint and returns its path, or, when there is
  // none, calls init_fn (if set) and returns std::nullopt.
  std::optional<std::string> restore_or_initialize();

  // The newest checkpoint, if any (also one found in the state file at construction).
  const std::optional<std::string>& latest_checkpoint() const noexcept { return latest_; }
  // The checkpoints managed (candidates for deletion), oldest first.
  std::vector<std::string> checkpoints() const;
  const std::string& directory() const noexcept { return directory_; }
  const std::optional<int64_t>& checkpoint_interval() const noexcept {
    return options_.checkpoint_interval;
  }

 private:
  int64_t current_step() const;
  void record_state();
  void sweep();

  Checkpoint checkpoint_;
  std::string directory_;
  std::string prefix_;
  CheckpointManagerOptions options_;
  std::optional<std::string> latest_;
  std::vector<std::pair<std::string, double>> maybe_delete_;  // path, timestamp; oldest first
  double last_preserved_timestamp_ = 0.0;
  std::optional<int64_t> last_checkpoint_step_;
};

namespace internal {
// The clock the manager reads (seconds since the epoch, as time.time()).
// Tests replace it; nullptr restores the system clock. Not thread-safe.
void set_checkpoint_clock_for_testing(std::function<double()> clock);
double checkpoint_clock_now();
}  // namespace internal

}  // namespace strata::train
