#include "strata/distribute/distributed_dataset.h"

#include <algorithm>
#include <cstring>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/data/graph.h"
#include "strata/data/iterator_state.h"
#include "strata/distribute/rebatch.h"

namespace strata::distribute {

data::Dataset distribute_dataset_for_worker(const data::Dataset& ds, int num_workers,
                                            int worker_index, int replicas_per_worker,
                                            bool contiguous_worker_blocks) {
  const int num_replicas = num_workers * replicas_per_worker;
  if (num_replicas == 1) return ds;
  for (const TensorSpec& spec : ds.element_spec()) {
    STRATA_CHECK_ARG(!spec.shape.has_known_rank() || spec.shape.rank() >= 1,
                     "Cannot rebatch dataset: All components must have at least one dimension. "
                     "Perhaps your input dataset is not batched? Got an element spec component ",
                     spec.to_string());
  }
  if (contiguous_worker_blocks && num_workers > 1) {
    STRATA_CHECK(UNIMPLEMENTED,
                 ds.options().experimental_distribute.policy() != data::AutoShardPolicy::FILE,
                 "deterministic_reduction across ", num_workers,
                 " workers needs every worker to read every global batch; AutoShardPolicy::FILE "
                 "gives each worker other files (use DATA or AUTO)");
    return data::apply_before_prefetch(ds, [&](const data::Dataset& d) {
      return d.rebatch_legacy(num_workers)
          .shard(num_workers, worker_index)
          .rebatch_legacy(replicas_per_worker);
    });
  }
  // TF's order: rebatch first, then auto-shard. Under FILE/OFF the rebatch
  // keeps this worker's rotated sub-batch sizes (every step's sub-batches
  // across all workers add up to one global batch); under DATA the shard
  // rewrite turns it into legacy pieces of every global batch and this worker
  // keeps pieces worker_index, worker_index + W, ... (spec §5.3c), so step k
  // is global batch k on every worker.
  const int64_t batch = data::static_batch_size(ds);
  // A statically batched input (every element has exactly `batch` rows, as
  // batch(B, drop_remainder=True) gives) is rebatched with drop_remainder
  // too: nothing is dropped (its rows split exactly), and when the pieces are
  // equal the per-replica element spec keeps its static batch dimension, as
  // TF's (batch(8, True) on 2 replicas: per-replica shape (4, ...)).
  bool static_batch = batch >= 0;
  for (const TensorSpec& spec : ds.element_spec()) {
    static_batch = static_batch && spec.shape.has_known_rank() && spec.shape.rank() >= 1 &&
                   spec.shape.dim(0) == batch;
  }
  data::Dataset rebatched = data::apply_before_prefetch(ds, [&](const data::Dataset& d) {
    return batch >= 0
               ? d.rebatch(rebatch_sizes(batch, num_workers, replicas_per_worker, worker_index),
                           static_batch)
               : d.rebatch_legacy(num_replicas);
  });
  if (num_workers == 1) return rebatched;
  return data::auto_shard(rebatched, ds.options().experimental_distribute.policy(), num_workers,
                          worker_index, num_replicas);
}

// The iterator's state, shared with the checkpoints that track it. One
// thread at a time (the thread driving the strategy), saving included.
struct DistributedIterator::State final : data::CheckpointableIterator {
  State(std::vector<data::Iterator> i, std::vector<const Device*> d, std::vector<TensorSpec> s,
        StepAgreement a)
      : its(std::move(i)),
        devices(std::move(d)),
        spec(std::move(s)),
        agreement(std::move(a)),
        exhausted(its.size(), false) {}

  std::string description() const override { return "distributed dataset iterator"; }
  Tensor save_state() override;
  void restore_state(const Tensor& bytes) override;
  data::Element empty_batch(const Device& device) const;
  std::optional<PerReplica<data::Element>> next();

