#include "strata/data/dataset.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "strata/base/errors.h"
#include "strata/base/thread_annotations.h"
#include "strata/core/random.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/tensor_util.h"

namespace strata::data {

using internal::IteratorImpl;

const char* auto_shard_policy_name(AutoShardPolicy p) noexcept {
  switch (p) {
    case AutoShardPolicy::OFF: return "OFF";
    case AutoShardPolicy::AUTO: return "AUTO";
    case AutoShardPolicy::FILE: return "FILE";
    case AutoShardPolicy::DATA: return "DATA";
    case AutoShardPolicy::HINT: return "HINT";
  }
  return "?";
}

Options Options::merge(const Options& other) const {
  Options r = *this;
  if (other.deterministic) r.deterministic = other.deterministic;
  if (other.experimental_distribute.auto_shard_policy)
    r.experimental_distribute.auto_shard_policy = other.experimental_distribute.auto_shard_policy;
  if (other.experimental_distribute.num_devices)
    r.experimental_distribute.num_devices = other.experimental_distribute.num_devices;
  return r;
}

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

std::optional<Element> Iterator::next() {
  STRATA_CHECK(FAILED_PRECONDITION, impl_ != nullptr,
               "Iterator: expected a live iterator, got a moved-from one");
  return impl_->next();
}

Element Iterator::get_next() {
  auto e = next();
  STRATA_CHECK(OUT_OF_RANGE, e.has_value(), "End of sequence");
  return std::move(*e);
}

ElementIterator::ElementIterator(Iterator it) : it_(std::make_shared<Iterator>(std::move(it))) {
  current_ = it_->next();
}

ElementIterator& ElementIterator::operator++() {
  current_ = it_->next();
  return *this;
}

// --- helpers -----------------------------------------------------------------

namespace {

int64_t autotune_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 4 : static_cast<int64_t>(n);
}

uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

// Draws uniform integers in [0, n) from a Philox stream.
class Rng {
 public:
  explicit Rng(uint64_t seed, uint64_t stream = 0) : gen_(seed, stream) {}
  uint64_t uniform(uint64_t n) {
    if (pos_ == 4) {
      block_ = gen_(counter_++);
      pos_ = 0;
    }
    const uint64_t hi = block_[pos_];
    const uint64_t lo = block_[pos_ + 1];
    pos_ += 2;
    return ((hi << 32) | lo) % n;
  }

 private:
  random::Philox gen_;
  uint64_t counter_ = 0;
  random::Philox::Block block_{};
  int pos_ = 4;
};

std::vector<TensorSpec> spec_of(const Element& e) {
  std::vector<TensorSpec> s;
  s.reserve(e.size());
  for (const Tensor& t : e) s.emplace_back(t.shape(), t.dtype());
  return s;
}

std::string specs_string(const std::vector<TensorSpec>& specs) {
  std::string r = "(";
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i) r += ", ";
    r += specs[i].to_string();
  }
  return r + ")";
}

// The most specific spec compatible with both (dims that differ become -1);
// nullopt if dtypes or ranks differ.
std::optional<TensorSpec> most_specific_compatible(const TensorSpec& a, const TensorSpec& b) {
  if (a.dtype != b.dtype) return std::nullopt;
  if (!a.shape.has_known_rank() || !b.shape.has_known_rank())
    return TensorSpec(TensorShape::unknown_rank(), a.dtype);
  if (a.shape.rank() != b.shape.rank()) return std::nullopt;
  std::vector<int64_t> d(a.shape.rank());
  for (int i = 0; i < a.shape.rank(); ++i)
    d[i] = a.shape.dim(i) == b.shape.dim(i) ? a.shape.dim(i) : -1;
  return TensorSpec(TensorShape(d), a.dtype);
}

// A node whose iterator is built by a lambda, with fixed spec: saves one class
// per simple transformation.
using IterFactory =
    std::function<std::unique_ptr<IteratorImpl>(const std::vector<Dataset>& inputs)>;

class SimpleNode : public DatasetNode {
 public:
  SimpleNode(NodeKind kind, std::vector<Dataset> inputs, std::vector<TensorSpec> spec,
             IterFactory f)
      : DatasetNode(kind, std::move(inputs)), spec_(std::move(spec)), factory_(std::move(f)) {}
  std::vector<TensorSpec> element_spec() const override { return spec_; }
  std::unique_ptr<IteratorImpl> make_iterator() const override { return factory_(inputs()); }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<SimpleNode>(kind(), std::move(inputs), spec_, factory_);
  }

 private:
  std::vector<TensorSpec> spec_;
  IterFactory factory_;
};

// An iterator whose next() is a lambda over captured state.
class FnIterator : public IteratorImpl {
 public:
  explicit FnIterator(std::function<std::optional<Element>()> fn) : fn_(std::move(fn)) {}
  std::optional<Element> next() override { return fn_(); }

 private:
  std::function<std::optional<Element>()> fn_;
};

std::unique_ptr<IteratorImpl> make_fn_iterator(std::function<std::optional<Element>()> fn) {
  return std::make_unique<FnIterator>(std::move(fn));
}

std::shared_ptr<IteratorImpl> input_iter(const Dataset& d) {
  return std::shared_ptr<IteratorImpl>(d.node()->make_iterator());
}

Dataset make(NodeKind kind, std::vector<Dataset> inputs, std::vector<TensorSpec> spec,
             IterFactory f) {
  return Dataset(
      std::make_shared<SimpleNode>(kind, std::move(inputs), std::move(spec), std::move(f)));
}

// --- batch ---------------------------------------------------------------------

