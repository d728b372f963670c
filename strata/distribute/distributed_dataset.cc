#include "strata/distribute/distributed_dataset.h"

#include <algorithm>
#include <cstring>

#include "strata/base/errors.h"
#include "strata/data/graph.h"
#include "strata/distribute/rebatch.h"

namespace strata::distribute {

data::Dataset distribute_dataset_for_worker(const data::Dataset& ds, int num_workers,
                                            int worker_index, int replicas_per_worker) {
  const int num_replicas = num_workers * replicas_per_worker;
  if (num_replicas == 1) return ds;
  for (const TensorSpec& spec : ds.element_spec()) {
    STRATA_CHECK_ARG(!spec.shape.has_known_rank() || spec.shape.rank() >= 1,
                     "Cannot rebatch dataset: All components must have at least one dimension. "
                     "Perhaps your input dataset is not batched? Got an element spec component ",
                     spec.to_string());
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

DistributedIterator::DistributedIterator(std::vector<data::Iterator> its,
                                         std::vector<const Device*> devices,
                                         std::vector<TensorSpec> spec, StepAgreement agreement)
    : its_(std::move(its)),
      devices_(std::move(devices)),
      spec_(std::move(spec)),
      agreement_(std::move(agreement)),
      exhausted_(its_.size(), false) {
  STRATA_INTERNAL_CHECK(its_.size() == 1 || its_.size() == devices_.size());
}

data::Element DistributedIterator::empty_batch(const Device& device) const {
  // TF's dummy batch: the element spec with unknown dims set to 0 and the
  // batch dimension forced to 0.
  data::Element e;
  for (const TensorSpec& s : spec_) {
    std::vector<int64_t> dims = s.shape.has_known_rank() ? s.shape.dims() : std::vector<int64_t>{0};
    for (int64_t& d : dims)
      if (d < 0) d = 0;
    if (!dims.empty()) dims[0] = 0;
    e.push_back(Tensor::allocate(s.dtype, TensorShape(dims), &device));
  }
  return e;
}

std::optional<PerReplica<data::Element>> DistributedIterator::get_next_as_optional() {
  if (finished_) return std::nullopt;
  std::vector<data::Element> parts;
  int with_data = 0;
  for (size_t r = 0; r < devices_.size(); ++r) {
    const Device& d = *devices_[r];
    const size_t k = its_.size() == 1 ? 0 : r;
    std::optional<data::Element> e = exhausted_[k] ? std::nullopt : its_[k].next();
    if (!e) {
      exhausted_[k] = true;
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
  const bool any = agreement_ ? agreement_(with_data > 0) : with_data > 0;
  if (!any) {
    finished_ = true;
    return std::nullopt;
  }
  return PerReplica<data::Element>(std::move(parts));
}

PerReplica<data::Element> DistributedIterator::get_next() {
  auto next = get_next_as_optional();
  if (!next) throw OutOfRangeError("End of sequence: the distributed dataset has no more data");
  return std::move(*next);
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
