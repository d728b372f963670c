#pragma once
// Element-wise reduction kernels shared by the Collectives implementations.
// Plain loops over contiguous elements that the compiler vectorises; processed
// in cache-sized blocks so that an N-way reduction reads each input once and
// writes the output once (memory-bandwidth bound).
//
//   const void* ins[] = {a.raw_data(), b.raw_data()};
//   reduce_n(DType::float32, ReduceOp::MEAN, out, ins, n, /*mean_divisor=*/2);
//
// Supported dtypes: float32, float64, int32, int64 (InternalError otherwise;
// callers validate first). Integer SUM wraps around; integer MEAN truncates.
// Thread-safe (pure functions); callers give disjoint output ranges to threads.

#include <cstdint>
#include <span>

#include "strata/collective/collectives.h"
#include "strata/core/dtype.h"
#include "strata/core/tensor.h"

namespace strata::collective::internal {

// True for the dtypes reductions support.
bool is_reducible(DType dtype) noexcept;

// out[i] = ins[0][i] op ins[1][i] op ... for i < n; MEAN additionally divides
// by `mean_divisor`. `out` must not overlap any input.
void reduce_n(DType dtype, ReduceOp op, void* out, std::span<const void* const> ins, int64_t n,
              int64_t mean_divisor);

// out[i] = a[i] op b[i] with op SUM (also for MEAN), MAX or MIN; `out` may
// equal `a` or `b` (Gloo's reduction-function contract).
void reduce_pair(DType dtype, ReduceOp op, void* out, const void* a, const void* b, int64_t n);

// data[i] /= divisor in place (finishing a MEAN computed as a SUM).
void divide_in_place(DType dtype, void* data, int64_t n, int64_t divisor);

// reduce_scatter by way of an all-reduce: rank `rank`'s block of dimension 0
// of the all-reduced `full` (InvalidArgumentError naming `who` when dimension
// 0 does not divide by `size`; every rank reaches the check with the same,
// already matched, shape).
Tensor block_of_rank(const Tensor& full, int rank, int size, const char* who);

}  // namespace strata::collective::internal