class BatchNode : public DatasetNode {
 public:
  BatchNode(Dataset input, int64_t batch_size, bool drop_remainder)
      : DatasetNode(NodeKind::kBatch, {std::move(input)}),
        batch_size_(batch_size),
        drop_(drop_remainder) {}
  std::vector<TensorSpec> element_spec() const override {
    auto spec = inputs()[0].element_spec();
    for (auto& s : spec)
      s.shape = s.shape.has_known_rank() ? s.shape.inserted(0, drop_ ? batch_size_ : -1) : s.shape;
    return spec;
  }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    auto in = input_iter(inputs()[0]);
    const int64_t n = batch_size_;
    const bool drop = drop_;
    return make_fn_iterator([in, n, drop]() -> std::optional<Element> {
      std::vector<Element> rows;
      rows.reserve(static_cast<size_t>(n));
      while (static_cast<int64_t>(rows.size()) < n) {
        auto e = in->next();
        if (!e) break;
        rows.push_back(std::move(*e));
      }
      if (rows.empty() || (drop && static_cast<int64_t>(rows.size()) < n)) return std::nullopt;
      return internal::stack_elements(rows, "batch");
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<BatchNode>(inputs.at(0), batch_size_, drop_);
  }
  int64_t batch_size() const override { return batch_size_; }
  bool drop_remainder() const override { return drop_; }

 private:
  int64_t batch_size_;
  bool drop_;
};

class PaddedBatchNode : public DatasetNode {
 public:
  PaddedBatchNode(Dataset input, int64_t batch_size, PaddedBatchOptions o)
      : DatasetNode(NodeKind::kPaddedBatch, {std::move(input)}),
        batch_size_(batch_size),
        o_(std::move(o)) {}
  std::vector<TensorSpec> element_spec() const override {
    auto spec = inputs()[0].element_spec();
    for (size_t i = 0; i < spec.size(); ++i) {
      TensorShape s = o_.padded_shapes.empty() ? spec[i].shape : o_.padded_shapes[i];
      if (o_.padded_shapes.empty() && s.has_known_rank())
        s = TensorShape(std::vector<int64_t>(s.rank(), -1));
      spec[i].shape = s.inserted(0, o_.drop_remainder ? batch_size_ : -1);
    }
    return spec;
  }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    auto in = input_iter(inputs()[0]);
    const int64_t n = batch_size_;
    auto o = o_;
    return make_fn_iterator([in, n, o]() -> std::optional<Element> {
      std::vector<Element> rows;
      while (static_cast<int64_t>(rows.size()) < n) {
        auto e = in->next();
        if (!e) break;
        rows.push_back(std::move(*e));
      }
      if (rows.empty() || (o.drop_remainder && static_cast<int64_t>(rows.size()) < n))
        return std::nullopt;
      return internal::pad_and_stack(rows, o.padded_shapes, o.padding_values);
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<PaddedBatchNode>(inputs.at(0), batch_size_, o_);
  }
  int64_t batch_size() const override { return batch_size_; }
  bool drop_remainder() const override { return o_.drop_remainder; }

 private:
  int64_t batch_size_;
  PaddedBatchOptions o_;
};

// --- rebatch ---------------------------------------------------------------------

// A flat stream of rows over an iterator of batches.
class RowStream {
 public:
  explicit RowStream(std::shared_ptr<IteratorImpl> in) : in_(std::move(in)) {}
  // Up to n rows as one element (fewer at the end; nullopt when no row is left).
  std::optional<Element> take_rows(int64_t n) {
    std::vector<Element> pieces;
    int64_t got = 0;
    while (got < n) {
      if (!cur_ || pos_ == rows_) {
        auto e = in_->next();
        if (!e) break;
        internal::check_batched(*e, "rebatch");
        cur_ = std::move(e);
        pos_ = 0;
        rows_ = (*cur_)[0].shape().dim(0);
        continue;
      }
      const int64_t k = std::min(n - got, rows_ - pos_);
      Element piece;
      for (const Tensor& t : *cur_) piece.push_back(t.slice_rows(pos_, pos_ + k));
      pos_ += k;
      got += k;
      pieces.push_back(std::move(piece));
    }
    if (pieces.empty()) return std::nullopt;
    if (pieces.size() == 1) return std::move(pieces[0]);
    return internal::concat_elements(pieces);
  }
  // Zero-row tensors shaped like the latest batch (or the spec, unknown dims 0).
  Element empty_rows(const std::vector<TensorSpec>& spec) const {
    Element r;
    for (size_t i = 0; i < spec.size(); ++i) {
      TensorShape s = cur_ ? (*cur_)[i].shape() : spec[i].shape;
      std::vector<int64_t> d = s.dims();
      for (auto& x : d) x = std::max<int64_t>(x, 0);
      d[0] = 0;
      r.push_back(Tensor::allocate(spec[i].dtype, TensorShape(d)));
    }
    return r;
  }

