#pragma once
// Saving and restoring an iterator's position (tf.data iterator checkpointing).
//
//   auto it = ds.iter();
//   it.get_next(); it.get_next();
//   strata::Tensor state = it.save_state();     // uint8 [n]: the bytes below
//   auto fresh = ds.iter();
//   fresh.restore_state(state);                 // continues where `it` stood
//   train::Checkpoint ckpt({{"iterator", it}}); // the same, through a checkpoint
//
// An iterator's state is a set of named tensors (IteratorState), written by
// each iterator of the pipeline under its path ("input/input/shuffle_buffer/3/0").
// It travels as one uint8 tensor whose bytes are documented in
// docs/formats/checkpoint.md ("Iterator state"); a train::Checkpoint stores it
// under the attribute ITERATOR_STATE, as TensorFlow does.
//
// Thread-safety: IteratorState is a value (one thread at a time).

#include <map>
#include <memory>
#include <string>

#include "strata/core/tensor.h"

namespace strata::data {

class IteratorState {
 public:
  // Sets `key` (overwrites).
  void set(const std::string& key, Tensor value);
  bool contains(const std::string& key) const { return entries_.contains(key); }
  // The tensor under `key`; DataLossError naming the key when it is missing
  // (a state written by another pipeline or corrupted).
  const Tensor& get(const std::string& key) const;
  const std::map<std::string, Tensor>& entries() const noexcept { return entries_; }

  // The bytes of this state as a rank-1 uint8 tensor.
  Tensor encode() const;
  // Parses encode()'s bytes. InvalidArgumentError unless `bytes` is a rank-1
  // uint8 tensor; DataLossError naming the offset for bytes that are not a state.
  static IteratorState decode(const Tensor& bytes);

 private:
  std::map<std::string, Tensor> entries_;
};

// Something whose position a train::Checkpoint saves (a dataset iterator, a
// distributed iterator). Implementations say their own thread-safety; saving
// and restoring must not overlap with the iteration.
class CheckpointableIterator {
 public:
  virtual ~CheckpointableIterator() = default;
  // "dataset iterator", for messages.
  virtual std::string description() const = 0;
  // The position as a uint8 tensor (IteratorState::encode()); saving does not
  // disturb the iteration. FailedPreconditionError naming a transformation
  // whose state cannot be saved, under ExternalStatePolicy::FAIL (the default).
  virtual Tensor save_state() = 0;
  // Continues from a saved position. DataLossError for bytes that are not a
  // state; InvalidArgumentError naming the first transformation that differs
  // when the state was saved from another pipeline.
  virtual void restore_state(const Tensor& state) = 0;
};

}  // namespace strata::data
