#pragma once
// tf.distribute.DistributedDataset and its iterator (spec §5.2, §5.8).
//
//   auto ds = Dataset::from_tensor_slices({x, y}).batch(64);        // global batch 64
//   sd::DistributedDataset dd = strategy.experimental_distribute_dataset(ds);
//   for (const sd::PerReplica<strata::data::Element>& batch : dd) strategy.run(step_fn, batch);
//   auto it = dd.iter();
//   std::optional<sd::PerReplica<strata::data::Element>> next = it.get_next_as_optional();
//   dd.element_spec();      // per-replica spec: batch dimension 64 / R when that divides
//
// What a strategy does to the dataset (one input pipeline per worker):
//  1. auto-shard across the W workers by AutoShardPolicy (strata/data/graph.h);
//     with a single worker nothing is sharded;
//  2. with R > 1 replicas, rebatch: a statically batched dataset (B known) is
//     split with rebatch_sizes(B, W, r, worker) (strata/distribute/rebatch.h);
//     with B unknown, every batch is cut into R ceil-sized pieces (the legacy rule);
//  3. each step takes r consecutive per-replica batches, one per local replica,
//     placed on the replica's device; a prefetch buffer keeps them ready.
// Partial batches (TF's get_next_as_optional handling): when the data ends in
// the middle of a step, replicas without data get an empty batch (batch
// dimension 0) so that every replica still runs the step; when no replica has
// data the iteration ends (OutOfRangeError / end of range-for). Across
// workers the workers agree on every step (one small all-reduce): while any
// worker has data, every worker runs the step — one whose own data ended
// gives its replicas empty batches — so uneven last batches never leave a
// worker waiting in a collective the others skip. The dataset cannot be
// transformed further (no such methods).
//
// Thread-safety: a DistributedDataset is immutable; an iterator is used by one
// thread at a time (the thread driving the strategy).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "strata/core/device.h"
#include "strata/data/dataset.h"
#include "strata/distribute/values.h"

namespace strata::distribute {

// Given whether this worker has data for the next step, returns whether any
// worker has (a collective call on every worker; empty = this worker only).
using StepAgreement = std::function<bool(bool this_worker_has_data)>;

class DistributedIterator {
 public:
  // `its`: one iterator shared by the local replicas (each step takes one
  // element per replica, in replica order), or one iterator per local replica
  // (InputReplicationMode::PER_REPLICA: replica i reads its own pipeline).
  DistributedIterator(std::vector<data::Iterator> its, std::vector<const Device*> devices,
                      std::vector<TensorSpec> spec, StepAgreement agreement = {});
  DistributedIterator(DistributedIterator&&) noexcept = default;
  DistributedIterator& operator=(DistributedIterator&&) noexcept = default;

  // The next step's batches; OutOfRangeError when no replica has data left.
  PerReplica<data::Element> get_next();
  // The next step's batches, or nullopt at the end.
  std::optional<PerReplica<data::Element>> get_next_as_optional();

  // Checkpointing (train::Checkpoint({{"iterator", it}})): the position
  // between two steps. With one pipeline shared by the replicas
  // (experimental_distribute_dataset, the PER_WORKER function form) the
  // state is that of the global batches not yet consumed, independent of the
  // replica count: a run saved under 2 replicas continues under 1 (also the
  // default strategy, or a plain iterator of the dataset without a strategy)
  // or 4 with the same global batches, and a plain iterator's state restores
  // here too. Under PER_REPLICA the replicas' pipelines are saved one by one
  // and restore under the same count only.
  Tensor save_state();
  void restore_state(const Tensor& state);
  std::shared_ptr<data::CheckpointableIterator> checkpointable() const;

  struct State;  // shared with the checkpoints tracking it (the .cc file's)

