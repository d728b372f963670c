#pragma once
// strata::data: tf.data input pipelines.
//
// A Dataset is an immutable value handle over a graph of dataset nodes; each
// transformation returns a new Dataset whose node points at its input(s).
// Iterating creates an iterator (pull model) that owns the per-iteration state
// (buffers, background threads).
//
//   using strata::data::Dataset;
//   auto ds = Dataset::from_tensor_slices({x, y})          // x: [N, 784], y: [N]
//                 .shuffle(1024, {.seed = 7})
//                 .batch(64, /*drop_remainder=*/true)
//                 .prefetch(strata::data::AUTOTUNE);
//   ds.element_spec();                 // {[64, 784] float32, [64] int64}
//   for (const strata::data::Element& e : ds) { train_step(e[0], e[1]); }
//   auto it = ds.iter();
//   auto first = it.get_next();        // OutOfRangeError at the end
//
// Elements are flat: an Element is a std::vector<Tensor> (one entry per
// component); zip concatenates the components of its inputs. An element may
// name its components, as TensorFlow's dict elements do:
//
//   auto ds = Dataset::from_tensor_slices({{"feature", x}, {"label", y}})
//                 .map([](const Element& d) -> Element {
//                   return {{"feature", d["feature"] / 255.f}, {"label", d["label"]}};
//                 })
//                 .batch(4);
//   for (const Element& e : ds) { e["feature"]; e["label"]; e[0]; }
//
// Named components are kept in sorted name order, the order tf.nest flattens a
// dict in, so e[0] is the first name's tensor. Sources, map, batch, unbatch,
// rebatch, padded_batch and the pass-through transformations (shuffle, repeat,
// take, skip, shard, filter, cache, prefetch, concatenate, interleave) keep
// the names; zip and enumerate, whose TensorFlow results nest the input's
// structure in a tuple, raise UnimplementedError for named elements.
//
// Thread-safety: Dataset is immutable (any number of threads may iterate the
// same Dataset); an Iterator is used by one thread at a time. Destroying an
// Iterator stops and joins its background threads (prefetch, parallel map)
// promptly; errors thrown by user functions (map, filter, generator,
// interleave) reach the consumer with their dynamic type, in element order.
//
// Graph inspection and rewrites for the distribute layer live in
// strata/data/graph.h.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/core/tensor_spec.h"
#include "strata/data/iterator_state.h"

namespace strata::data {

// One dataset element: its components (a std::vector<Tensor>) and, for
// TensorFlow's dict elements, their names (see the top of this file). Copies
// share the names. Not thread-safe to mutate; const access is.
class Element : public std::vector<Tensor> {
 public:
  using std::vector<Tensor>::vector;
  using std::vector<Tensor>::operator[];
  Element() = default;
  // Positional components (a tuple element).
  Element(std::vector<Tensor> components)  // NOLINT(google-explicit-constructor)
      : std::vector<Tensor>(std::move(components)) {}
  // Named components (a dict element), in name order:
  // `Element{{"feature", x}, {"label", y}}`, or the map tf.io.parse_example returns.
  Element(const std::map<std::string, Tensor>& named);  // NOLINT(google-explicit-constructor)
  Element(std::initializer_list<std::pair<const std::string, Tensor>> named)
      : Element(std::map<std::string, Tensor>(named)) {}

  // The component named `name` (TF: element["name"]). InvalidArgumentError (TF's
  // KeyError) naming the element's names when there is none of that name.
  const Tensor& operator[](std::string_view name) const;
  Tensor& operator[](std::string_view name);

  // The components' names in component order; empty for positional components.
  const std::vector<std::string>& names() const noexcept;
  bool has_names() const noexcept { return names_ != nullptr; }
  // The components by name (TF's dict). InvalidArgumentError for positional ones.
  std::map<std::string, Tensor> as_dict() const;
  // Gives this element the names of `like` (none when `like` has none); the
  // component counts must agree (InvalidArgumentError otherwise). Returns *this.
  Element& with_names_of(const Element& like);

