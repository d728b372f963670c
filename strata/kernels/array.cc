#include "strata/kernels/array.h"

#include <algorithm>
#include <cstring>

#include "strata/kernels/elementwise.h"
#include "strata/kernels/internal/gemm.h"
#include "strata/kernels/internal/kernel_util.h"

namespace strata::kernels {
namespace {

using internal::dispatch_all;
using internal::gemm;
using internal::init_blas;
using internal::kElementwiseGrain;
using internal::parallel_for;

int64_t index_value(const Tensor& idx, int64_t i) {
  return idx.dtype() == DType::int32 ? idx.data<int32_t>()[i] : idx.data<int64_t>()[i];
}

void check_index_dtype(const Tensor& idx, const char* who) {
  STRATA_CHECK_ARG(idx.dtype() == DType::int32 || idx.dtype() == DType::int64, who,
                   ": expected int32 or int64 indices, got dtype ", idx.dtype());
}

}  // namespace

Tensor strided_copy(const Tensor& x, const TensorShape& out_shape, std::span<const int64_t> strides,
                    int64_t offset) {
  Tensor out = Tensor::allocate(x.dtype(), out_shape);
  const int64_t total = out_shape.num_elements();
  if (total == 0) return out;
  const DimsView out_dims = out_shape.dims();
  PooledVector<int64_t> dims(out_dims.begin(), out_dims.end());
  PooledVector<int64_t> st(strides.begin(), strides.end());
  if (dims.empty()) {
    dims.assign(1, 1);
    st.assign(1, 0);
  }
  const int r = static_cast<int>(dims.size());
  const int64_t inner = dims[r - 1], s_in = st[r - 1];
  dispatch_all(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* px = x.data<T>() + offset;
    T* po = out.mutable_data<T>();
    parallel_for(total, kElementwiseGrain, [&](int64_t s, int64_t e) {
      int64_t pos = s;
      while (pos < e) {
        const int64_t row = pos / inner, col = pos % inner;
        int64_t off = 0, rem = row;
        for (int d = r - 2; d >= 0; --d) {
          off += (rem % dims[d]) * st[d];
          rem /= dims[d];
        }
        const int64_t n = std::min(inner - col, e - pos);
        const T* src = px + off + col * s_in;
        if (s_in == 1) {
          std::copy(src, src + n, po + pos);
        } else {
          for (int64_t i = 0; i < n; ++i) po[pos + i] = src[i * s_in];
        }
        pos += n;
      }
    });
  });
  return out;
}

Tensor transpose(const Tensor& x, std::span<const int64_t> perm) {
  const PooledVector<int64_t> in_strides = internal::dense_strides(x.shape().dims());
  PooledVector<int64_t> dims(perm.size()), strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    dims[i] = x.shape().dims()[perm[i]];
    strides[i] = in_strides[perm[i]];
  }
  return strided_copy(x, TensorShape(std::span<const int64_t>(dims.data(), dims.size())), strides,
                      0);
}

Tensor broadcast_to(const Tensor& x, const TensorShape& shape) {
  const int r = shape.rank(), xr = x.rank();
  const PooledVector<int64_t> in_strides = internal::dense_strides(x.shape().dims());
  PooledVector<int64_t> strides(r, 0);
  for (int i = 0; i < xr; ++i) {
    strides[r - xr + i] = x.shape().dims()[i] == 1 ? 0 : in_strides[i];
  }
  return strided_copy(x, shape, strides, 0);
}