 private:
  std::shared_ptr<IteratorImpl> in_;
  std::optional<Element> cur_;
  int64_t pos_ = 0;
  int64_t rows_ = 0;
};

class RebatchNode : public DatasetNode {
 public:
  RebatchNode(Dataset input, std::vector<int64_t> sizes, bool drop)
      : DatasetNode(NodeKind::kRebatch, {std::move(input)}),
        sizes_(std::move(sizes)),
        drop_(drop) {}
  std::vector<TensorSpec> element_spec() const override {
    auto spec = inputs()[0].element_spec();
    const bool all_equal =
        std::all_of(sizes_.begin(), sizes_.end(), [&](int64_t s) { return s == sizes_[0]; });
    for (auto& s : spec) s.shape = s.shape.with_dim(0, drop_ && all_equal ? sizes_[0] : -1);
    return spec;
  }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    auto rows = std::make_shared<RowStream>(input_iter(inputs()[0]));
    auto k = std::make_shared<size_t>(0);
    auto sizes = sizes_;
    const bool drop = drop_;
    auto spec = inputs()[0].element_spec();
    return make_fn_iterator([rows, k, sizes, drop, spec]() -> std::optional<Element> {
      const int64_t want = sizes[(*k)++ % sizes.size()];
      if (want == 0) return rows->empty_rows(spec);
      auto e = rows->take_rows(want);
      if (e && drop && (*e)[0].shape().dim(0) < want) return std::nullopt;
      return e;
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<RebatchNode>(inputs.at(0), sizes_, drop_);
  }
  std::vector<int64_t> rebatch_sizes() const override { return sizes_; }
  bool drop_remainder() const override { return drop_; }

 private:
  std::vector<int64_t> sizes_;
  bool drop_;
};

class LegacyRebatchNode : public DatasetNode {
 public:
  LegacyRebatchNode(Dataset input, int64_t n)
      : DatasetNode(NodeKind::kLegacyRebatch, {std::move(input)}), n_(n) {}
  std::vector<TensorSpec> element_spec() const override {
    auto spec = inputs()[0].element_spec();
    for (auto& s : spec) {
      const int64_t b = s.shape.dim(0);
      s.shape = s.shape.with_dim(0, b >= 0 && b % n_ == 0 ? b / n_ : -1);
    }
    return spec;
  }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    auto in = input_iter(inputs()[0]);
    auto cur = std::make_shared<std::optional<Element>>();
    auto piece = std::make_shared<int64_t>(0);
    const int64_t n = n_;
    return make_fn_iterator([in, cur, piece, n]() -> std::optional<Element> {
      if (!*cur || *piece == n) {
        *cur = in->next();
        *piece = 0;
        if (!*cur) return std::nullopt;
        internal::check_batched(**cur, "rebatch");
      }
      const int64_t b = (**cur)[0].shape().dim(0);
      const int64_t c = (b + n - 1) / n;
      const int64_t lo = std::min(b, *piece * c), hi = std::min(b, (*piece + 1) * c);
      ++*piece;
      Element out;
      for (const Tensor& t : **cur) out.push_back(t.slice_rows(lo, hi));
      return out;
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<LegacyRebatchNode>(inputs.at(0), n_);
  }
  int64_t num_shards() const override { return n_; }

 private:
  int64_t n_;
};

// --- shuffle ---------------------------------------------------------------------

class ShuffleNode : public DatasetNode {
 public:
  ShuffleNode(Dataset input, int64_t buffer_size, ShuffleOptions o)
      : DatasetNode(NodeKind::kShuffle, {std::move(input)}),
        buffer_size_(buffer_size),
        o_(o),
        seed_(o.seed.value_or(fresh_seed())),
        epoch_(std::make_shared<std::atomic<uint64_t>>(0)) {}
  std::vector<TensorSpec> element_spec() const override { return inputs()[0].element_spec(); }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    // TF: a new seed per iteration when reshuffling, the same order otherwise.
    const uint64_t stream = o_.reshuffle_each_iteration ? epoch_->fetch_add(1) : 0;
    struct State {
      std::shared_ptr<IteratorImpl> in;
      std::vector<Element> buffer;
      bool end = false;
      Rng rng;
    };
    auto st =
        std::make_shared<State>(State{input_iter(inputs()[0]), {}, false, Rng(seed_, stream)});
    const size_t cap = static_cast<size_t>(buffer_size_);
    return make_fn_iterator([st, cap]() -> std::optional<Element> {
      while (!st->end && st->buffer.size() < cap) {
        auto e = st->in->next();
        if (!e) {
          st->end = true;
          break;
        }
        st->buffer.push_back(std::move(*e));
      }
      if (st->buffer.empty()) return std::nullopt;
      const size_t i = st->rng.uniform(st->buffer.size());
      Element out = std::move(st->buffer[i]);
      // TF's buffer semantics: the slot is refilled from the input.
      std::optional<Element> refill = st->end ? std::nullopt : st->in->next();
      if (refill) {
        st->buffer[i] = std::move(*refill);
      } else {
        st->end = true;
        st->buffer[i] = std::move(st->buffer.back());
        st->buffer.pop_back();
      }
      return out;
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    ShuffleOptions o = o_;
    o.seed = seed_;
    return std::make_shared<ShuffleNode>(inputs.at(0), buffer_size_, o);
  }

 private:
  int64_t buffer_size_;
  ShuffleOptions o_;
  uint64_t seed_;
  std::shared_ptr<std::atomic<uint64_t>> epoch_;
};

// --- shard ---------------------------------------------------------------------

class ShardNode : public DatasetNode {
 public:
  ShardNode(Dataset input, int64_t n, int64_t index, bool require_non_empty)
      : DatasetNode(NodeKind::kShard, {std::move(input)}),
        n_(n),
        index_(index),
        require_(require_non_empty) {}
  std::vector<TensorSpec> element_spec() const override { return inputs()[0].element_spec(); }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    auto in = input_iter(inputs()[0]);
    auto seen = std::make_shared<int64_t>(0);
    auto produced = std::make_shared<bool>(false);
    const int64_t n = n_, index = index_;
    const bool require = require_;
    STRATA_CHECK_ARG(n >= 1, "shard: expected num_shards >= 1, got ", n,
                     " (shard(SHARD_HINT, i) only works under AutoShardPolicy::HINT)");
    return make_fn_iterator([in, seen, produced, n, index, require]() -> std::optional<Element> {
      while (true) {
        auto e = in->next();
        if (!e) {
          STRATA_CHECK_ARG(
              !require || *produced || *seen >= n,
              "There aren't enough elements in this dataset for each shard to have at least one "
              "element (# elems = ",
              *seen, ", # shards = ", n,
              "). If you are using datasets with distribution strategy, consider setting the auto "
              "sharding policy to either DATA or OFF using the `experimental_distribute."
              "auto_shard_policy` option of `tf.data.Options()`.");
          return std::nullopt;
        }
        const int64_t i = (*seen)++;
        if (i % n == index) {
          *produced = true;
          return e;
        }
      }
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<ShardNode>(inputs.at(0), n_, index_, require_);
  }
  int64_t num_shards() const override { return n_; }
  int64_t shard_index() const override { return index_; }

 private:
  int64_t n_, index_;
  bool require_;
};

// --- map -------------------------------------------------------------------------

class MapNode : public DatasetNode {
 public:
  MapNode(Dataset input, MapFn fn, MapOptions o)
      : DatasetNode(NodeKind::kMap, {std::move(input)}),
        fn_(std::move(fn)),
        o_(std::move(o)),
        spec_cache_(std::make_shared<SpecCache>()) {}
  std::vector<TensorSpec> element_spec() const override {
    if (!o_.output_signature.empty()) return o_.output_signature;
    // Without a signature the spec is that of the first output element (TF
    // would trace fn; we run it once on the first input element).
    std::call_once(spec_cache_->once, [&] {
      auto it = make_sequential();
      auto e = it->next();
      spec_cache_->spec = e ? spec_of(*e) : inputs()[0].element_spec();
    });
    return spec_cache_->spec;
  }
  std::unique_ptr<IteratorImpl> make_iterator() const override;
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<MapNode>(inputs.at(0), fn_, o_);
  }

