#pragma once
// Row-copy helpers for batching (internal). Numeric rows are memcpy'd;
// strings are copied element by element.

#include <vector>

#include "strata/data/dataset.h"

namespace strata::data::internal {

// Stacks rows (all with equal component shapes and dtypes) into one element
// with a new leading dimension. InvalidArgumentError naming `who`, the element
// index and both shapes on a mismatch.
Element stack_elements(const std::vector<Element>& rows, const char* who);
// Concatenates elements along dim 0 (trailing shapes must agree).
Element concat_elements(const std::vector<Element>& parts);
// padded_batch: pads each component to padded_shapes (-1 = longest) with
// padding_values (empty = 0 / "") and stacks.
Element pad_and_stack(const std::vector<Element>& rows,
                      const std::vector<TensorShape>& padded_shapes,
                      const std::vector<Tensor>& padding_values);
// InvalidArgumentError unless every component has rank >= 1 and all share the
// leading dimension.
void check_batched(const Element& e, const char* who);
// TF's rebatch check on the spec: no scalar components.
void check_batched_spec(const std::vector<TensorSpec>& spec);

}  // namespace strata::data::internal