Tensor strided_slice(const Tensor& x, const std::vector<int64_t>& begin,
                     const std::vector<int64_t>& strides, const TensorShape& out_shape) {
  const PooledVector<int64_t> in_strides = internal::dense_strides(x.shape().dims());
  int64_t offset = 0;
  std::vector<int64_t> st(begin.size());
  for (size_t i = 0; i < begin.size(); ++i) {
    if (out_shape.num_elements() > 0) offset += begin[i] * in_strides[i];
    st[i] = strides[i] * in_strides[i];
  }
  return strided_copy(x, out_shape, st, offset);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& paddings, double constant_value) {
  std::vector<int64_t> dims = x.shape().dims();
  for (size_t i = 0; i < dims.size(); ++i) dims[i] += paddings[2 * i] + paddings[2 * i + 1];
  const TensorShape out_shape(dims);
  Tensor out = kernels::fill(x.dtype(), out_shape, constant_value);
  if (x.num_elements() == 0) return out;
  const PooledVector<int64_t> ost = internal::dense_strides(dims);
  const std::vector<int64_t>& xd = x.shape().dims();
  const int r = x.rank();
  const int64_t inner = r == 0 ? 1 : xd[r - 1];
  const int64_t rows = x.num_elements() / inner;
  dispatch_all(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* px = x.data<T>();
    T* po = out.mutable_data<T>();
    parallel_for(rows, std::max<int64_t>(1, kElementwiseGrain / inner), [&](int64_t s, int64_t e) {
      for (int64_t row = s; row < e; ++row) {
        int64_t off = r == 0 ? 0 : paddings[2 * (r - 1)], rem = row;
        for (int d = r - 2; d >= 0; --d) {
          off += (rem % xd[d] + paddings[2 * d]) * ost[d];
          rem /= xd[d];
        }
        std::copy(px + row * inner, px + (row + 1) * inner, po + off);
      }
    });
  });
  return out;
}

Tensor concat(const std::vector<Tensor>& values, int axis) {
  std::vector<int64_t> dims = values[0].shape().dims();
  int64_t total_axis = 0;
  for (const Tensor& v : values) total_axis += v.shape().dims()[axis];
  dims[axis] = total_axis;
  const TensorShape out_shape(dims);
  Tensor out = Tensor::allocate(values[0].dtype(), out_shape);
  int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= dims[i];
  const int64_t out_row = outer == 0 ? 0 : out_shape.num_elements() / outer;
  dispatch_all(out.dtype(), [&](auto t) {
    using T = decltype(t);
    T* po = out.mutable_data<T>();
    parallel_for(outer, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, out_row)),
                 [&](int64_t s, int64_t e) {
                   for (int64_t o = s; o < e; ++o) {
                     T* dst = po + o * out_row;
                     for (const Tensor& v : values) {
                       const int64_t run = outer == 0 ? 0 : v.num_elements() / outer;
                       const T* src = v.data<T>() + o * run;
                       std::copy(src, src + run, dst);
                       dst += run;
                     }
                   }
                 });
  });
  return out;
}

Tensor gather(const Tensor& params, const Tensor& indices, int axis) {
  check_index_dtype(indices, "gather");
  const auto& pd = params.shape().dims();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= pd[i];
  for (int i = axis + 1; i < params.rank(); ++i) inner *= pd[i];
  const int64_t limit = pd[axis];
  const int64_t n_idx = indices.num_elements();
  for (int64_t i = 0; i < n_idx; ++i) {
    const int64_t v = index_value(indices, i);
    STRATA_CHECK_ARG(v >= 0 && v < limit, "gather: indices[", i, "] = ", v, " is not in [0, ",
                     limit, ")");
  }
  std::vector<int64_t> dims(pd.begin(), pd.begin() + axis);
  for (int64_t d : indices.shape().dims()) dims.push_back(d);
  for (int i = axis + 1; i < params.rank(); ++i) dims.push_back(pd[i]);
  Tensor out = Tensor::allocate(params.dtype(), TensorShape(dims));
  dispatch_all(params.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* pp = params.data<T>();
    T* po = out.mutable_data<T>();
    parallel_for(outer * n_idx,
                 std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, inner)),
                 [&](int64_t s, int64_t e) {
                   for (int64_t k = s; k < e; ++k) {
                     const int64_t o = k / n_idx, i = k % n_idx;
                     const T* src = pp + (o * limit + index_value(indices, i)) * inner;
                     std::copy(src, src + inner, po + k * inner);
                   }
                 });
  });
  return out;
}

Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments) {
  check_index_dtype(segment_ids, "unsorted_segment_sum");
  const int64_t n = segment_ids.num_elements();
  const int64_t inner = n == 0 ? 0 : data.num_elements() / n;
  std::vector<int64_t> dims{num_segments};
  for (int i = segment_ids.rank(); i < data.rank(); ++i) dims.push_back(data.shape().dims()[i]);
  Tensor out = kernels::fill(data.dtype(), TensorShape(dims), 0.0);
  internal::dispatch_arithmetic(data.dtype(), "unsorted_segment_sum", [&](auto t) {
    using T = decltype(t);
    const T* pd = data.data<T>();
    T* po = out.mutable_data<T>();
    // TF drops ids outside [0, num_segments) (negative ids are documented as dropped).
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = index_value(segment_ids, i);
      if (id < 0 || id >= num_segments) continue;
      T* dst = po + id * inner;
      const T* src = pd + i * inner;
      for (int64_t j = 0; j < inner; ++j) dst[j] = static_cast<T>(dst[j] + src[j]);
    }
  });
  return out;
}

