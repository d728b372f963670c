#pragma once
// Helpers shared by the kernel .cc files (not part of the public API).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "strata/base/denormal.h"
#include "strata/base/errors.h"
#include "strata/core/allocator.h"
#include "strata/core/config.h"
#include "strata/core/device.h"
#include "strata/core/dtype.h"
#include "strata/core/tensor.h"

namespace strata::kernels::internal {

// Elements per parallel_for chunk for cheap element-wise work: big enough that
// the hand-off to a worker (~microseconds) is amortised.
inline constexpr int64_t kElementwiseGrain = 32768;

// Under config::enable_op_determinism() parallel_for cuts [0, n) into at
// most this many chunks, of at least min_chunk elements, whatever the pool.
inline constexpr int64_t kDeterministicChunks = 64;
// ... and a GEMM is split as if the device had this many threads.
inline constexpr int kDeterministicGemmThreads = 8;

// Runs fn over [0, n) on the current device's pool. The pool decides the
// chunks from its thread count; under config::enable_op_determinism() they
// depend on n and min_chunk alone (fn is called with the same ranges on any
// pool, so a kernel whose arithmetic depends on where a range starts or ends,
// Eigen's vectorised head and tail, gives the same bits). The calling
// thread's chunks run with denormals flushed to zero, as the pool's threads
// do (TensorFlow flushes them around every kernel it runs): a kernel's result
// does not depend on which thread computed which chunk.
template <typename Fn>
void parallel_for(int64_t n, int64_t min_chunk, Fn&& fn) {
  if (n <= 0) return;
  const ScopedFlushDenormal flush;
  ThreadPool& pool = current_device().thread_pool();
  if (config::is_op_determinism_enabled()) {
    const int64_t chunk =
        std::max({min_chunk, int64_t{1}, (n + kDeterministicChunks - 1) / kDeterministicChunks});
    const int64_t chunks = (n + chunk - 1) / chunk;
    const auto run = [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) fn(c * chunk, std::min(n, (c + 1) * chunk));
    };
    if (pool.num_threads() == 1 || chunks == 1) {
      run(0, chunks);
    } else {
      pool.parallel_for(chunks, 1, std::ref(run));
    }
    return;
  }
  if (pool.num_threads() == 1 || n <= min_chunk) {
    fn(int64_t{0}, n);
    return;
  }
  // By reference: a std::function holds a reference_wrapper inline, where a
  // copy of a capturing lambda would cost a heap allocation per call.
  pool.parallel_for(n, min_chunk, std::ref(fn));
}

// The threads a kernel splits its work for: the device's, or under
// config::enable_op_determinism() a fixed count (the split then does not
// depend on the device).
inline int num_threads() {
  return config::is_op_determinism_enabled() ? kDeterministicGemmThreads
                                             : current_device().thread_pool().num_threads();
}

// Frees a scratch block (below) back to the tensor buffer cache.
struct ScratchDeleter {
  size_t bytes = 0;
  void operator()(void* p) const noexcept { CachingAllocator::global().deallocate(p, bytes); }
};
template <typename T>
using ScratchPtr = std::unique_ptr<T[], ScratchDeleter>;

// Uninitialised, 64-byte aligned working memory for n (>= 1) elements, taken
// from the tensor buffer cache (strata/core/allocator.h): a kernel that needs
// the same scratch at every training step (im2col columns, partial sums) gets
// the same block back, with no page faults and no call into the C heap.
template <typename T>
ScratchPtr<T> scratch(int64_t n) {
  static_assert(std::is_trivially_default_constructible_v<T> &&
                std::is_trivially_destructible_v<T>);
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T);
  return ScratchPtr<T>(static_cast<T*>(CachingAllocator::global().allocate(bytes)),
                       ScratchDeleter{bytes});
}

// Calls fn(T{}) for every dtype, strings included (copy-only kernels).
template <typename Fn>
decltype(auto) dispatch_all(DType d, Fn&& fn) {
  if (d == DType::string) return fn(std::string{});
  return dispatch_numeric(d, std::forward<Fn>(fn));
}

// Calls fn(T{}) for the arithmetic dtypes (no bool, no string); else
// InvalidArgumentError naming `who`.
template <typename Fn>
decltype(auto) dispatch_arithmetic(DType d, const char* who, Fn&& fn) {
  switch (d) {
    case DType::float32: return fn(float{});
    case DType::float64: return fn(double{});
    case DType::int32: return fn(int32_t{});
    case DType::int64: return fn(int64_t{});
    case DType::uint8: return fn(uint8_t{});
    default: break;
  }
  throw InvalidArgumentError(
      str_cat(who, ": expected a numeric (non-bool) tensor, got dtype ", dtype_name(d)));
}

template <typename Fn>
decltype(auto) dispatch_floating(DType d, const char* who, Fn&& fn) {
  switch (d) {
    case DType::float32: return fn(float{});
    case DType::float64: return fn(double{});
    default: break;
  }
  throw InvalidArgumentError(str_cat(
      who, ": expected a floating-point tensor (float32 or float64), got dtype ", dtype_name(d)));
}

// Row-major element strides of `dims` (in the buffer cache: kernels take
// them on every call).
inline PooledVector<int64_t> dense_strides(std::span<const int64_t> dims) {
  PooledVector<int64_t> s(dims.size());
  int64_t acc = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

}  // namespace strata::kernels::internal