  std::vector<data::Iterator> its;
  std::vector<const Device*> devices;
  std::vector<TensorSpec> spec;
  StepAgreement agreement;
  std::vector<bool> exhausted;  // per iterator: its data ended
  bool finished = false;        // every worker's data ended
};

DistributedIterator::DistributedIterator(std::vector<data::Iterator> its,
                                         std::vector<const Device*> devices,
                                         std::vector<TensorSpec> spec, StepAgreement agreement)
    : state_(std::make_shared<State>(std::move(its), std::move(devices), std::move(spec),
                                     std::move(agreement))) {
  STRATA_INTERNAL_CHECK(state_->its.size() == 1 || state_->its.size() == state_->devices.size());
}

data::Element DistributedIterator::State::empty_batch(const Device& device) const {
  // TF's dummy batch: the element spec with unknown dims set to 0 and the
  // batch dimension forced to 0.
  data::Element e;
  for (const TensorSpec& s : spec) {
    std::vector<int64_t> dims = s.shape.has_known_rank() ? s.shape.dims() : std::vector<int64_t>{0};
    for (int64_t& d : dims)
      if (d < 0) d = 0;
    if (!dims.empty()) dims[0] = 0;
    e.push_back(Tensor::allocate(s.dtype, TensorShape(dims), &device));
  }
  return e;
}

std::optional<PerReplica<data::Element>> DistributedIterator::State::next() {
  if (finished) return std::nullopt;
  std::vector<data::Element> parts;
  int with_data = 0;
  for (size_t r = 0; r < devices.size(); ++r) {
    const Device& d = *devices[r];
    const size_t k = its.size() == 1 ? 0 : r;
    std::optional<data::Element> e = exhausted[k] ? std::nullopt : its[k].next();
    if (!e) {
      exhausted[k] = true;
      parts.push_back(empty_batch(d));
      continue;
    }
    ++with_data;
    for (Tensor& t : *e) t = t.on_device(d);
    parts.push_back(std::move(*e));
  }
  // A replica's dummy batch names its components as the real ones do.
  const auto named = std::find_if(parts.begin(), parts.end(),
                                  [](const data::Element& e) { return e.has_names(); });
  if (named != parts.end()) {
    const data::Element names = *named;
    for (data::Element& e : parts) {
      if (!e.has_names() && e.size() == names.size()) e.with_names_of(names);
    }
  }
  const bool any = agreement ? agreement(with_data > 0) : with_data > 0;
  if (!any) {
    finished = true;
    return std::nullopt;
  }
  return PerReplica<data::Element>(std::move(parts));
}

// Layout: "pipelines" (1 for a shared pipeline, else the replica count),
// "finished", and per pipeline i "exhausted_<i>" and "pipeline_<i>" (the
// pipeline's own state bytes). Steps consume whole global batches, so a
// shared pipeline's state (its rebatch keeps the rows not yet consumed, not
// the per-replica pieces) is independent of the replica count.
Tensor DistributedIterator::State::save_state() {
  data::IteratorState state;
  state.set("pipelines", constant(static_cast<int64_t>(its.size())));
  state.set("finished", constant(static_cast<int64_t>(finished ? 1 : 0)));
  for (size_t i = 0; i < its.size(); ++i) {
    state.set(str_cat("exhausted_", i), constant(static_cast<int64_t>(exhausted[i] ? 1 : 0)));
    state.set(str_cat("pipeline_", i), its[i].save_state());
  }
  return state.encode();
}

void DistributedIterator::State::restore_state(const Tensor& bytes) {
  const data::IteratorState state = data::IteratorState::decode(bytes);
  if (!state.contains("pipelines") && state.contains("kind")) {
    // A plain dataset iterator's state (a run without a strategy): the
    // position of the global batches, for a pipeline the replicas share.
    STRATA_CHECK_ARG(its.size() == 1,
                     "restoring a distributed iterator from a dataset iterator's state: "
                     "expected one input pipeline shared by the replicas, this iterator has ",
                     its.size(), " (one per replica, InputReplicationMode::PER_REPLICA)");
    its[0].restore_state(bytes);
    exhausted[0] = false;
    finished = false;
    return;
  }
  const int64_t pipelines = state.get("pipelines").item<int64_t>();
  STRATA_CHECK_ARG(pipelines == static_cast<int64_t>(its.size()),
                   "restoring a distributed iterator: the checkpoint holds ", pipelines,
                   " input pipelines (one per replica, InputReplicationMode::PER_REPLICA, or one "
                   "shared), this iterator has ",
                   its.size());
  for (size_t i = 0; i < its.size(); ++i) its[i].restore_state(state.get(str_cat("pipeline_", i)));
  for (size_t i = 0; i < its.size(); ++i)
    exhausted[i] = state.get(str_cat("exhausted_", i)).item<int64_t>() != 0;
  finished = state.get("finished").item<int64_t>() != 0;
}

std::optional<PerReplica<data::Element>> DistributedIterator::get_next_as_optional() {
  return state_->next();
}

PerReplica<data::Element> DistributedIterator::get_next() {
  auto next = get_next_as_optional();
  if (!next) throw OutOfRangeError("End of sequence: the distributed dataset has no more data");
  return std::move(*next);
}

Tensor DistributedIterator::save_state() { return state_->save_state(); }
void DistributedIterator::restore_state(const Tensor& state) { state_->restore_state(state); }
std::shared_ptr<data::CheckpointableIterator> DistributedIterator::checkpointable() const {
  return state_;
}

DistributedDataset::DistributedDataset(data::Dataset per_replica,
                                       std::vector<const Device*> devices, StepAgreement agreement,
                                       std::optional<int64_t> steps)
    : datasets_{std::move(per_replica)},
      devices_(std::move(devices)),
      agreement_(std::move(agreement)),
      steps_(steps) {
  STRATA_INTERNAL_CHECK(!devices_.empty());
}

DistributedDataset::DistributedDataset(std::vector<data::Dataset> per_replica_datasets,
                                       std::vector<const Device*> devices, StepAgreement agreement)
    : datasets_(std::move(per_replica_datasets)),
      devices_(std::move(devices)),
      agreement_(std::move(agreement)) {
  STRATA_INTERNAL_CHECK(!devices_.empty() && datasets_.size() == devices_.size());
  const std::vector<TensorSpec> spec = datasets_.front().element_spec();
  for (size_t i = 1; i < datasets_.size(); ++i) {
    const std::vector<TensorSpec> other = datasets_[i].element_spec();
    bool same = other.size() == spec.size();
    for (size_t c = 0; same && c < spec.size(); ++c) same = other[c].dtype == spec[c].dtype;
    STRATA_CHECK_ARG(same,
                     "distribute_datasets_from_function: expected every replica's dataset "
                     "to have the components and dtypes of replica 0's, got replica ",
                     i, "'s with ", other.size(), " components against ", spec.size());
  }
}

DistributedIterator DistributedDataset::iter() const {
  std::vector<data::Iterator> its;
  its.reserve(datasets_.size());
  for (const data::Dataset& d : datasets_) its.push_back(d.iter());
  return DistributedIterator(std::move(its), devices_, element_spec(), agreement_);
}

std::vector<TensorSpec> DistributedDataset::element_spec() const {
  std::vector<TensorSpec> spec = datasets_.front().element_spec();
  // Replicas' pipelines that disagree on a dimension leave it unknown.
  for (size_t i = 1; i < datasets_.size(); ++i) {
    const std::vector<TensorSpec> other = datasets_[i].element_spec();
    for (size_t c = 0; c < spec.size(); ++c) {
      if (!spec[c].shape.has_known_rank()) continue;
      if (!other[c].shape.has_known_rank() || other[c].shape.rank() != spec[c].shape.rank()) {
        spec[c].shape = TensorShape::unknown_rank();
        continue;
      }
      std::vector<int64_t> dims = spec[c].shape.dims();
      for (size_t k = 0; k < dims.size(); ++k)
        if (dims[k] != other[c].shape.dims()[k]) dims[k] = -1;
      spec[c].shape = TensorShape(dims);
    }
  }
  return spec;
}

int64_t DistributedDataset::cardinality() const {
  if (steps_) return *steps_;
  if (datasets_.size() == 1) {
    const int64_t n = datasets_.front().cardinality();
    if (n < 0) return n;
    const int64_t r = num_local_replicas();
    return (n + r - 1) / r;
  }
  int64_t steps = 0;
  bool infinite = false;
  for (const data::Dataset& d : datasets_) {
    const int64_t n = d.cardinality();
    if (n == data::UNKNOWN_CARDINALITY) return n;
    if (n == data::INFINITE_CARDINALITY) infinite = true;
    steps = std::max(steps, n);
  }
  return infinite ? data::INFINITE_CARDINALITY : steps;
}

DistributedDataset::StepIterator::StepIterator(DistributedIterator it)
    : it_(std::make_shared<DistributedIterator>(std::move(it))) {
  current_ = it_->get_next_as_optional();
}

DistributedDataset::StepIterator& DistributedDataset::StepIterator::operator++() {
  current_ = it_->get_next_as_optional();
  return *this;
}

}  // namespace strata::distribute
