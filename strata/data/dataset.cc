// The Dataset handle, its iterators and the node kinds' names. Each family of
// transformations lives in its own file beside this one (batch.cc, map.cc, ...).
#include "strata/data/dataset.h"

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/base/str_cat.h"
#include "strata/data/graph.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"

namespace strata::data {

const char* node_kind_name(NodeKind k) noexcept {
  switch (k) {
    case NodeKind::kTensors: return "TensorDataset";
    case NodeKind::kTensorSlices: return "TensorSliceDataset";
    case NodeKind::kRange: return "RangeDataset";
    case NodeKind::kGenerator: return "GeneratorDataset";
    case NodeKind::kListFiles: return "ListFilesDataset";
    case NodeKind::kTFRecord: return "TFRecordDataset";
    case NodeKind::kTextLine: return "TextLineDataset";
    case NodeKind::kFixedLengthRecord: return "FixedLengthRecordDataset";
    case NodeKind::kMap: return "MapDataset";
    case NodeKind::kFilter: return "FilterDataset";
    case NodeKind::kBatch: return "BatchDataset";
    case NodeKind::kPaddedBatch: return "PaddedBatchDataset";
    case NodeKind::kUnbatch: return "UnbatchDataset";
    case NodeKind::kRebatch: return "RebatchDatasetV2";
    case NodeKind::kLegacyRebatch: return "RebatchDataset";
    case NodeKind::kShuffle: return "ShuffleDataset";
    case NodeKind::kRepeat: return "RepeatDataset";
    case NodeKind::kTake: return "TakeDataset";
    case NodeKind::kSkip: return "SkipDataset";
    case NodeKind::kShard: return "ShardDataset";
    case NodeKind::kInterleave: return "InterleaveDataset";
    case NodeKind::kZip: return "ZipDataset";
    case NodeKind::kConcatenate: return "ConcatenateDataset";
    case NodeKind::kEnumerate: return "EnumerateDataset";
    case NodeKind::kCache: return "CacheDataset";
    case NodeKind::kPrefetch: return "PrefetchDataset";
    case NodeKind::kOptions: return "OptionsDataset";
  }
  return "?";
}

// Overrides take ownership of the files, hence the by-value parameter.
// NOLINTNEXTLINE(performance-unnecessary-value-param)
std::shared_ptr<const DatasetNode> DatasetNode::with_files(std::vector<std::string>) const {
  STRATA_CHECK(UNIMPLEMENTED, false, node_kind_name(kind()),
               ": expected a file-reading source, got a node without files");
  return nullptr;
}

// --- Iterator ----------------------------------------------------------------

namespace internal {

// Overrides take the elements over, hence the by-value parameter.
// NOLINTNEXTLINE(performance-unnecessary-value-param)
void IteratorImpl::save(StateWriter& w, std::vector<Element> pushed_back) {
  (void)w;
  (void)pushed_back;
  throw UnimplementedError(str_cat(kind_name(),
                                   ": saving an iterator's position is not implemented for this "
                                   "transformation"));
}

void IteratorImpl::restore(StateReader& r) {
  throw UnimplementedError(str_cat(kind_name(), " at ", r.where(),
                                   ": restoring an iterator's position is not implemented for "
                                   "this transformation"));
}

const char* IteratorImpl::kind_name() const {
  return kind_ ? node_kind_name(*kind_) : "an input pipeline";
}

}  // namespace internal

namespace {

// The state of the input pipeline in `state`: a distributed iterator's state
// (docs/formats/checkpoint.md) with one pipeline shared by its replicas holds
// it as "pipeline_0", so that a run saved under a strategy restores into a
// plain iterator of the same dataset.
IteratorState pipeline_state(IteratorState state) {
  if (state.contains("kind") || !state.contains("pipelines")) return state;
  const Tensor& n = state.get("pipelines");
  STRATA_CHECK_ARG(n.dtype() == DType::int64 && n.num_elements() == 1 && n.item<int64_t>() == 1,
                   "restoring a dataset iterator from a distributed iterator's state: expected "
                   "one input pipeline shared by the replicas, got ",
                   n.num_elements() == 1 && n.dtype() == DType::int64
                       ? str_cat(n.item<int64_t>(),
                                 " (one per replica, "
                                 "InputReplicationMode::PER_REPLICA)")
                       : n.shape().to_string());
  return IteratorState::decode(state.get("pipeline_0"));
}

// A pipeline distributed over several replicas has a rebatch below its
// trailing prefetch (strata/distribute); one restored into the same pipeline
// without it (one replica, no strategy) gets the rebatch back with the whole
// batch size, so the rows the replicas had not consumed come first, in global
// batches, and the input continues from its saved position.
Dataset with_saved_rebatch(const Dataset& ds, const IteratorState& state) {
  if (!state.contains("kind")) return ds;
  const Tensor& kind = state.get("kind");
  // Not a name: the restore reports it (StateReader::saved_kind).
  if (kind.dtype() != DType::string || kind.num_elements() != 1) return ds;
  const std::string saved = kind.item<std::string>();
  const bool v2 = saved == node_kind_name(NodeKind::kRebatch);
  if (!v2 && saved != node_kind_name(NodeKind::kLegacyRebatch)) return ds;
  Dataset below = ds;
  while (below.kind() == NodeKind::kPrefetch || below.kind() == NodeKind::kOptions)
    below = below.inputs()[0];
  if (below.kind() == NodeKind::kRebatch || below.kind() == NodeKind::kLegacyRebatch) return ds;
  if (!v2) return apply_before_prefetch(ds, [](const Dataset& d) { return d.rebatch_legacy(1); });
  const int64_t batch = static_batch_size(ds);
  STRATA_CHECK(FAILED_PRECONDITION, batch >= 0,
               "restoring an iterator: the state was saved with the rows of a ", saved,
               " (a pipeline distributed over several replicas), and this pipeline has neither "
               "a rebatch nor a static batch size to cut those rows into");
  return apply_before_prefetch(ds, [batch](const Dataset& d) { return d.rebatch({batch}); });
}

}  // namespace

// The iterator's state, shared with the checkpoints that track it. A mutex
// keeps a save from overlapping a next() on another thread.
struct Iterator::Core final : CheckpointableIterator {
  Core(std::optional<Dataset> d, std::unique_ptr<internal::IteratorImpl> i)
      : ds(std::move(d)), impl(std::move(i)) {}
  std::string description() const override { return "dataset iterator"; }
  Tensor save_state() override {
    MutexLock l(mu);
    const ExternalStatePolicy policy =
        ds ? ds->options().experimental_external_state_policy.value_or(ExternalStatePolicy::FAIL)
           : ExternalStatePolicy::FAIL;
    IteratorState state;
    internal::StateWriter w(state, policy);
    w.save_here(*impl, {});
    return state.encode();
  }
  void restore_state(const Tensor& bytes) override {
    const IteratorState state = pipeline_state(IteratorState::decode(bytes));
    MutexLock l(mu);
    // A fresh iteration, so that nothing of the current one survives; then
    // every transformation takes its saved position.
    std::unique_ptr<internal::IteratorImpl> fresh;
    if (ds) {
      const Dataset d = with_saved_rebatch(*ds, state);
      fresh = d.node()->make_iterator();
      fresh->set_kind(d.kind());
    }
    internal::StateReader r(state);
    r.restore_here(fresh ? *fresh : *impl);
    if (fresh) impl = std::move(fresh);
  }