 private:
  struct SpecCache {
    std::once_flag once;
    std::vector<TensorSpec> spec;
  };
  std::unique_ptr<IteratorImpl> make_sequential() const {
    auto in = input_iter(inputs()[0]);
    auto fn = fn_;
    return make_fn_iterator([in, fn]() -> std::optional<Element> {
      auto e = in->next();
      if (!e) return std::nullopt;
      return fn(*e);
    });
  }
  MapFn fn_;
  MapOptions o_;
  std::shared_ptr<SpecCache> spec_cache_;
};

// Parallel map: `workers` threads each pull the next input element (input
// access serialised by in_mu_), apply fn outside every lock and store the
// result (or the exception) under its sequence number. At most `workers`
// results are outstanding ahead of the consumer. Deterministic mode returns
// results in sequence order; otherwise in completion order.
class ParallelMapIterator : public IteratorImpl {
 public:
  ParallelMapIterator(std::shared_ptr<IteratorImpl> in, MapFn fn, int64_t workers,
                      bool deterministic)
      : in_(std::move(in)), fn_(std::move(fn)), window_(workers), deterministic_(deterministic) {
    for (int64_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }
  ~ParallelMapIterator() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      cancelled_ = true;
    }
    cv_.notify_all();
    threads_.clear();  // joins
  }
  std::optional<Element> next() override {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      if (deterministic_) {
        auto it = results_.find(next_out_);
        if (it != results_.end()) return take(l, it);
        if (end_seq_ >= 0 && next_out_ >= end_seq_) return std::nullopt;
      } else {
        if (!results_.empty()) return take(l, results_.begin());
        if (end_seq_ >= 0 && in_flight_ == 0) return std::nullopt;
      }
      cv_.wait(l);
    }
  }

 private:
  struct Result {
    std::optional<Element> value;
    std::exception_ptr error;
  };
  std::optional<Element> take(std::unique_lock<std::mutex>& l,
                              std::map<int64_t, Result>::iterator it) {
    Result r = std::move(it->second);
    results_.erase(it);
    ++next_out_;
    ++consumed_;
    l.unlock();
    cv_.notify_all();
    if (r.error) std::rethrow_exception(r.error);
    return std::move(r.value);
  }
  void work() {
    while (true) {
      int64_t seq = 0;
      std::optional<Element> input;
      std::exception_ptr error;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return cancelled_ || end_seq_ >= 0 || next_in_ - consumed_ < window_; });
        if (cancelled_ || end_seq_ >= 0) return;
      }
      {
        // Input pulls are serialised by in_mu_ (not mu_, so the consumer can
        // take results meanwhile); numbering under it keeps input order.
        std::lock_guard<std::mutex> il(in_mu_);
        {
          std::lock_guard<std::mutex> l(mu_);
          if (cancelled_ || end_seq_ >= 0) return;
          seq = next_in_++;
          ++in_flight_;
        }
        try {
          input = in_->next();
        } catch (...) {
          error = std::current_exception();
        }
        if (!input && !error) {
          {
            std::lock_guard<std::mutex> l(mu_);
            end_seq_ = seq;
            --in_flight_;
          }
          cv_.notify_all();
          return;
        }
      }
      {
        // An input that arrives after the destructor asked the workers to stop
        // is dropped unmapped, so teardown waits for at most the calls already
        // running (the input pull, or fn on an earlier input), not a new one.
        std::lock_guard<std::mutex> l(mu_);
        if (cancelled_) {
          --in_flight_;
          return;
        }
      }
      Result r;
      if (error) {
        r.error = error;
      } else {
        try {
          r.value = fn_(*input);
        } catch (...) {
          r.error = std::current_exception();
        }
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        results_.emplace(seq, std::move(r));
        --in_flight_;
      }
      cv_.notify_all();
    }
  }

  std::shared_ptr<IteratorImpl> in_;
  MapFn fn_;
  const int64_t window_;
  const bool deterministic_;
  std::mutex in_mu_;  // serialises in_->next()
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Result> results_ STRATA_GUARDED_BY(mu_);
  int64_t next_in_ STRATA_GUARDED_BY(mu_) = 0;
  int64_t next_out_ STRATA_GUARDED_BY(mu_) = 0;
  int64_t consumed_ STRATA_GUARDED_BY(mu_) = 0;
  int64_t in_flight_ STRATA_GUARDED_BY(mu_) = 0;
  int64_t end_seq_ STRATA_GUARDED_BY(mu_) = -1;
  bool cancelled_ STRATA_GUARDED_BY(mu_) = false;
  std::vector<std::jthread> threads_;  // last member: joined before the rest is destroyed
};

std::unique_ptr<IteratorImpl> MapNode::make_iterator() const {
  const int64_t p = o_.num_parallel_calls == AUTOTUNE ? autotune_threads() : o_.num_parallel_calls;
  if (p <= 1) return make_sequential();
  return std::make_unique<ParallelMapIterator>(input_iter(inputs()[0]), fn_, p,
                                               o_.deterministic.value_or(true));
}

// --- prefetch --------------------------------------------------------------------

// A background std::jthread fills a bounded buffer; errors are buffered in
// order with their type. The destructor wakes and joins the producer.
class PrefetchIterator : public IteratorImpl {
 public:
  PrefetchIterator(std::shared_ptr<IteratorImpl> in, size_t capacity)
      : in_(std::move(in)), capacity_(capacity) {
    thread_ = std::jthread([this] { produce(); });
  }
  ~PrefetchIterator() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      cancelled_ = true;
    }
    cv_.notify_all();
    thread_ = std::jthread();  // joins
  }
  std::optional<Element> next() override {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return !buffer_.empty() || done_; });
    if (buffer_.empty()) return std::nullopt;
    Slot s = std::move(buffer_.front());
    buffer_.pop_front();
    l.unlock();
    cv_.notify_all();
    if (s.error) std::rethrow_exception(s.error);
    return std::move(s.value);
  }

 private:
  struct Slot {
    std::optional<Element> value;
    std::exception_ptr error;
  };
  void produce() {
    while (true) {
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return cancelled_ || buffer_.size() < capacity_; });
        if (cancelled_) return;
      }
      Slot s;
      bool end = false;
      try {
        s.value = in_->next();
      } catch (...) {
        s.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        end = !s.value && !s.error;
        if (end) {
          done_ = true;
        } else {
          buffer_.push_back(std::move(s));
        }
      }
      cv_.notify_all();
      if (end) return;
    }
  }

  std::shared_ptr<IteratorImpl> in_;
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Slot> buffer_ STRATA_GUARDED_BY(mu_);
  bool done_ STRATA_GUARDED_BY(mu_) = false;
  bool cancelled_ STRATA_GUARDED_BY(mu_) = false;
  std::jthread thread_;
};

