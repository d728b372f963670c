#pragma once
// Layout and indexing kernels: strided copies (transpose, slice, broadcast,
// pad), concat, gather, segment sums, one_hot; and GEMM (OpenBLAS).
// Arguments are validated and normalised by strata/ops; these kernels trust
// them except for data-dependent checks (index ranges). Thread-safe.

#include <cstdint>
#include <span>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::kernels {

// out[i0..ik] = x[offset + sum(i_d * strides[d])] for every index of `out_shape`
// (strides in elements, may be 0 or negative). Works for every dtype.
Tensor strided_copy(const Tensor& x, const TensorShape& out_shape, std::span<const int64_t> strides,
                    int64_t offset);
Tensor transpose(const Tensor& x, std::span<const int64_t> perm);
// `shape` must be a broadcast of x's shape.
Tensor broadcast_to(const Tensor& x, const TensorShape& shape);
// `begin`/`strides` normalised, `out_shape` the slice's shape.
Tensor strided_slice(const Tensor& x, const std::vector<int64_t>& begin,
                     const std::vector<int64_t>& strides, const TensorShape& out_shape);
// paddings: rank x 2 flattened, non-negative.
Tensor pad(const Tensor& x, const std::vector<int64_t>& paddings, double constant_value);
// Equal dtypes and ranks, equal dims except `axis`.
Tensor concat(const std::vector<Tensor>& values, int axis);
// InvalidArgumentError naming the index and its position when out of range.
Tensor gather(const Tensor& params, const Tensor& indices, int axis);
Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments);
Tensor one_hot(const Tensor& indices, int64_t depth, double on_value, double off_value, int axis,
               DType dtype);
// [..., M, K] x [..., K, N] (after the transposes); ranks >= 2, the batch dims
// (all but the last two) broadcast as NumPy (BatchMatMulV2), K already checked.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b);

}  // namespace strata::kernels