 private:
  size_t index_of(std::string_view name) const;
  std::shared_ptr<const std::vector<std::string>> names_;
};

// tf.data.AUTOTUNE: let the runtime choose a parallelism / buffer size.
inline constexpr int64_t AUTOTUNE = -1;
// tf.data.experimental.SHARD_HINT: the num_shards placeholder rewritten by
// AutoShardPolicy::HINT.
inline constexpr int64_t SHARD_HINT = -1;
// The count of repeat() / take() / skip() meaning "all" / "forever".
inline constexpr int64_t kInfinite = -1;
// tf.data.INFINITE_CARDINALITY / UNKNOWN_CARDINALITY: what cardinality()
// returns for an endless dataset and for one whose size it cannot tell.
inline constexpr int64_t INFINITE_CARDINALITY = -1;
inline constexpr int64_t UNKNOWN_CARDINALITY = -2;

// tf.data.experimental.AutoShardPolicy; values equal TF's enum.
enum class AutoShardPolicy : int { OFF = -1, AUTO = 0, FILE = 1, DATA = 2, HINT = 3 };
const char* auto_shard_policy_name(AutoShardPolicy p) noexcept;

struct DistributeOptions {
  // Unset means TF's default, AUTO.
  std::optional<AutoShardPolicy> auto_shard_policy = std::nullopt;
  std::optional<int> num_devices = std::nullopt;
  AutoShardPolicy policy() const { return auto_shard_policy.value_or(AutoShardPolicy::AUTO); }
};

// tf.data.experimental.ExternalStatePolicy: what saving an iterator's position
// (a checkpoint) does with a transformation whose state it cannot save (a
// from_generator source): FAIL raises FailedPreconditionError naming it, WARN
// logs a warning and IGNORE says nothing, and both save the rest (that
// transformation starts over when restored). Values equal TF's enum.
enum class ExternalStatePolicy : int { WARN = 0, IGNORE = 1, FAIL = 2 };

// tf.data.Options. Unset fields take TF's defaults. Options attached at several
// points of a graph are merged as TF merges them: a field set downstream
// overrides the same field set upstream.
struct Options {
  std::optional<bool> deterministic = std::nullopt;  // TF default: true
  DistributeOptions experimental_distribute = {};
  // Unset means FAIL, what TF's iterator checkpointing does by default.
  std::optional<ExternalStatePolicy> experimental_external_state_policy = std::nullopt;
  // This merged with `other` (other's set fields win).
  Options merge(const Options& other) const;
};

// The kinds of dataset nodes; graph.h gives their parameters.
enum class NodeKind {
  kTensors,
  kTensorSlices,
  kRange,
  kGenerator,
  kListFiles,
  kTFRecord,
  kTextLine,
  kFixedLengthRecord,
  kMap,
  kFilter,
  kBatch,
  kPaddedBatch,
  kUnbatch,
  kRebatch,
  kLegacyRebatch,
  kShuffle,
  kRepeat,
  kTake,
  kSkip,
  kShard,
  kInterleave,
  kZip,
  kConcatenate,
  kEnumerate,
  kCache,
  kPrefetch,
  kOptions,
};
const char* node_kind_name(NodeKind k) noexcept;

class Dataset;
class DatasetNode;

namespace internal {
class StateWriter;
class StateReader;
// Per-iteration state of one node. next() returns std::nullopt at the end and
// keeps returning it afterwards. One thread at a time.
class IteratorImpl {
 public:
  virtual ~IteratorImpl() = default;
  virtual std::optional<Element> next() = 0;
  // Writes this iterator's position (strata/data/internal/state_io.h) as if
  // `pushed_back` -- elements next() returned that nobody downstream used yet,
  // oldest first -- had not been returned. Saving leaves the iteration as it
  // was. UnimplementedError naming the transformation by default.
  virtual void save(StateWriter& w, std::vector<Element> pushed_back);
  // Continues from what save() wrote. The iterator was made by the same node.
  virtual void restore(StateReader& r);
  // Starts over from the first element, as a fresh iterator of the same node
  // would, without making one (repeat() starts each pass so); false when this
  // iterator cannot, and then it is left as it was.
  virtual bool rewind() { return false; }
  // The node kind that made this iterator (set once by whoever makes it).
  void set_kind(NodeKind kind) {
    if (!kind_) kind_ = kind;
  }
  const char* kind_name() const;