// TF's autotuner grows the buffer with demand; a fixed buffer this deep keeps a
// training step fed without unbounded memory.
constexpr int64_t kAutotunePrefetch = 16;

// --- interleave ------------------------------------------------------------------

class InterleaveNode : public DatasetNode {
 public:
  InterleaveNode(Dataset input, DatasetFn fn, InterleaveOptions o)
      : DatasetNode(NodeKind::kInterleave, {std::move(input)}),
        fn_(std::move(fn)),
        o_(o),
        spec_cache_(std::make_shared<SpecCache>()) {}
  std::vector<TensorSpec> element_spec() const override {
    // The spec of the dataset fn makes from the first input element.
    std::call_once(spec_cache_->once, [&] {
      auto it = input_iter(inputs()[0]);
      auto e = it->next();
      spec_cache_->spec = e ? fn_(*e).element_spec() : std::vector<TensorSpec>{};
    });
    return spec_cache_->spec;
  }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    struct State {
      std::shared_ptr<IteratorImpl> in;
      std::vector<std::unique_ptr<IteratorImpl>> cycle;
      size_t cycle_index = 0;
      int64_t block_index = 0;
      int64_t num_open = 0;
      bool end_of_input = false;
    };
    const int64_t cl = o_.cycle_length == AUTOTUNE ? autotune_threads() : o_.cycle_length;
    auto st = std::make_shared<State>();
    st->in = input_iter(inputs()[0]);
    st->cycle.resize(static_cast<size_t>(cl));
    const int64_t bl = o_.block_length;
    const int64_t par = o_.num_parallel_calls;
    auto fn = fn_;
    return make_fn_iterator([st, bl, par, fn]() -> std::optional<Element> {
      auto advance_cycle = [&] {
        st->block_index = 0;
        st->cycle_index = (st->cycle_index + 1) % st->cycle.size();
      };
      // TF's InterleaveDatasetOp loop: take block_length elements from each
      // open element in turn; an exhausted slot is refilled from the input.
      while (!st->end_of_input || st->num_open > 0) {
        auto& slot = st->cycle[st->cycle_index];
        if (slot) {
          auto e = slot->next();
          if (e) {
            if (++st->block_index == bl) advance_cycle();
            return e;
          }
          slot.reset();
          --st->num_open;
          advance_cycle();
        } else if (!st->end_of_input) {
          auto in = st->in->next();
          if (!in) {
            st->end_of_input = true;
            continue;
          }
          Dataset d = fn(*in);
          if (par > 1 || par == AUTOTUNE) d = d.prefetch(std::max<int64_t>(bl, 1));
          slot = d.node()->make_iterator();
          ++st->num_open;
        } else {
          advance_cycle();
        }
      }
      return std::nullopt;
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<InterleaveNode>(inputs.at(0), fn_, o_);
  }

 private:
  struct SpecCache {
    std::once_flag once;
    std::vector<TensorSpec> spec;
  };
  DatasetFn fn_;
  InterleaveOptions o_;
  std::shared_ptr<SpecCache> spec_cache_;
};

// --- cache -----------------------------------------------------------------------

struct CacheState {
  std::mutex mu;
  bool complete STRATA_GUARDED_BY(mu) = false;
  std::shared_ptr<const std::vector<Element>> data STRATA_GUARDED_BY(mu);
};

class CacheNode : public DatasetNode {
 public:
  explicit CacheNode(Dataset input)
      : DatasetNode(NodeKind::kCache, {std::move(input)}), state_(std::make_shared<CacheState>()) {}
  std::vector<TensorSpec> element_spec() const override { return inputs()[0].element_spec(); }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    std::shared_ptr<const std::vector<Element>> data;
    {
      std::lock_guard<std::mutex> l(state_->mu);
      if (state_->complete) data = state_->data;
    }
    if (data) {
      auto pos = std::make_shared<size_t>(0);
      return make_fn_iterator([data, pos]() -> std::optional<Element> {
        if (*pos == data->size()) return std::nullopt;
        return (*data)[(*pos)++];
      });
    }
    // Fill: only a fully consumed pass is published, so a partial first
    // iteration leaves the cache empty.
    auto in = input_iter(inputs()[0]);
    auto local = std::make_shared<std::vector<Element>>();
    auto st = state_;
    return make_fn_iterator([in, local, st]() -> std::optional<Element> {
      auto e = in->next();
      if (!e) {
        std::lock_guard<std::mutex> l(st->mu);
        if (!st->complete) {
          st->complete = true;
          st->data = std::make_shared<const std::vector<Element>>(std::move(*local));
        }
        return std::nullopt;
      }
      local->push_back(*e);
      return e;
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<CacheNode>(inputs.at(0));
  }

 private:
  std::shared_ptr<CacheState> state_;
};

class OptionsNode : public DatasetNode {
 public:
  OptionsNode(Dataset input, Options o)
      : DatasetNode(NodeKind::kOptions, {std::move(input)}), o_(o) {}
  std::vector<TensorSpec> element_spec() const override { return inputs()[0].element_spec(); }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    return inputs()[0].node()->make_iterator();
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<OptionsNode>(inputs.at(0), o_);
  }
  const Options* options() const override { return &o_; }

 private:
  Options o_;
};

class PrefetchNode : public DatasetNode {
 public:
  PrefetchNode(Dataset input, int64_t n)
      : DatasetNode(NodeKind::kPrefetch, {std::move(input)}), n_(n) {}
  std::vector<TensorSpec> element_spec() const override { return inputs()[0].element_spec(); }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    if (n_ == 0) return inputs()[0].node()->make_iterator();
    const int64_t cap = n_ == AUTOTUNE ? kAutotunePrefetch : n_;
    return std::make_unique<PrefetchIterator>(input_iter(inputs()[0]), static_cast<size_t>(cap));
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<PrefetchNode>(inputs.at(0), n_);
  }
  int64_t batch_size() const override { return n_; }

