#pragma once
// Tensor creation, shape and indexing ops (tf.zeros, tf.reshape, tf.concat, ...).
//
//   Tensor z = strata::zeros({2, 3});                     // float32 by default
//   Tensor r = strata::range(0, 10, 2);                   // int64 [0 2 4 6 8]
//   Tensor t = strata::transpose(x, {1, 0});
//   auto parts = strata::split(x, 3, /*axis=*/1);         // equal parts
//   Tensor g = strata::gather(params, indices, /*axis=*/0);
//   Tensor h = strata::one_hot(labels, 10);
//
// Results are dense, freshly computed tensors (transpose and slice copy;
// reshape and expand_dims share the buffer). Errors raise InvalidArgumentError
// naming the op, the shapes and the offending value (an index out of range
// names the index and its position).

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "strata/core/tensor.h"

namespace strata {

// --- creation ---
Tensor zeros(const TensorShape& shape, DType dtype = DType::float32);
Tensor ones(const TensorShape& shape, DType dtype = DType::float32);
Tensor fill(const TensorShape& shape, const Tensor& value);  // value: a scalar
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
// [start, limit) by delta, int64 (tf.range with integer arguments).
Tensor range(int64_t start, int64_t limit, int64_t delta = 1);
Tensor range(int64_t limit);

// --- shape ---
// `shape` may contain one -1, inferred from the element count.
Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape);
Tensor expand_dims(const Tensor& x, int64_t axis);
Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axis = {});
// perm empty = reverse the dimensions, as TF.
Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm = {});
Tensor broadcast_to(const Tensor& x, const TensorShape& shape);
Tensor concat(const std::vector<Tensor>& values, int64_t axis);
Tensor stack(const std::vector<Tensor>& values, int64_t axis = 0);
std::vector<Tensor> unstack(const Tensor& x, int64_t axis = 0);
// Splits into `num_splits` equal parts along axis (InvalidArgumentError if not divisible).
std::vector<Tensor> split(const Tensor& x, int64_t num_splits, int64_t axis = 0);
// Splits into parts of the given sizes (one may be -1).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& size_splits, int64_t axis);
// tf.slice: size[i] == -1 takes the rest of dimension i.
Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size);
// x[begin:end:strides] per dimension, Python slice semantics (negative indices and steps).
Tensor strided_slice(const Tensor& x, const std::vector<int64_t>& begin,
                     const std::vector<int64_t>& end, const std::vector<int64_t>& strides = {});
// paddings: one {before, after} pair per dimension.
Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& paddings,
           double constant_value = 0.0);
Tensor tile(const Tensor& x, const std::vector<int64_t>& multiples);

// --- indexing ---
Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis = 0);
Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments);
struct OneHotOptions {
  double on_value = 1.0;
  double off_value = 0.0;
  int64_t axis = -1;
  DType dtype = DType::float32;
};
// Indices outside [0, depth) give all-off rows, as TF.
Tensor one_hot(const Tensor& indices, int64_t depth, const OneHotOptions& options = {});

namespace internal {
// reshape to dimensions the caller already holds (a TensorShape's dims()),
// with no std::vector to fill: the gradients reshape so on every step.
Tensor reshape_to(const Tensor& x, std::span<const int64_t> shape);
}  // namespace internal

}  // namespace strata