  const std::optional<Dataset> ds;
  Mutex mu;
  std::unique_ptr<internal::IteratorImpl> impl STRATA_GUARDED_BY(mu);
};

Iterator::Iterator(std::unique_ptr<internal::IteratorImpl> impl)
    : core_(std::make_shared<Core>(std::nullopt, std::move(impl))) {}

Iterator::Iterator(const Dataset& ds, std::unique_ptr<internal::IteratorImpl> impl)
    : core_(std::make_shared<Core>(ds, std::move(impl))) {}

std::optional<Element> Iterator::next() {
  STRATA_CHECK(FAILED_PRECONDITION, core_ != nullptr,
               "Iterator: expected a live iterator, got a moved-from one");
  MutexLock l(core_->mu);
  return core_->impl->next();
}

Element Iterator::get_next() {
  auto e = next();
  STRATA_CHECK(OUT_OF_RANGE, e.has_value(), "End of sequence");
  return std::move(*e);
}

Tensor Iterator::save_state() {
  STRATA_CHECK(FAILED_PRECONDITION, core_ != nullptr,
               "Iterator: expected a live iterator, got a moved-from one");
  return core_->save_state();
}

void Iterator::restore_state(const Tensor& state) {
  STRATA_CHECK(FAILED_PRECONDITION, core_ != nullptr,
               "Iterator: expected a live iterator, got a moved-from one");
  core_->restore_state(state);
}

std::shared_ptr<CheckpointableIterator> Iterator::checkpointable() const {
  STRATA_CHECK(FAILED_PRECONDITION, core_ != nullptr,
               "Iterator: expected a live iterator, got a moved-from one");
  return core_;
}

ElementIterator::ElementIterator(Iterator it) : it_(std::make_shared<Iterator>(std::move(it))) {
  current_ = it_->next();
}

ElementIterator& ElementIterator::operator++() {
  current_ = it_->next();
  return *this;
}

Element::Element(const std::map<std::string, Tensor>& named) {
  reserve(named.size());
  auto names = std::make_shared<std::vector<std::string>>();
  names->reserve(named.size());
  for (const auto& [name, t] : named) {
    names->push_back(name);
    push_back(t);
  }
  names_ = std::move(names);
}

const std::vector<std::string>& Element::names() const noexcept {
  static const std::vector<std::string> kNone;
  return names_ ? *names_ : kNone;
}

size_t Element::index_of(std::string_view name) const {
  STRATA_INTERNAL_CHECK(!names_ || names_->size() == size(),
                        "an element's names and components disagree in number");
  if (names_) {
    for (size_t i = 0; i < names_->size(); ++i) {
      if ((*names_)[i] == name) return i;
    }
  }
  throw InvalidArgumentError(str_cat("Element: no component named '", name, "'; ",
                                     names_ ? str_cat("the components are ", *names_)
                                            : std::string("the components have no names")));
}

const Tensor& Element::operator[](std::string_view name) const { return at(index_of(name)); }
Tensor& Element::operator[](std::string_view name) { return at(index_of(name)); }

std::map<std::string, Tensor> Element::as_dict() const {
  STRATA_CHECK_ARG(names_ != nullptr, "Element.as_dict: expected named components, got ", size(),
                   " positional ones");
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < size(); ++i) out.emplace((*names_)[i], at(i));
  return out;
}

Element& Element::with_names_of(const Element& like) {
  STRATA_CHECK_ARG(!like.names_ || like.size() == size(), "Element: expected ", like.size(),
                   " components to take the names ", like.names(), ", got ", size());
  names_ = like.names_;
  return *this;
}

Dataset::Dataset(std::shared_ptr<const DatasetNode> node) : node_(std::move(node)) {
  STRATA_INTERNAL_CHECK(node_ != nullptr);
}

std::vector<TensorSpec> Dataset::element_spec() const { return node_->element_spec(); }
int64_t Dataset::cardinality() const { return node_->cardinality(); }
NodeKind Dataset::kind() const { return node_->kind(); }
std::vector<Dataset> Dataset::inputs() const { return node_->inputs(); }
Iterator Dataset::iter() const {
  auto impl = node_->make_iterator();
  impl->set_kind(kind());
  return Iterator(*this, std::move(impl));
}

}  // namespace strata::data