 private:
  int64_t n_;
};

// --- generator -------------------------------------------------------------------

void check_against_spec(const Element& e, const std::vector<TensorSpec>& spec, const char* who) {
  STRATA_CHECK_ARG(e.size() == spec.size(), who, ": expected an element of ", spec.size(),
                   " components matching ", specs_string(spec), ", got ", e.size(), " components");
  for (size_t i = 0; i < e.size(); ++i)
    STRATA_CHECK_ARG(spec[i].is_compatible_with(e[i]), who, ": expected component ", i,
                     " to match ", spec[i].to_string(), ", got shape ", e[i].shape(), " dtype ",
                     e[i].dtype());
}

}  // namespace

namespace internal {
Dataset shard_require_non_empty(const Dataset& ds, int64_t num_shards, int64_t index) {
  STRATA_CHECK_ARG(num_shards >= 1, "shard: expected num_shards >= 1, got ", num_shards);
  STRATA_CHECK_ARG(index >= 0 && index < num_shards, "shard: expected 0 <= index < num_shards (",
                   num_shards, "), got index ", index);
  return Dataset(std::make_shared<ShardNode>(ds, num_shards, index, true));
}
}  // namespace internal

// --- Dataset -----------------------------------------------------------------------

Dataset::Dataset(std::shared_ptr<const DatasetNode> node) : node_(std::move(node)) {
  STRATA_INTERNAL_CHECK(node_ != nullptr);
}

std::vector<TensorSpec> Dataset::element_spec() const { return node_->element_spec(); }
NodeKind Dataset::kind() const { return node_->kind(); }
std::vector<Dataset> Dataset::inputs() const { return node_->inputs(); }
Iterator Dataset::iter() const { return Iterator(node_->make_iterator()); }

Options Dataset::options() const {
  Options merged;
  for (const Dataset& in : node_->inputs()) merged = merged.merge(in.options());
  if (const Options* o = node_->options()) merged = merged.merge(*o);
  return merged;
}

Dataset Dataset::from_tensors(const Element& components) {
  auto spec = spec_of(components);
  return make(NodeKind::kTensors, {}, spec, [components](const std::vector<Dataset>&) {
    auto done = std::make_shared<bool>(false);
    return make_fn_iterator([components, done]() -> std::optional<Element> {
      if (*done) return std::nullopt;
      *done = true;
      return components;
    });
  });
}

Dataset Dataset::from_tensor_slices(Element components) {
  STRATA_CHECK_ARG(!components.empty(),
                   "from_tensor_slices: expected at least one tensor, got none");
  for (size_t i = 0; i < components.size(); ++i) {
    STRATA_CHECK_ARG(components[i].rank() >= 1, "from_tensor_slices: expected component ", i,
                     " to have rank >= 1, got shape ", components[i].shape());
    STRATA_CHECK_ARG(
        components[i].shape().dim(0) == components[0].shape().dim(0),
        "from_tensor_slices: expected all components to have the same leading dimension, got ",
        components[0].shape().dim(0), " (component 0, shape ", components[0].shape(), ") and ",
        components[i].shape().dim(0), " (component ", i, ", shape ", components[i].shape(), ")");
  }
  std::vector<TensorSpec> spec;
  for (const Tensor& t : components) spec.emplace_back(t.shape().removed(0), t.dtype());
  const int64_t n = components[0].shape().dim(0);
  std::vector<TensorShape> row_shapes;
  std::vector<int64_t> row_sizes;
  for (const Tensor& t : components) {
    row_shapes.push_back(t.shape().removed(0));
    row_sizes.push_back(row_shapes.back().num_elements());
  }
  return make(NodeKind::kTensorSlices, {}, spec,
              [components, n, row_shapes, row_sizes](const std::vector<Dataset>&) {
                auto i = std::make_shared<int64_t>(0);
                return make_fn_iterator(
                    [components, n, i, row_shapes, row_sizes]() -> std::optional<Element> {
                      if (*i == n) return std::nullopt;
                      Element e;
                      e.reserve(components.size());
                      // One view per component straight onto the shared buffer (a single
                      // handle allocation instead of slice + reshape).
                      for (size_t c = 0; c < components.size(); ++c)
                        e.push_back(Tensor::from_buffer(components[c].buffer(), row_shapes[c],
                                                        components[c].offset() + *i * row_sizes[c],
                                                        &components[c].placement()));
                      ++*i;
                      return e;
                    });
              });
}

Dataset Dataset::range(int64_t stop) { return range(0, stop, 1); }

Dataset Dataset::range(int64_t start, int64_t stop, int64_t step) {
  STRATA_CHECK_ARG(step != 0, "range: expected a non-zero step, got 0");
  return make(NodeKind::kRange, {}, {TensorSpec(TensorShape{}, DType::int64)},
              [start, stop, step](const std::vector<Dataset>&) {
                auto v = std::make_shared<int64_t>(start);
                return make_fn_iterator([v, stop, step]() -> std::optional<Element> {
                  if (step > 0 ? *v >= stop : *v <= stop) return std::nullopt;
                  Element e{constant(*v)};
                  *v += step;
                  return e;
                });
              });
}

Dataset Dataset::from_generator(const GeneratorFactory& factory,
                                const std::vector<TensorSpec>& output_signature) {
  STRATA_CHECK_ARG(factory != nullptr,
                   "from_generator: expected a generator factory, got an empty function");
  return make(NodeKind::kGenerator, {}, output_signature,
              [factory, output_signature](const std::vector<Dataset>&) {
                auto gen = std::make_shared<GeneratorFn>(factory());
                return make_fn_iterator([gen, output_signature]() -> std::optional<Element> {
                  auto e = (*gen)();
                  if (e) check_against_spec(*e, output_signature, "from_generator");
                  return e;
                });
              });
}