 private:
  std::shared_ptr<State> state_;
};

class DistributedDataset {
 public:
  // `per_replica` yields per-replica batches in replica order (the strategy
  // applied sharding and rebatching already); `devices` are the local replicas'.
  // `steps`: the step count when the strategy knows it from the input (one
  // step per global batch); otherwise cardinality() derives it from the
  // per-replica dataset.
  DistributedDataset(data::Dataset per_replica, std::vector<const Device*> devices,
                     StepAgreement agreement = {}, std::optional<int64_t> steps = std::nullopt);
  // One dataset per local replica (InputReplicationMode::PER_REPLICA): replica
  // i takes its batches from `per_replica_datasets[i]` alone.
  DistributedDataset(std::vector<data::Dataset> per_replica_datasets,
                     std::vector<const Device*> devices, StepAgreement agreement = {});

  DistributedIterator iter() const;
  // The spec of one replica's batch.
  std::vector<TensorSpec> element_spec() const;
  int num_local_replicas() const noexcept { return static_cast<int>(devices_.size()); }
  // The per-replica dataset (replica 0's under PER_REPLICA), for inspection.
  const data::Dataset& per_replica_dataset() const noexcept { return datasets_.front(); }

  // The number of steps (one PerReplica each) this dataset yields on this
  // worker, or data::INFINITE_CARDINALITY / data::UNKNOWN_CARDINALITY.
  // experimental_distribute_dataset: one step per global batch of the input
  // (its cardinality; unknown across workers unless the data is sharded by
  // DATA, where every worker takes part of every global batch). The function
  // form: PER_WORKER, the dataset's per-replica batches divided among the
  // local replicas, rounded up (a partial last step still runs); PER_REPLICA,
  // the longest replica pipeline's.
  int64_t cardinality() const;

  // tf.distribute.DistributedDataset.reduce: state = reduce_func(state, x)
  // for every step's PerReplica x, in order, from initial_state.
  template <typename State, typename Fn>
  State reduce(State initial_state, Fn&& reduce_func) const {
    State state = std::move(initial_state);
    DistributedIterator it = iter();
    while (auto x = it.get_next_as_optional()) state = reduce_func(std::move(state), *x);
    return state;
  }

  // Range-for over steps.
  class StepIterator {
   public:
    using value_type = PerReplica<data::Element>;
    using difference_type = std::ptrdiff_t;
    StepIterator() = default;
    explicit StepIterator(DistributedIterator it);
    const value_type& operator*() const { return *current_; }
    const value_type* operator->() const { return &*current_; }
    StepIterator& operator++();
    bool operator==(const StepIterator& o) const { return !current_ == !o.current_; }

   private:
    std::shared_ptr<DistributedIterator> it_;
    std::optional<value_type> current_;
  };
  StepIterator begin() const { return StepIterator(iter()); }
  StepIterator end() const { return StepIterator(); }

 private:
  std::vector<data::Dataset> datasets_;  // one shared, or one per local replica
  std::vector<const Device*> devices_;
  StepAgreement agreement_;
  std::optional<int64_t> steps_;
};

// The per-replica pipeline of one worker (steps 1 and 2 above): auto-shard
// for `num_workers` workers (this one is `worker_index`), then rebatch for
// `replicas_per_worker` replicas each. InvalidArgumentError for a dataset
// whose elements have a scalar component when rebatching is needed (TF:
// "Cannot rebatch dataset: All components must have at least one dimension.
// Perhaps your input dataset is not batched?").
//
// `contiguous_worker_blocks` (CommunicationOptions.deterministic_reduction
// across workers): instead of auto-sharding, every worker reads every global
// batch, cuts it into W consecutive blocks, keeps block `worker_index` and
// cuts that into its replicas' batches, so global replica g gets the same
// rows [g B / R, (g + 1) B / R) of every global batch as it would in one
// process. UnimplementedError under AutoShardPolicy::FILE (each worker would
// read other files).
data::Dataset distribute_dataset_for_worker(const data::Dataset& ds, int num_workers,
                                            int worker_index, int replicas_per_worker,
                                            bool contiguous_worker_blocks = false);

}  // namespace strata::distribute
