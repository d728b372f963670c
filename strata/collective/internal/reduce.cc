#include "strata/collective/internal/reduce.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "strata/base/errors.h"

namespace strata::collective::internal {

namespace {

// Elements per block: 16 KiB of float32 keeps the running output in L1 while
// the inputs stream through once.
constexpr int64_t kBlockBytes = 16 * 1024;

// Integer addition in the unsigned type of the same width: wraps like two's
// complement hardware instead of being undefined behaviour on overflow.
template <typename T>
inline T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T, ReduceOp kOp>
inline T combine(T a, T b) {
  if constexpr (kOp == ReduceOp::MAX) {
    return b > a ? b : a;
  } else if constexpr (kOp == ReduceOp::MIN) {
    return b < a ? b : a;
  } else {
    return add(a, b);
  }
}

template <typename T, ReduceOp kOp>
void combine_block(T* __restrict out, const T* __restrict a, const T* __restrict b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = combine<T, kOp>(a[i], b[i]);
}

template <typename T, ReduceOp kOp>
void accumulate_block(T* __restrict out, const T* __restrict b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = combine<T, kOp>(out[i], b[i]);
}

template <typename T>
void divide_block(T* __restrict out, int64_t n, int64_t divisor) {
  const T d = static_cast<T>(divisor);
  // Division (not multiplication by 1/d) matches TF's Div final op bit for bit.
  for (int64_t i = 0; i < n; ++i) out[i] = out[i] / d;
}

template <typename T, ReduceOp kOp>
void reduce_typed(T* out, std::span<const void* const> ins, int64_t n, int64_t mean_divisor) {
  const int64_t block = std::max<int64_t>(1, kBlockBytes / static_cast<int64_t>(sizeof(T)));
  const size_t k = ins.size();
  for (int64_t start = 0; start < n; start += block) {
    const int64_t len = std::min(block, n - start);
    T* o = out + start;
    const T* in0 = static_cast<const T*>(ins[0]) + start;
    if (k == 1) {
      std::memcpy(o, in0, len * sizeof(T));
    } else {
      combine_block<T, kOp>(o, in0, static_cast<const T*>(ins[1]) + start, len);
      for (size_t j = 2; j < k; ++j) {
        accumulate_block<T, kOp>(o, static_cast<const T*>(ins[j]) + start, len);
      }
    }
    if (kOp == ReduceOp::MEAN && mean_divisor != 1) divide_block(o, len, mean_divisor);
  }
}

template <typename Fn>
void dispatch_reducible(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::float32: return fn(float{});
    case DType::float64: return fn(double{});
    case DType::int32: return fn(int32_t{});
    case DType::int64: return fn(int64_t{});
    case DType::uint8:
    case DType::bool_:
    case DType::string: break;
  }
  STRATA_INTERNAL_CHECK(false, "collective reduction of unsupported dtype ", dtype_name(dtype));
}

}  // namespace

bool is_reducible(DType dtype) noexcept {
  return dtype == DType::float32 || dtype == DType::float64 || dtype == DType::int32 ||
         dtype == DType::int64;
}

void reduce_n(DType dtype, ReduceOp op, void* out, std::span<const void* const> ins, int64_t n,
              int64_t mean_divisor) {
  if (n == 0) return;
  STRATA_INTERNAL_CHECK(!ins.empty());
  dispatch_reducible(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* o = static_cast<T*>(out);
    switch (op) {
      case ReduceOp::SUM: return reduce_typed<T, ReduceOp::SUM>(o, ins, n, 1);
      case ReduceOp::MEAN: return reduce_typed<T, ReduceOp::MEAN>(o, ins, n, mean_divisor);
      case ReduceOp::MAX: return reduce_typed<T, ReduceOp::MAX>(o, ins, n, 1);
      case ReduceOp::MIN: return reduce_typed<T, ReduceOp::MIN>(o, ins, n, 1);
    }
  });
}

namespace {

bool overlaps(const void* p, const void* q, size_t bytes) {
  const auto* a = static_cast<const std::byte*>(p);
  const auto* b = static_cast<const std::byte*>(q);
  return a < b + bytes && b < a + bytes;
}

template <typename T, ReduceOp kOp>
void reduce_pair_typed(T* o, const T* x, const T* y, int64_t n) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(T);
  // Gloo calls with out == a (accumulate in place). Telling the compiler which
  // pointers are distinct keeps the loop vectorised; a generic loop with a
  // runtime alias check falls back to scalar code exactly in that case (2x slower).
  if (o == x && !overlaps(o, y, bytes)) {
    accumulate_block<T, kOp>(o, y, n);
  } else if (o == y && !overlaps(o, x, bytes)) {
    accumulate_block<T, kOp>(o, x, n);
  } else if (!overlaps(o, x, bytes) && !overlaps(o, y, bytes)) {
    combine_block<T, kOp>(o, x, y, n);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = combine<T, kOp>(x[i], y[i]);
  }
}

}  // namespace

void reduce_pair(DType dtype, ReduceOp op, void* out, const void* a, const void* b, int64_t n) {
  dispatch_reducible(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    switch (op) {
      case ReduceOp::SUM:
      case ReduceOp::MEAN: return reduce_pair_typed<T, ReduceOp::SUM>(o, x, y, n);
      case ReduceOp::MAX: return reduce_pair_typed<T, ReduceOp::MAX>(o, x, y, n);
      case ReduceOp::MIN: return reduce_pair_typed<T, ReduceOp::MIN>(o, x, y, n);
    }
  });
}

void divide_in_place(DType dtype, void* data, int64_t n, int64_t divisor) {
  if (divisor == 1 || n == 0) return;
  dispatch_reducible(dtype, [&](auto zero) {
    using T = decltype(zero);
    divide_block(static_cast<T*>(data), n, divisor);
  });
}

Tensor block_of_rank(const Tensor& full, int rank, int size, const char* who) {
  STRATA_CHECK_ARG(full.rank() >= 1 && full.shape().dim(0) % size == 0, who,
                   ": reduce_scatter: expected dimension 0 divisible by the group size ", size,
                   ", got shape ", full.shape());
  const int64_t rows = full.shape().dim(0) / size;
  return full.slice_rows(rank * rows, (rank + 1) * rows);
}

}  // namespace strata::collective::internal