Dataset Dataset::zip(const std::vector<Dataset>& datasets) {
  STRATA_CHECK_ARG(!datasets.empty(), "zip: expected at least one dataset, got none");
  std::vector<TensorSpec> spec;
  for (const Dataset& d : datasets) {
    auto s = d.element_spec();
    spec.insert(spec.end(), s.begin(), s.end());
  }
  return make(NodeKind::kZip, datasets, spec, [](const std::vector<Dataset>& inputs) {
    std::vector<std::shared_ptr<IteratorImpl>> its;
    its.reserve(inputs.size());
    for (const Dataset& d : inputs) its.push_back(input_iter(d));
    return make_fn_iterator([its]() -> std::optional<Element> {
      Element out;
      for (const auto& it : its) {
        auto e = it->next();
        if (!e) return std::nullopt;
        out.insert(out.end(), e->begin(), e->end());
      }
      return out;
    });
  });
}

Dataset Dataset::map(MapFn fn, MapOptions o) const {
  STRATA_CHECK_ARG(fn != nullptr, "map: expected a function, got an empty one");
  STRATA_CHECK_ARG(o.num_parallel_calls >= 1 || o.num_parallel_calls == AUTOTUNE,
                   "map: expected num_parallel_calls >= 1 or AUTOTUNE, got ", o.num_parallel_calls);
  return Dataset(std::make_shared<MapNode>(*this, std::move(fn), std::move(o)));
}

Dataset Dataset::filter(const Predicate& pred) const {
  STRATA_CHECK_ARG(pred != nullptr, "filter: expected a predicate, got an empty function");
  return make(NodeKind::kFilter, {*this}, element_spec(),
              [pred](const std::vector<Dataset>& inputs) {
                auto in = input_iter(inputs[0]);
                return make_fn_iterator([in, pred]() -> std::optional<Element> {
                  while (auto e = in->next())
                    if (pred(*e)) return e;
                  return std::nullopt;
                });
              });
}

Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  STRATA_CHECK_ARG(batch_size > 0, "batch: expected batch_size > 0, got ", batch_size);
  return Dataset(std::make_shared<BatchNode>(*this, batch_size, drop_remainder));
}

Dataset Dataset::padded_batch(int64_t batch_size, PaddedBatchOptions o) const {
  STRATA_CHECK_ARG(batch_size > 0, "padded_batch: expected batch_size > 0, got ", batch_size);
  const auto spec = element_spec();
  STRATA_CHECK_ARG(o.padded_shapes.empty() || o.padded_shapes.size() == spec.size(),
                   "padded_batch: expected ", spec.size(), " padded_shapes, got ",
                   o.padded_shapes.size());
  STRATA_CHECK_ARG(o.padding_values.empty() || o.padding_values.size() == spec.size(),
                   "padded_batch: expected ", spec.size(), " padding_values, got ",
                   o.padding_values.size());
  for (size_t i = 0; i < o.padded_shapes.size(); ++i)
    STRATA_CHECK_ARG(o.padded_shapes[i].rank() == spec[i].shape.rank(),
                     "padded_batch: expected padded shape ", i, " of rank ", spec[i].shape.rank(),
                     ", got ", o.padded_shapes[i]);
  for (size_t i = 0; i < o.padding_values.size(); ++i)
    STRATA_CHECK_ARG(
        o.padding_values[i].rank() == 0 && o.padding_values[i].dtype() == spec[i].dtype,
        "padded_batch: expected padding value ", i, " to be a ", spec[i].dtype,
        " scalar, got shape ", o.padding_values[i].shape(), " dtype ", o.padding_values[i].dtype());
  return Dataset(std::make_shared<PaddedBatchNode>(*this, batch_size, std::move(o)));
}

Dataset Dataset::unbatch() const {
  auto spec = element_spec();
  for (size_t i = 0; i < spec.size(); ++i)
    STRATA_CHECK_ARG(!spec[i].shape.has_known_rank() || spec[i].shape.rank() >= 1,
                     "unbatch: expected every component to have rank >= 1, got component ", i,
                     " with shape ", spec[i].shape);
  for (auto& s : spec) s.shape = s.shape.has_known_rank() ? s.shape.removed(0) : s.shape;
  return make(NodeKind::kUnbatch, {*this}, spec, [](const std::vector<Dataset>& inputs) {
    auto in = input_iter(inputs[0]);
    auto cur = std::make_shared<std::optional<Element>>();
    auto pos = std::make_shared<int64_t>(0);
    return make_fn_iterator([in, cur, pos]() -> std::optional<Element> {
      while (!*cur || *pos == (**cur)[0].shape().dim(0)) {
        *cur = in->next();
        *pos = 0;
        if (!*cur) return std::nullopt;
        internal::check_batched(**cur, "unbatch");
      }
      Element e;
      for (const Tensor& t : **cur)
        e.push_back(t.slice_rows(*pos, *pos + 1).reshaped(t.shape().removed(0)));
      ++*pos;
      return e;
    });
  });
}

Dataset Dataset::rebatch(std::vector<int64_t> batch_sizes, bool drop_remainder) const {
  STRATA_CHECK_ARG(!batch_sizes.empty(), "rebatch: expected at least one batch size, got none");
  for (int64_t b : batch_sizes)
    STRATA_CHECK_ARG(b >= 0, "rebatch: expected batch sizes >= 0, got ", batch_sizes);
  internal::check_batched_spec(element_spec());
  return Dataset(std::make_shared<RebatchNode>(*this, std::move(batch_sizes), drop_remainder));
}

Dataset Dataset::rebatch_legacy(int64_t num_replicas) const {
  STRATA_CHECK_ARG(num_replicas >= 1, "rebatch_legacy: expected num_replicas >= 1, got ",
                   num_replicas);
  internal::check_batched_spec(element_spec());
  return Dataset(std::make_shared<LegacyRebatchNode>(*this, num_replicas));
}

Dataset Dataset::shuffle(int64_t buffer_size, ShuffleOptions o) const {
  STRATA_CHECK_ARG(buffer_size > 0, "shuffle: expected buffer_size > 0, got ", buffer_size);
  return Dataset(std::make_shared<ShuffleNode>(*this, buffer_size, o));
}