 private:
  std::optional<NodeKind> kind_;
};
}  // namespace internal

// One iteration over a Dataset. Move-only; one thread at a time. Destroying it
// stops and joins every background thread of the pipeline (a train::Checkpoint
// that tracks the iterator shares them: the last of the two stops them).
//
// Checkpointing (tf.data's iterator saving): save_state() gives the position
// as one tensor and restore_state() continues from it, also in a fresh
// iterator of the same pipeline built by another process. Saved: range,
// from_tensors, from_tensor_slices, the file readers (file and record
// number), list_files, map (sequential and parallel; the function is taken
// to be pure, as TF assumes a traced function without stateful ops is),
// filter, batch, padded_batch, unbatch, rebatch, shuffle (buffer, seeds and
// random stream), repeat, take, skip, shard, zip, enumerate, concatenate,
// interleave (open elements re-made from their saved input elements), cache
// (the elements cached so far) and prefetch (its buffer is handed back to the
// input). from_generator has external state (ExternalStatePolicy).
class Iterator {
 public:
  explicit Iterator(std::unique_ptr<internal::IteratorImpl> impl);
  // An iteration over `ds` (Dataset::iter()): its options give the external
  // state policy, and restore_state() restarts from a fresh iteration of it.
  Iterator(const Dataset& ds, std::unique_ptr<internal::IteratorImpl> impl);
  Iterator(Iterator&&) noexcept = default;
  Iterator& operator=(Iterator&&) noexcept = default;

  // The next element; OutOfRangeError("End of sequence") at the end.
  Element get_next();
  // The next element or std::nullopt at the end.
  std::optional<Element> get_next_as_optional() { return next(); }
  std::optional<Element> next();

  // See CheckpointableIterator (strata/data/iterator_state.h).
  Tensor save_state();
  void restore_state(const Tensor& state);
  // The shared position a train::Checkpoint saves and restores.
  std::shared_ptr<CheckpointableIterator> checkpointable() const;

  struct Core;  // the shared state (dataset.cc's)

 private:
  std::shared_ptr<Core> core_;
};

// Range-for support: `for (const Element& e : ds)`.
class ElementIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = Element;
  using difference_type = std::ptrdiff_t;
  using pointer = const Element*;
  using reference = const Element&;

  ElementIterator() = default;
  explicit ElementIterator(Iterator it);
  const Element& operator*() const { return *current_; }
  const Element* operator->() const { return &*current_; }
  ElementIterator& operator++();
  void operator++(int) { ++*this; }
  bool operator==(const ElementIterator& o) const { return done() == o.done(); }

 private:
  bool done() const { return !current_.has_value(); }
  std::shared_ptr<Iterator> it_;
  std::optional<Element> current_;
};

struct MapOptions {
  // 1 = sequential (TF's default None); AUTOTUNE = one worker per CPU core.
  int64_t num_parallel_calls = 1;
  // Unset = true (TF: options.deterministic). false lets a parallel map return
  // results in completion order.
  std::optional<bool> deterministic = std::nullopt;
  // The output's element spec; when empty it is taken from the first output
  // element (TF traces the function instead), see Dataset::element_spec().
  std::vector<TensorSpec> output_signature = {};
};

struct ShuffleOptions {
  std::optional<uint64_t> seed = std::nullopt;  // unset: nondeterministic
  bool reshuffle_each_iteration = true;         // TF default
};

struct InterleaveOptions {
  int64_t cycle_length = AUTOTUNE;  // TF default: number of CPU cores
  int64_t block_length = 1;
  // > 1 or AUTOTUNE: each open input element is prefetched by a background
  // thread; the output order is the same as the sequential one.
  int64_t num_parallel_calls = 1;
  std::optional<bool> deterministic = std::nullopt;
};

struct ListFilesOptions {
  std::optional<bool> shuffle = std::nullopt;  // unset = TF default true; false gives sorted order
  std::optional<uint64_t> seed = std::nullopt;
};

struct PaddedBatchOptions {
  // Per component; -1 dims pad to the longest in the batch. Empty = all -1.
  std::vector<TensorShape> padded_shapes = {};
  // Per component scalar of the component's dtype. Empty = 0 / "".
  std::vector<Tensor> padding_values = {};
  bool drop_remainder = false;
};

struct TFRecordOptions {
  std::string compression_type = "";  // "", "ZLIB" or "GZIP"
  int64_t buffer_size = 256 * 1024;   // bytes
};

using MapFn = std::function<Element(const Element&)>;
using Predicate = std::function<bool(const Element&)>;
using DatasetFn = std::function<Dataset(const Element&)>;
// A generator: each call returns the next element or std::nullopt at the end.
using GeneratorFn = std::function<std::optional<Element>()>;
// Called once per iteration to start a fresh generator.
using GeneratorFactory = std::function<GeneratorFn()>;

