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

// An iterator whose next() calls `fn`; `fn` owns the per-iteration state.
std::unique_ptr<IteratorImpl> make_fn_iterator(std::function<std::optional<Element>()> fn);
// A fresh iterator over `d`, shared so that lambdas can capture it.
std::shared_ptr<IteratorImpl> input_iter(const Dataset& d);

// Creates the per-iteration iterator of a node from the node's inputs.
using IterFactory =
    std::function<std::unique_ptr<IteratorImpl>(const std::vector<Dataset>& inputs)>;
// A dataset of `kind` over `inputs` with the fixed element spec `spec`, whose
// iterators `f` creates. Immutable; with_inputs() reuses `f`.
Dataset make_dataset(NodeKind kind, std::vector<Dataset> inputs, std::vector<TensorSpec> spec,
                     IterFactory f);

}  // namespace strata::data::internal