Dataset Dataset::repeat(int64_t count) const {
  STRATA_CHECK_ARG(count >= -1, "repeat: expected count >= -1, got ", count);
  return make(NodeKind::kRepeat, {*this}, element_spec(),
              [count](const std::vector<Dataset>& inputs) {
                struct State {
                  Dataset ds;
                  std::shared_ptr<IteratorImpl> it;
                  int64_t done = 0;
                  bool produced = false;
                };
                auto st = std::make_shared<State>(State{inputs[0], nullptr, 0, false});
                return make_fn_iterator([st, count]() -> std::optional<Element> {
                  while (count == -1 || st->done < count) {
                    if (!st->it) {
                      st->it = input_iter(st->ds);
                      st->produced = false;
                    }
                    if (auto e = st->it->next()) {
                      st->produced = true;
                      return e;
                    }
                    st->it.reset();
                    ++st->done;
                    // TF: an input that is empty in a pass ends the repetition (no spin).
                    if (!st->produced) return std::nullopt;
                  }
                  return std::nullopt;
                });
              });
}

Dataset Dataset::take(int64_t count) const {
  STRATA_CHECK_ARG(count >= -1, "take: expected count >= -1, got ", count);
  return make(NodeKind::kTake, {*this}, element_spec(),
              [count](const std::vector<Dataset>& inputs) {
                auto in = input_iter(inputs[0]);
                auto n = std::make_shared<int64_t>(0);
                return make_fn_iterator([in, n, count]() -> std::optional<Element> {
                  if (count != -1 && *n >= count) return std::nullopt;
                  ++*n;
                  return in->next();
                });
              });
}

Dataset Dataset::skip(int64_t count) const {
  STRATA_CHECK_ARG(count >= -1, "skip: expected count >= -1, got ", count);
  return make(NodeKind::kSkip, {*this}, element_spec(),
              [count](const std::vector<Dataset>& inputs) {
                auto in = input_iter(inputs[0]);
                auto skipped = std::make_shared<bool>(false);
                return make_fn_iterator([in, skipped, count]() -> std::optional<Element> {
                  if (!*skipped) {
                    *skipped = true;
                    for (int64_t i = 0; count == -1 || i < count; ++i)
                      if (!in->next()) return std::nullopt;
                  }
                  return in->next();
                });
              });
}

Dataset Dataset::shard(int64_t num_shards, int64_t index) const {
  // shard(SHARD_HINT, i) is a placeholder for AutoShardPolicy::HINT; iterating
  // it un-rewritten fails.
  if (num_shards == SHARD_HINT && index >= 0)
    return Dataset(std::make_shared<ShardNode>(*this, num_shards, index, false));
  STRATA_CHECK_ARG(num_shards >= 1, "shard: expected num_shards >= 1, got ", num_shards);
  STRATA_CHECK_ARG(index >= 0 && index < num_shards, "shard: expected 0 <= index < num_shards (",
                   num_shards, "), got index ", index);
  return Dataset(std::make_shared<ShardNode>(*this, num_shards, index, false));
}

Dataset Dataset::interleave(DatasetFn fn, InterleaveOptions o) const {
  STRATA_CHECK_ARG(fn != nullptr, "interleave: expected a function, got an empty one");
  STRATA_CHECK_ARG(o.cycle_length >= 1 || o.cycle_length == AUTOTUNE,
                   "interleave: expected cycle_length >= 1 or AUTOTUNE, got ", o.cycle_length);
  STRATA_CHECK_ARG(o.block_length >= 1, "interleave: expected block_length >= 1, got ",
                   o.block_length);
  STRATA_CHECK_ARG(o.num_parallel_calls >= 1 || o.num_parallel_calls == AUTOTUNE,
                   "interleave: expected num_parallel_calls >= 1 or AUTOTUNE, got ",
                   o.num_parallel_calls);
  return Dataset(std::make_shared<InterleaveNode>(*this, std::move(fn), o));
}

Dataset Dataset::concatenate(const Dataset& other) const {
  const auto a = element_spec(), b = other.element_spec();
  STRATA_CHECK_ARG(a.size() == b.size(),
                   "concatenate: expected datasets with compatible element specs, got ",
                   specs_string(a), " and ", specs_string(b));
  std::vector<TensorSpec> spec;
  for (size_t i = 0; i < a.size(); ++i) {
    auto s = most_specific_compatible(a[i], b[i]);
    STRATA_CHECK_ARG(s.has_value(),
                     "concatenate: expected datasets with compatible element specs, got ",
                     specs_string(a), " and ", specs_string(b));
    spec.push_back(*s);
  }
  return make(NodeKind::kConcatenate, {*this, other}, spec, [](const std::vector<Dataset>& inputs) {
    auto first = input_iter(inputs[0]);
    auto second = std::make_shared<std::shared_ptr<IteratorImpl>>();
    const Dataset& other = inputs[1];
    return make_fn_iterator([first, second, other]() -> std::optional<Element> {
      if (!*second) {
        if (auto e = first->next()) return e;
        *second = input_iter(other);
      }
      return (*second)->next();
    });
  });
}

Dataset Dataset::enumerate(int64_t start) const {
  auto spec = element_spec();
  spec.insert(spec.begin(), TensorSpec(TensorShape{}, DType::int64));
  return make(NodeKind::kEnumerate, {*this}, spec, [start](const std::vector<Dataset>& inputs) {
    auto in = input_iter(inputs[0]);
    auto i = std::make_shared<int64_t>(start);
    return make_fn_iterator([in, i]() -> std::optional<Element> {
      auto e = in->next();
      if (!e) return std::nullopt;
      e->insert(e->begin(), constant((*i)++));
      return e;
    });
  });
}

Dataset Dataset::cache() const { return Dataset(std::make_shared<CacheNode>(*this)); }

Dataset Dataset::prefetch(int64_t buffer_size) const {
  STRATA_CHECK_ARG(buffer_size >= 0 || buffer_size == AUTOTUNE,
                   "prefetch: expected buffer_size >= 0 or AUTOTUNE, got ", buffer_size);
  return Dataset(std::make_shared<PrefetchNode>(*this, buffer_size));
}

Dataset Dataset::with_options(const Options& options) const {
  return Dataset(std::make_shared<OptionsNode>(*this, options));
}

}  // namespace strata::data