class Dataset {
 public:
  explicit Dataset(std::shared_ptr<const DatasetNode> node);

  // --- sources -------------------------------------------------------------
  // One element holding the given tensors.
  static Dataset from_tensors(const Element& components);
  // Slices along dim 0; all components must have the same leading dimension.
  static Dataset from_tensor_slices(Element components);
  static Dataset range(int64_t stop);
  static Dataset range(int64_t start, int64_t stop, int64_t step = 1);
  // Files matching the glob pattern(s), deduplicated; sorted unless shuffled.
  // InvalidArgumentError "No files matched pattern: ..." when none match.
  static Dataset list_files(const std::vector<std::string>& patterns, ListFilesOptions o = {});
  static Dataset list_files(const std::string& pattern, ListFilesOptions o = {}) {
    return list_files(std::vector<std::string>{pattern}, o);
  }
  // Elements from a C++ callable; each element is checked against the signature.
  static Dataset from_generator(const GeneratorFactory& factory,
                                const std::vector<TensorSpec>& output_signature);
  static Dataset zip(const std::vector<Dataset>& datasets);

  // --- transformations -----------------------------------------------------
  Dataset map(MapFn fn, MapOptions o = {}) const;
  Dataset filter(const Predicate& pred) const;
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  Dataset padded_batch(int64_t batch_size, PaddedBatchOptions o = {}) const;
  Dataset unbatch() const;
  // RebatchDatasetV2: output k takes the next batch_sizes[k % n] rows of the
  // flattened input stream (spec §5.3a).
  Dataset rebatch(std::vector<int64_t> batch_sizes, bool drop_remainder = false) const;
  // RebatchDataset: every input batch cut into num_replicas pieces of
  // ceil(b / num_replicas) rows (spec §5.3b).
  Dataset rebatch_legacy(int64_t num_replicas) const;
  Dataset shuffle(int64_t buffer_size, ShuffleOptions o = {}) const;
  Dataset repeat(int64_t count = kInfinite) const;
  Dataset take(int64_t count) const;
  Dataset skip(int64_t count) const;
  Dataset shard(int64_t num_shards, int64_t index) const;
  Dataset interleave(DatasetFn fn, InterleaveOptions o = {}) const;
  Dataset flat_map(DatasetFn fn) const {
    return interleave(std::move(fn), {.cycle_length = 1, .block_length = 1});
  }
  Dataset concatenate(const Dataset& other) const;
  Dataset enumerate(int64_t start = 0) const;
  Dataset cache() const;
  Dataset prefetch(int64_t buffer_size) const;
  Dataset with_options(const Options& options) const;

  // --- inspection ----------------------------------------------------------
  // One TensorSpec per component; -1 for unknown dims.
  std::vector<TensorSpec> element_spec() const;
  // tf.data.Dataset.cardinality: the number of elements, computed from the
  // graph as TF does (sources, batch, repeat, take, skip, shard, zip,
  // concatenate, ... propagate it); INFINITE_CARDINALITY for an endless
  // dataset, UNKNOWN_CARDINALITY where it depends on the data (filter,
  // unbatch, interleave, generators, file readers, rebatch).
  int64_t cardinality() const;
  // The options of the whole graph, merged (downstream wins).
  Options options() const;
  NodeKind kind() const;
  std::vector<Dataset> inputs() const;
  const std::shared_ptr<const DatasetNode>& node() const { return node_; }

  // --- iteration -----------------------------------------------------------
  Iterator iter() const;
  ElementIterator begin() const { return ElementIterator(iter()); }
  ElementIterator end() const { return ElementIterator(); }

 private:
  std::shared_ptr<const DatasetNode> node_;
};

// File readers. `files` are read in order; each element is one scalar string.
// TFRecordDataset verifies both CRCs (DataLossError naming file and offset).
Dataset TFRecordDataset(std::vector<std::string> files, const TFRecordOptions& o = {});
Dataset TextLineDataset(std::vector<std::string> files);
Dataset FixedLengthRecordDataset(std::vector<std::string> files, int64_t record_bytes,
                                 int64_t header_bytes = 0, int64_t footer_bytes = 0);

}  // namespace strata::data
