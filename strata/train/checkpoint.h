#pragma once
// tf.train.Checkpoint: saves and restores a graph of trackable objects by
// their paths in the graph (format: docs/formats/checkpoint.md).
//
//   strata::Variable step(strata::constant(int64_t{1}), {.trainable = false, .name = "step"});
//   train::Checkpoint ckpt({{"step", step}, {"optimizer", opt}, {"net", net}});
//   std::string path = ckpt.save("/tmp/tf_ckpts/ckpt");  // "/tmp/tf_ckpts/ckpt-1"
//   ckpt.restore(train::latest_checkpoint("/tmp/tf_ckpts")).assert_consumed();
//
// Saving walks the graph breadth-first from the checkpoint (trackable.h):
// each object is one node, reached by named edges; a node's tensors are keyed
// by the escaped names along its first path ("net/layer_with_weights-0/kernel/
// .ATTRIBUTES/VARIABLE_VALUE"); an optimizer's slots hang off the variables
// they belong to ("<variable path>/.OPTIMIZER_SLOT/<optimizer path>/<slot>").
// Values are therefore matched by structure, never by creation order or
// variable name, so two models built in different orders in different
// processes restore into each other.
//
// Restoring matches the file's graph against the live objects from the root,
// edge name by edge name. Before any value is assigned the whole file is
// verified (DataLossError naming the file and the tensor or section) and
// every matched value is checked against its object (InvalidArgumentError
// naming the path, for a dtype or shape mismatch): a restore that fails
// assigns nothing. Values whose objects do not exist yet are kept and
// assigned when those are created (deferred restoration): a layer's weights
// at its build, an optimizer's slots at its first apply_gradients, the
// checkpoint's save_counter at its first use. A later restore overrides a
// pending earlier one.
//
// The save_counter (an int64 Variable, "save_counter" in the graph) is created
// by the first save(); save(prefix) increments it and writes "prefix-<n>",
// and records that path in the directory's `checkpoint` state file
// (checkpoint_manager.h); write(path) writes exactly `path` and touches
// neither. Files are written atomically (temporary file, fsync, rename,
// directory fsync); missing directories are created.
//
// Copies of a Checkpoint share one object (as Python references).
// Thread-safety: one save/restore at a time per checkpoint; a save reads
// each variable once (a consistent snapshot needs training paused, as in TF).

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/variable.h"
#include "strata/train/trackable.h"

namespace strata::train {

namespace internal {
struct RestoreState;
}

// The result of Checkpoint::restore / read (TF's CheckpointLoadStatus; for
// restore(std::nullopt), TF's InitializationOnlyStatus). The assertions raise
// FailedPreconditionError (TF's AssertionError) naming the paths at fault.
// Copies share the restore; it stays alive (for deferred values) while the
// restored objects or a copy of the status live.
class CheckpointLoadStatus {
 public:
  // Every value in the checkpoint was assigned (none still waits for its
  // object to be created, no slot restoration pends, every saved attribute
  // was used) and every live object that holds values was matched.
  const CheckpointLoadStatus& assert_consumed() const;
  // Every live object that holds values now has a value from the checkpoint;
  // checkpoint values for objects not created yet are allowed.
  const CheckpointLoadStatus& assert_existing_objects_matched() const;
  // Some object other than the root was matched (the checkpoint is not
  // unrelated to this program).
  const CheckpointLoadStatus& assert_nontrivial_match() const;
  // Silences the warning logged when the last copy of the status is destroyed
  // while checkpoint values remain unused.
  const CheckpointLoadStatus& expect_partial() const;

 private:
  friend class Checkpoint;
  struct Shared;
  explicit CheckpointLoadStatus(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  std::shared_ptr<Shared> shared_;
};

class Checkpoint {
 public:
  using Children = std::vector<std::pair<std::string, TrackableRef>>;
  // The named objects (TF's keyword arguments). InvalidArgumentError for an
  // empty or repeated name, or "save_counter" (reserved, as in TF).
  Checkpoint(std::initializer_list<std::pair<std::string, TrackableRef>> children);
  explicit Checkpoint(Children children);

  // Increments save_counter, writes "<file_prefix>-<save_counter>" and records
  // it in the `checkpoint` file of its directory; returns that path.
  std::string save(const std::string& file_prefix);
  // Writes the checkpoint to `file_path` (no numbering, no state file); returns it.
  std::string write(const std::string& file_path);
  // Restores from `save_path`; std::nullopt (no checkpoint yet) restores
  // nothing and returns a status whose assertions fail. Creates save_counter
  // first, so that it is restored too (TF). NotFoundError naming the path
  // when there is no such file.
  CheckpointLoadStatus restore(const std::optional<std::string>& save_path);
  // Like restore, without creating save_counter (a saved counter waits until
  // the counter is created by save).
  CheckpointLoadStatus read(const std::string& save_path);

  // The number of save() calls (restored with the rest); created on first use.
  const Variable& save_counter();

  // The root of the object graph (this checkpoint as a trackable).
  TrackableRef as_trackable() const;

  // The shared object behind the handles (opaque; the .cc file's).
  struct State;

 private:
  friend class TrackableRef;
  CheckpointLoadStatus restore_impl(const std::string& save_path, bool create_counter);
  std::shared_ptr<State> state_;
};

}  // namespace strata::train
