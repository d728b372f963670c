#pragma once
// Building blocks shared by the transformation files (internal): a node whose
// iterator is a lambda over captured state, so a simple transformation needs no
// class of its own, and the small spec helpers their checks and messages use.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/data/dataset.h"

namespace strata::data::internal {

// What map and interleave use for AUTOTUNE: the machine's hardware threads
// (4 when the standard library cannot tell).
int64_t autotune_threads();

// The spec of an element: each component's exact shape and dtype.
std::vector<TensorSpec> spec_of(const Element& e);
// "(spec, spec, ...)" for error messages.
std::string specs_string(const std::vector<TensorSpec>& specs);

class StateWriter;
class StateReader;

// Saves the state a next-function owns. `pushed_back` holds the elements to
// be returned before the function is called again, oldest first; the saver may
// take some back into its own state (rebatch does) and remove them; the rest
// are saved beside it and returned first after a restore.
using SaveFn = std::function<void(StateWriter& w, std::vector<Element>& pushed_back)>;
using RestoreFn = std::function<void(StateReader& r)>;

// Returns the state a next-function owns to where a fresh iterator starts.
using RewindFn = std::function<void()>;

// An iterator whose next() calls `fn`; `fn` owns the per-iteration state.
// Without `save` and `restore` its position cannot be saved (UnimplementedError).
// `restore_without` (a transformation a pipeline may lack, as a distributed
// pipeline under one replica lacks the rebatch): called instead of `restore`
// when the state at this prefix is another transformation's, that of a
// pipeline saved without this one; it restores the input at this prefix.
// With `rewind` the iterator can start over (IteratorImpl::rewind).
std::unique_ptr<IteratorImpl> make_fn_iterator(std::function<std::optional<Element>()> fn,
                                               SaveFn save = {}, RestoreFn restore = {},
                                               RestoreFn restore_without = {},
                                               RewindFn rewind = {});
// A fresh iterator over `d` (its kind set).
std::unique_ptr<IteratorImpl> make_iter(const Dataset& d);
// A fresh iterator over `d`, shared so that lambdas can capture it.
std::shared_ptr<IteratorImpl> input_iter(const Dataset& d);

// Creates the per-iteration iterator of a node from the node's inputs.
using IterFactory =
    std::function<std::unique_ptr<IteratorImpl>(const std::vector<Dataset>& inputs)>;
// The cardinality of a node from its inputs.
using CardinalityFn = std::function<int64_t(const std::vector<Dataset>& inputs)>;
// A dataset of `kind` over `inputs` with the fixed element spec `spec`, whose
// iterators `f` creates and whose cardinality `card` computes (unknown when
// empty). Immutable; with_inputs() reuses `f` and `card`.
Dataset make_dataset(NodeKind kind, std::vector<Dataset> inputs, std::vector<TensorSpec> spec,
                     IterFactory f, CardinalityFn card = {});

// TF's cardinality rules (n: the input's cardinality, possibly
// INFINITE_CARDINALITY or UNKNOWN_CARDINALITY).
int64_t repeat_cardinality(int64_t n, int64_t count);
int64_t take_cardinality(int64_t n, int64_t count);
int64_t skip_cardinality(int64_t n, int64_t count);
int64_t batch_cardinality(int64_t n, int64_t batch_size, bool drop_remainder);
int64_t shard_cardinality(int64_t n, int64_t num_shards, int64_t index);
int64_t range_cardinality(int64_t start, int64_t stop, int64_t step);
int64_t zip_cardinality(const std::vector<Dataset>& inputs);
int64_t concatenate_cardinality(int64_t a, int64_t b);

}  // namespace strata::data::internal