Tensor one_hot(const Tensor& indices, int64_t depth, double on_value, double off_value, int axis,
               DType dtype) {
  check_index_dtype(indices, "one_hot");
  const DimsView index_dims = indices.shape().dims();
  PooledVector<int64_t> dims;
  dims.reserve(index_dims.size() + 1);
  dims.assign(index_dims.begin(), index_dims.end());
  dims.insert(dims.begin() + axis, depth);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= dims[i];
  for (size_t i = axis + 1; i < dims.size(); ++i) inner *= dims[i];
  Tensor out = kernels::fill(dtype, TensorShape(std::span<const int64_t>(dims.data(), dims.size())),
                             off_value);
  dispatch_numeric(dtype, [&](auto t) {
    using T = decltype(t);
    T* po = out.mutable_data<T>();
    const T on = static_cast<T>(on_value);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t v = index_value(indices, o * inner + i);
        if (v >= 0 && v < depth) po[(o * depth + v) * inner + i] = on;
      }
    }
  });
  return out;
}

namespace {

// Element offset of every batch matrix of an operand with batch dims `own`
// (right-aligned against the broadcast batch dims `out`; size-1 dims repeat).
std::vector<int64_t> batch_offsets(const std::vector<int64_t>& own, const std::vector<int64_t>& out,
                                   int64_t matrix_size) {
  const size_t r = out.size();
  std::vector<int64_t> stride(r, 0);
  int64_t acc = matrix_size;
  for (size_t i = own.size(); i-- > 0;) {
    const size_t j = i + (r - own.size());
    stride[j] = own[i] == 1 ? 0 : acc;
    acc *= own[i];
  }
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  std::vector<int64_t> offsets(static_cast<size_t>(total));
  std::vector<int64_t> index(r, 0);
  int64_t off = 0;
  for (int64_t t = 0; t < total; ++t) {
    offsets[t] = off;
    // Odometer increment over `out`, keeping `off` in step.
    for (size_t d = r; d-- > 0;) {
      off += stride[d];
      if (++index[d] < out[d]) break;
      off -= stride[d] * out[d];
      index[d] = 0;
    }
  }
  return offsets;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  init_blas();
  const int ra = a.rank();
  const int rb = b.rank();
  const auto& ad = a.shape().dims();
  const auto& bd = b.shape().dims();
  int64_t m = transpose_a ? ad[ra - 1] : ad[ra - 2];
  const int64_t k = transpose_a ? ad[ra - 2] : ad[ra - 1];
  const int64_t n = transpose_b ? bd[rb - 2] : bd[rb - 1];
  // Offsets of every batch's matrices; a plain matrix product (both operands
  // of rank 2, a dense layer's) has one batch at offset 0 and builds no lists.
  std::vector<int64_t> a_off, b_off;
  int64_t batch = 1;
  Tensor out;
  if (ra == 2 && rb == 2) {
    out = Tensor::allocate(a.dtype(), TensorShape{m, n});
    if (out.num_elements() == 0) return out;
  } else {
    const std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2);
    const std::vector<int64_t> b_batch(bd.begin(), bd.end() - 2);
    std::vector<int64_t> dims =
        broadcast_shape(TensorShape(a_batch), TensorShape(b_batch), "matmul").dims();
    const std::vector<int64_t> out_batch = dims;
    dims.push_back(m);
    dims.push_back(n);
    out = Tensor::allocate(a.dtype(), TensorShape(dims));
    if (out.num_elements() == 0) return out;
    a_off = batch_offsets(a_batch, out_batch, m * k);
    b_off = batch_offsets(b_batch, out_batch, k * n);
    batch = static_cast<int64_t>(a_off.size());
    // One shared right-hand matrix and an untransposed, unbroadcast left side
    // (a dense layer on [batch..., m, k]): a single GEMM with batch * m rows.
    if (batch > 1 && !transpose_a && b_off.back() == 0 && a_off.back() == (batch - 1) * m * k) {
      m *= batch;
      batch = 1;
    }
  }
  auto a_offset = [&](int64_t i) { return batch == 1 ? int64_t{0} : a_off[i]; };
  auto b_offset = [&](int64_t i) { return batch == 1 ? int64_t{0} : b_off[i]; };
  internal::dispatch_arithmetic(a.dtype(), "matmul", [&](auto t) {
    using T = decltype(t);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.mutable_data<T>();
    const int64_t lda = ad[ra - 1], ldb = bd[rb - 1];
    if (k == 0) {
      std::fill(pc, pc + batch * m * n, T(0));
      return;
    }
    const int threads = internal::num_threads();
    // Below ~128K multiply-adds (~2 µs on one core) handing half of a GEMM to
    // another thread costs about what it saves; from there the split pays
    // 1.25x, from 512K 1.6x (kernels_bench BM_SplitCrossover, docs/PERFORMANCE.md).
    if (batch >= threads || m * n * k < (int64_t{1} << 17)) {
      parallel_for(batch, 1, [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i)
          gemm<T>(transpose_a, transpose_b, m, n, k, pa + a_offset(i), lda, pb + b_offset(i), ldb,
                  pc + i * m * n, n);
      });
      return;
    }
    for (int64_t i = 0; i < batch; ++i) {
      const T* A = pa + a_offset(i);
      const T* B = pb + b_offset(i);
      T* C = pc + i * m * n;
      // Split the longer side of C, so that each thread packs the smaller
      // share of the operands (a dense layer's [128, 784] x [784, 512] splits
      // its 512 columns: 10-15% faster at 2 threads than splitting rows).
      if (m >= n) {
        // Split rows of C: each part is an independent single-threaded GEMM.
        const int64_t parts = std::min<int64_t>(threads, (m + 15) / 16);
        parallel_for(parts, 1, [&](int64_t s, int64_t e) {
          for (int64_t p = s; p < e; ++p) {
            const int64_t r0 = m * p / parts, r1 = m * (p + 1) / parts;
            const T* As = transpose_a ? A + r0 : A + r0 * lda;
            gemm<T>(transpose_a, transpose_b, r1 - r0, n, k, As, lda, B, ldb, C + r0 * n, n);
          }
        });
      } else {
        const int64_t parts = std::min<int64_t>(threads, (n + 15) / 16);
        parallel_for(parts, 1, [&](int64_t s, int64_t e) {
          for (int64_t p = s; p < e; ++p) {
            const int64_t c0 = n * p / parts, c1 = n * (p + 1) / parts;
            const T* Bs = transpose_b ? B + c0 * ldb : B + c0;
            gemm<T>(transpose_a, transpose_b, m, c1 - c0, k, A, lda, Bs, ldb, C + c0, n);
          }
        });
      }
    }
  });
  return out;
}

}  // namespace strata::kernels
