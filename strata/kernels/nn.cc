#include "strata/kernels/nn.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "strata/base/errors.h"
#include "strata/kernels/internal/conv_direct.h"
#include "strata/kernels/internal/gemm.h"
#include "strata/kernels/internal/kernel_util.h"

namespace strata::kernels {
namespace {

using internal::dispatch_floating;
using internal::gemm;
using internal::parallel_for;

// The patch matrix of a chunk of output pixels is built in a per-thread buffer
// of about this many elements (1 MiB of float32): big enough that the GEMM
// runs at full speed, small enough to stay in L2/L3.
constexpr int64_t kColBufferElements = int64_t{1} << 18;
// Partial filter gradients are summed in at most this many fixed groups.
constexpr int64_t kMaxFilterGradGroups = 8;
// Memory (elements) the partial filter gradients may take together.
constexpr int64_t kFilterGradPartialBudget = int64_t{1} << 22;

int64_t patch_size(const ConvGeometry& g) { return g.filter_h * g.filter_w * g.in_c; }

// A 1x1, stride-1, unpadded convolution: the patch matrix is the input itself.
bool is_pointwise(const ConvGeometry& g) {
  return g.filter_h == 1 && g.filter_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
         g.pad_top == 0 && g.pad_left == 0 && g.out_h == g.in_h && g.out_w == g.in_w;
}

// Output pixels per chunk. It depends on the geometry only (never on the
// number of threads), so every GEMM and every sum sees the same operands for
// any pool size and results are reproducible. At least ~8 chunks when there
// is enough work, so that a pool has something to share.
int64_t rows_per_chunk(int64_t total_rows, int64_t k) {
  const int64_t by_buffer = std::max<int64_t>(kColBufferElements / std::max<int64_t>(k, 1), 16);
  const int64_t by_count = std::max<int64_t>((total_rows + 7) / 8, 16);
  return std::min(by_buffer, by_count);
}

// Copies a run of n elements. Runs in im2col are often a few elements (one
// channel times the filter width), where a memmove call costs more than the copy.
template <typename T>
inline void copy_run(const T* src, int64_t n, T* dst) {
  if (n >= 32) {
    std::copy_n(src, n, dst);
    return;
  }
  for (int64_t e = 0; e < n; ++e) dst[e] = src[e];
}

// The output pixel after (b, y, x) in [N, OH, OW] order.
inline void advance_pixel(const ConvGeometry& g, int64_t& b, int64_t& y, int64_t& x) {
  if (++x < g.out_w) return;
  x = 0;
  if (++y < g.out_h) return;
  y = 0;
  ++b;
}

// Rows [p0, p1) of the patch matrix: row p is output pixel p of the flattened
// [N, OH, OW] index, laid out (filter row, filter column, channel) so that it
// multiplies the HWIO filter viewed as [KH * KW * C, O]. Padding reads as 0.
template <typename T>
void im2col(const T* in, const ConvGeometry& g, int64_t p0, int64_t p1, T* col) {
  const int64_t k = patch_size(g);
  const int64_t hw = g.out_h * g.out_w;
  const int64_t row_len = g.filter_w * g.in_c;
  // (b, y, x) of pixel p, stepped along instead of divided out per pixel
  // (three integer divisions cost more than a small patch row's copy).
  int64_t b = p0 / hw, y = (p0 % hw) / g.out_w, x = p0 % g.out_w;
  for (int64_t p = p0; p < p1; ++p, advance_pixel(g, b, y, x)) {
    const T* img = in + b * g.in_h * g.in_w * g.in_c;
    T* row = col + (p - p0) * k;
    const int64_t ix0 = x * g.stride_w - g.pad_left;
    const bool row_inside = g.dilation_w == 1 && ix0 >= 0 && ix0 + g.filter_w <= g.in_w;
    for (int64_t i = 0; i < g.filter_h; ++i) {
      const int64_t iy = y * g.stride_h + i * g.dilation_h - g.pad_top;
      T* dst = row + i * row_len;
      if (iy < 0 || iy >= g.in_h) {
        std::fill(dst, dst + row_len, T(0));
        continue;
      }
      const T* src = img + iy * g.in_w * g.in_c;
      if (row_inside) {
        // NHWC: the window's columns are contiguous in the input row.
        copy_run(src + ix0 * g.in_c, row_len, dst);
        continue;
      }
      for (int64_t j = 0; j < g.filter_w; ++j) {
        const int64_t ix = ix0 + j * g.dilation_w;
        T* d = dst + j * g.in_c;
        if (ix < 0 || ix >= g.in_w) {
          std::fill(d, d + g.in_c, T(0));
        } else {
          copy_run(src + ix * g.in_c, g.in_c, d);
        }
      }
    }
  }
}

// The adjoint of im2col: adds patch rows [p0, p1) back into `out` (an NHWC
// tensor of the input's shape); padded positions are dropped.
template <typename T>
void col2im_add(const T* col, const ConvGeometry& g, int64_t p0, int64_t p1, T* out) {
  const int64_t k = patch_size(g);
  const int64_t hw = g.out_h * g.out_w;
  const int64_t row_len = g.filter_w * g.in_c;
  int64_t b = p0 / hw, y = (p0 % hw) / g.out_w, x = p0 % g.out_w;
  for (int64_t p = p0; p < p1; ++p, advance_pixel(g, b, y, x)) {
    T* img = out + b * g.in_h * g.in_w * g.in_c;
    const T* row = col + (p - p0) * k;
    const int64_t ix0 = x * g.stride_w - g.pad_left;
    const bool row_inside = g.dilation_w == 1 && ix0 >= 0 && ix0 + g.filter_w <= g.in_w;
    for (int64_t i = 0; i < g.filter_h; ++i) {
      const int64_t iy = y * g.stride_h + i * g.dilation_h - g.pad_top;
      if (iy < 0 || iy >= g.in_h) continue;
      const T* src = row + i * row_len;
      T* dst = img + iy * g.in_w * g.in_c;
      if (row_inside) {
        T* d = dst + ix0 * g.in_c;
        for (int64_t e = 0; e < row_len; ++e) d[e] += src[e];
        continue;
      }
      for (int64_t j = 0; j < g.filter_w; ++j) {
        const int64_t ix = ix0 + j * g.dilation_w;
        if (ix < 0 || ix >= g.in_w) continue;
        T* d = dst + ix * g.in_c;
        const T* s = src + j * g.in_c;
        for (int64_t c = 0; c < g.in_c; ++c) d[c] += s[c];
      }
    }
  }
}

// out[P, O] = patches[P, K] * filter[K, O], chunk by chunk of output pixels.
template <typename T>
void conv_forward(const T* in, const T* filter, T* out, const ConvGeometry& g) {
  const int64_t k = patch_size(g);
  const int64_t o = g.out_c;
  const int64_t total = g.batch * g.out_h * g.out_w;
  if (k == 0) {
    std::fill(out, out + total * o, T(0));
    return;
  }
  const bool pointwise = is_pointwise(g);
  if constexpr (std::is_same_v<T, float>) {
    if (!pointwise && internal::direct_forward_supported(g)) {
      internal::direct_conv_forward(in, filter, out, g);
      return;
    }
  }
  const int64_t rows = rows_per_chunk(total, k);
  const int64_t chunks = (total + rows - 1) / rows;
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    internal::ScratchPtr<T> col = pointwise ? nullptr : internal::scratch<T>(rows * k);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t p0 = c * rows, p1 = std::min(total, p0 + rows);
      const T* a = in + p0 * k;
      if (!pointwise) {
        im2col(in, g, p0, p1, col.get());
        a = col.get();
      }
      gemm<T>(false, false, p1 - p0, o, k, a, k, filter, o, out + p0 * o, o);
    }
  });
}

// d patches[P, K] = dy[P, O] * filter[K, O]^T, then col2im. Images are
// independent in d input, so they are the unit of parallel work (overlapping
// windows of one image add into the same elements).
template <typename T>
void conv_backprop_input(const T* filter, const T* dy, T* dx, const ConvGeometry& g) {
  const int64_t k = patch_size(g);
  const int64_t o = g.out_c;
  const int64_t hw = g.out_h * g.out_w;
  const int64_t image = g.in_h * g.in_w * g.in_c;
  if (o == 0) {
    std::fill(dx, dx + g.batch * image, T(0));  // no output channels: nothing flows back
    return;
  }
  if (is_pointwise(g)) {
    // The patch matrix is d input itself: a plain GEMM over pixel chunks.
    const int64_t total = g.batch * hw;
    const int64_t rows = rows_per_chunk(total, k);
    parallel_for((total + rows - 1) / rows, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t p0 = c * rows, p1 = std::min(total, p0 + rows);
        gemm<T>(false, true, p1 - p0, k, o, dy + p0 * o, o, filter, o, dx + p0 * k, k);
      }
    });
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (internal::direct_backprop_input_supported(g)) {
      internal::direct_conv_backprop_input(filter, dy, dx, g);
      return;
    }
  }
  // Whole images are the parallel unit, so only the buffer bounds the chunk.
  const int64_t rows =
      std::min(hw, std::max<int64_t>(kColBufferElements / std::max<int64_t>(k, 1), 16));
  parallel_for(g.batch, 1, [&](int64_t b0, int64_t b1) {
    internal::ScratchPtr<T> col = internal::scratch<T>(rows * k);
    for (int64_t b = b0; b < b1; ++b) {
      std::fill(dx + b * image, dx + (b + 1) * image, T(0));
      for (int64_t q0 = 0; q0 < hw; q0 += rows) {
        const int64_t p0 = b * hw + q0, p1 = b * hw + std::min(hw, q0 + rows);
        gemm<T>(false, true, p1 - p0, k, o, dy + p0 * o, o, filter, o, col.get(), k);
        col2im_add(col.get(), g, p0, p1, dx);
      }
    }
  });
}

// d filter[K, O] = sum over pixel chunks of patches^T * dy. Chunks are summed
// into a fixed number of groups (each a GEMM accumulation), then the groups
// in order: the same arithmetic for any number of threads.
template <typename T>
void conv_backprop_filter(const T* in, const T* dy, T* df, const ConvGeometry& g) {
  const int64_t k = patch_size(g);
  const int64_t o = g.out_c;
  const int64_t total = g.batch * g.out_h * g.out_w;
  const int64_t size = k * o;
  if (size == 0) return;
  if (total == 0) {
    std::fill(df, df + size, T(0));
    return;
  }
  const bool pointwise = is_pointwise(g);
  if constexpr (std::is_same_v<T, float>) {
    if (!pointwise && internal::direct_backprop_filter_supported(g)) {
      internal::direct_conv_backprop_filter(in, dy, df, g);
      return;
    }
  }
  const int64_t rows = rows_per_chunk(total, k);
  const int64_t chunks = (total + rows - 1) / rows;
  const int64_t groups = std::clamp<int64_t>(kFilterGradPartialBudget / size, 1,
                                             std::min(kMaxFilterGradGroups, chunks));
  // Group 0 accumulates into df itself; the others into their own partial.
  internal::ScratchPtr<T> partials = internal::scratch<T>((groups - 1) * size);
  parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
    internal::ScratchPtr<T> col = pointwise ? nullptr : internal::scratch<T>(rows * k);
    for (int64_t grp = g0; grp < g1; ++grp) {
      T* acc = grp == 0 ? df : partials.get() + (grp - 1) * size;
      const int64_t c_begin = chunks * grp / groups, c_end = chunks * (grp + 1) / groups;
      for (int64_t c = c_begin; c < c_end; ++c) {
        const int64_t p0 = c * rows, p1 = std::min(total, p0 + rows);
        const T* a = in + p0 * k;
        if (!pointwise) {
          im2col(in, g, p0, p1, col.get());
          a = col.get();
        }
        gemm<T>(true, false, k, o, p1 - p0, a, k, dy + p0 * o, o, acc, o,
                c == c_begin ? T(0) : T(1));
      }
    }
  });
  if (groups > 1) {
    parallel_for(size, internal::kElementwiseGrain, [&](int64_t s, int64_t e) {
      for (int64_t grp = 1; grp < groups; ++grp) {
        const T* part = partials.get() + (grp - 1) * size;
        for (int64_t i = s; i < e; ++i) df[i] += part[i];
      }
    });
  }
}

// The in-bounds window rows/columns of output position (y, x).
struct Window {
  int64_t y0, y1, x0, x1;
};
Window window(const ConvGeometry& g, int64_t y, int64_t x) {
  const int64_t ys = y * g.stride_h - g.pad_top, xs = x * g.stride_w - g.pad_left;
  return {std::max<int64_t>(ys, 0), std::min(ys + g.filter_h, g.in_h), std::max<int64_t>(xs, 0),
          std::min(xs + g.filter_w, g.in_w)};
}

// Output rows (b, y) per parallel chunk: about kElementwiseGrain element reads.
int64_t pool_row_grain(const ConvGeometry& g) {
  const int64_t per_row = std::max<int64_t>(g.out_w * g.filter_h * g.filter_w * g.in_c, 1);
  return std::max<int64_t>(internal::kElementwiseGrain / per_row, 1);
}

template <typename T>
void pool_forward(const T* in, T* out, const ConvGeometry& g, bool is_max) {
  const int64_t c = g.in_c;
  parallel_for(g.batch * g.out_h, pool_row_grain(g), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / g.out_h, y = r % g.out_h;
      const T* img = in + b * g.in_h * g.in_w * c;
      for (int64_t x = 0; x < g.out_w; ++x) {
        T* o = out + (r * g.out_w + x) * c;
        const Window w = window(g, y, x);
        std::fill(o, o + c, is_max ? -std::numeric_limits<T>::infinity() : T(0));
        for (int64_t iy = w.y0; iy < w.y1; ++iy) {
          for (int64_t ix = w.x0; ix < w.x1; ++ix) {
            const T* v = img + (iy * g.in_w + ix) * c;
            if (is_max) {
              for (int64_t ch = 0; ch < c; ++ch) o[ch] = std::max(o[ch], v[ch]);
            } else {
              for (int64_t ch = 0; ch < c; ++ch) o[ch] += v[ch];
            }
          }
        }
        if (!is_max) {
          // TF divides by the number of in-bounds elements, not the window size.
          const int64_t count = (w.y1 - w.y0) * (w.x1 - w.x0);
          const T scale = T(1) / static_cast<T>(std::max<int64_t>(count, 1));
          for (int64_t ch = 0; ch < c; ++ch) o[ch] *= scale;
        }
      }
    }
  });
}

// Pool gradients scatter into overlapping windows, so images are the unit of
// parallel work.
// `I` holds pixel indices within one image: int32 when they fit, so that for
// float32 the first-max search vectorises (selects of equal-width lanes).
template <typename T, typename I>
void max_pool_backward(const T* in, const T* dy, T* dx, const ConvGeometry& g) {
  const int64_t c = g.in_c;
  const int64_t image = g.in_h * g.in_w * c;
  parallel_for(g.batch, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> best(static_cast<size_t>(c));
    std::vector<I> where(static_cast<size_t>(c));
    // Unaliased views: the stores to dx cannot change them.
    T* __restrict bp = best.data();
    I* __restrict wp = where.data();
    for (int64_t b = b0; b < b1; ++b) {
      const T* img = in + b * image;
      T* dimg = dx + b * image;
      std::fill(dimg, dimg + image, T(0));
      for (int64_t y = 0; y < g.out_h; ++y) {
        for (int64_t x = 0; x < g.out_w; ++x) {
          const Window w = window(g, y, x);
          if (w.y0 >= w.y1 || w.x0 >= w.x1) continue;
          // The first in-bounds element starts as the max; a later one takes
          // over only if strictly greater, so ties go to the first.
          const I first = static_cast<I>(w.y0 * g.in_w + w.x0);
          const T* p0 = img + first * c;
          for (int64_t ch = 0; ch < c; ++ch) {
            bp[ch] = p0[ch];
            wp[ch] = first;
          }
          for (int64_t iy = w.y0; iy < w.y1; ++iy) {
            for (int64_t ix = w.x0; ix < w.x1; ++ix) {
              const I pixel = static_cast<I>(iy * g.in_w + ix);
              const T* px = img + pixel * c;
              // Selects, not branches: on real data the comparison is
              // unpredictable and a branch mispredicts about half the time.
              for (int64_t ch = 0; ch < c; ++ch) {
                const I take = -static_cast<I>(px[ch] > bp[ch]);  // all ones or 0
                wp[ch] = (wp[ch] & ~take) | (pixel & take);
                bp[ch] = std::max(bp[ch], px[ch]);
              }
            }
          }
          const T* d = dy + ((b * g.out_h + y) * g.out_w + x) * c;
          for (int64_t ch = 0; ch < c; ++ch) dimg[static_cast<int64_t>(wp[ch]) * c + ch] += d[ch];
        }
      }
    }
  });
}

template <typename T>
void avg_pool_backward(const T* dy, T* dx, const ConvGeometry& g) {
  const int64_t c = g.in_c;
  const int64_t image = g.in_h * g.in_w * c;
  parallel_for(g.batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      T* dimg = dx + b * image;
      std::fill(dimg, dimg + image, T(0));
      for (int64_t y = 0; y < g.out_h; ++y) {
        for (int64_t x = 0; x < g.out_w; ++x) {
          const Window w = window(g, y, x);
          const int64_t count = (w.y1 - w.y0) * (w.x1 - w.x0);
          if (count <= 0) continue;
          const T scale = T(1) / static_cast<T>(count);
          const T* d = dy + ((b * g.out_h + y) * g.out_w + x) * c;
          for (int64_t iy = w.y0; iy < w.y1; ++iy) {
            for (int64_t ix = w.x0; ix < w.x1; ++ix) {
              T* o = dimg + (iy * g.in_w + ix) * c;
              for (int64_t ch = 0; ch < c; ++ch) o[ch] += d[ch] * scale;
            }
          }
        }
      }
    }
  });
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& filter, const ConvGeometry& g) {
  internal::init_blas();
  Tensor out = Tensor::allocate(input.dtype(), TensorShape{g.batch, g.out_h, g.out_w, g.out_c});
  if (out.num_elements() == 0) return out;
  dispatch_floating(input.dtype(), "conv2d", [&](auto t) {
    using T = decltype(t);
    conv_forward<T>(input.data<T>(), filter.data<T>(), out.mutable_data<T>(), g);
  });
  return out;
}

namespace {

// The tiles of `grid`, whose union must be [n, h, w, c].
internal::ConvTiles tiles_of(const ConvTileGrid& grid, const TensorShape& whole, const char* op) {
  STRATA_CHECK_ARG(!grid.tiles.empty() &&
                       static_cast<int64_t>(grid.tiles.size()) == grid.grid_rows * grid.grid_cols,
                   op, ": expected ", grid.grid_rows, " x ", grid.grid_cols, " tiles, got ",
                   grid.tiles.size());
  const TensorShape& first = grid.tiles.front().shape();
  STRATA_CHECK_ARG(first.rank() == 4 && first[0] == whole[0] &&
                       first[1] * grid.grid_rows == whole[1] &&
                       first[2] * grid.grid_cols == whole[2] && first[3] == whole[3],
                   op, ": expected ", grid.grid_rows, " x ", grid.grid_cols, " tiles making up ",
                   whole, ", got tiles of shape ", first);
  internal::ConvTiles t{{}, grid.grid_rows, grid.grid_cols, first[1], first[2]};
  for (const Tensor& tile : grid.tiles) {
    STRATA_CHECK_ARG(tile.dtype() == DType::float32 && tile.shape() == first, op,
                     ": expected float32 tiles of shape ", first, ", got ", tile.dtype(), " ",
                     tile.shape());
    t.tiles.push_back(tile.data<float>());
  }
  return t;
}

void check_window(const ConvWindow& w, int64_t h, int64_t wd, const char* op) {
  STRATA_CHECK_ARG(0 <= w.y0 && w.y0 < w.y1 && w.y1 <= h && 0 <= w.x0 && w.x0 < w.x1 && w.x1 <= wd,
                   op, ": window rows [", w.y0, ", ", w.y1, ") columns [", w.x0, ", ", w.x1,
                   ") outside [0, ", h, ") x [0, ", wd, ")");
}

}  // namespace

bool tiled_conv2d_supported(const ConvGeometry& g) {
  return internal::direct_forward_supported(g) && internal::direct_backprop_filter_supported(g);
}

bool tiled_conv2d_backprop_input_supported(const ConvGeometry& g) {
  return internal::direct_backprop_input_supported(g);
}

Tensor tiled_conv2d(const ConvTileGrid& input, const Tensor& filter, const ConvGeometry& g,
                    const ConvWindow& w) {
  STRATA_CHECK(UNIMPLEMENTED, internal::direct_forward_supported(g),
               "tiled_conv2d: the direct kernels do not take this geometry");
  check_window(w, g.out_h, g.out_w, "tiled_conv2d");
  const internal::ConvTiles tiles =
      tiles_of(input, TensorShape{g.batch, g.in_h, g.in_w, g.in_c}, "tiled_conv2d");
  Tensor out =
      Tensor::allocate(DType::float32, TensorShape{g.batch, w.y1 - w.y0, w.x1 - w.x0, g.out_c});
  internal::direct_conv_forward(tiles, filter.data<float>(), out.mutable_data<float>(), g, w);
  return out;
}

Tensor tiled_conv2d_backprop_input(const Tensor& filter, const ConvTileGrid& out_backprop,
                                   const ConvGeometry& g, const ConvWindow& w) {
  STRATA_CHECK(UNIMPLEMENTED, internal::direct_backprop_input_supported(g),
               "tiled_conv2d_backprop_input: the direct kernels do not take this geometry");
  check_window(w, g.in_h, g.in_w, "tiled_conv2d_backprop_input");
  const internal::ConvTiles tiles = tiles_of(
      out_backprop, TensorShape{g.batch, g.out_h, g.out_w, g.out_c}, "tiled_conv2d_backprop_input");
  Tensor dx =
      Tensor::allocate(DType::float32, TensorShape{g.batch, w.y1 - w.y0, w.x1 - w.x0, g.in_c});
  internal::direct_conv_backprop_input(filter.data<float>(), tiles, dx.mutable_data<float>(), g, w);
  return dx;
}

Tensor tiled_conv2d_backprop_filter(const ConvTileGrid& input, const Tensor& out_backprop,
                                    const ConvGeometry& g, const ConvWindow& w) {
  STRATA_CHECK(UNIMPLEMENTED, internal::direct_backprop_filter_supported(g),
               "tiled_conv2d_backprop_filter: the direct kernels do not take this geometry");
  check_window(w, g.out_h, g.out_w, "tiled_conv2d_backprop_filter");
  const internal::ConvTiles tiles =
      tiles_of(input, TensorShape{g.batch, g.in_h, g.in_w, g.in_c}, "tiled_conv2d_backprop_filter");
  Tensor df =
      Tensor::allocate(DType::float32, TensorShape{g.filter_h, g.filter_w, g.in_c, g.out_c});
  internal::direct_conv_backprop_filter(tiles, out_backprop.data<float>(), df.mutable_data<float>(),
                                        g, w);
  return df;
}

Tensor conv2d_backprop_input(const Tensor& filter, const Tensor& out_backprop,
                             const ConvGeometry& g) {
  internal::init_blas();
  Tensor dx = Tensor::allocate(filter.dtype(), TensorShape{g.batch, g.in_h, g.in_w, g.in_c});
  if (dx.num_elements() == 0) return dx;
  dispatch_floating(filter.dtype(), "conv2d_backprop_input", [&](auto t) {
    using T = decltype(t);
    conv_backprop_input<T>(filter.data<T>(), out_backprop.data<T>(), dx.mutable_data<T>(), g);
  });
  return dx;
}

Tensor conv2d_backprop_filter(const Tensor& input, const Tensor& out_backprop,
                              const ConvGeometry& g) {
  internal::init_blas();
  Tensor df = Tensor::allocate(input.dtype(), TensorShape{g.filter_h, g.filter_w, g.in_c, g.out_c});
  if (df.num_elements() == 0) return df;
  dispatch_floating(input.dtype(), "conv2d_backprop_filter", [&](auto t) {
    using T = decltype(t);
    conv_backprop_filter<T>(input.data<T>(), out_backprop.data<T>(), df.mutable_data<T>(), g);
  });
  return df;
}

Tensor max_pool2d(const Tensor& input, const ConvGeometry& g) {
  Tensor out = Tensor::allocate(input.dtype(), TensorShape{g.batch, g.out_h, g.out_w, g.in_c});
  if (out.num_elements() == 0) return out;
  dispatch_floating(input.dtype(), "max_pool2d", [&](auto t) {
    using T = decltype(t);
    pool_forward<T>(input.data<T>(), out.mutable_data<T>(), g, true);
  });
  return out;
}

Tensor avg_pool2d(const Tensor& input, const ConvGeometry& g) {
  Tensor out = Tensor::allocate(input.dtype(), TensorShape{g.batch, g.out_h, g.out_w, g.in_c});
  if (out.num_elements() == 0) return out;
  dispatch_floating(input.dtype(), "avg_pool2d", [&](auto t) {
    using T = decltype(t);
    pool_forward<T>(input.data<T>(), out.mutable_data<T>(), g, false);
  });
  return out;
}

Tensor max_pool2d_grad(const Tensor& input, const Tensor& out_backprop, const ConvGeometry& g) {
  Tensor dx = Tensor::allocate(input.dtype(), input.shape());
  if (dx.num_elements() == 0) return dx;
  dispatch_floating(input.dtype(), "max_pool2d_grad", [&](auto t) {
    using T = decltype(t);
    if (g.in_h * g.in_w <= std::numeric_limits<int32_t>::max()) {
      max_pool_backward<T, int32_t>(input.data<T>(), out_backprop.data<T>(), dx.mutable_data<T>(),
                                    g);
    } else {
      max_pool_backward<T, int64_t>(input.data<T>(), out_backprop.data<T>(), dx.mutable_data<T>(),
                                    g);
    }
  });
  return dx;
}

Tensor avg_pool2d_grad(const Tensor& out_backprop, const ConvGeometry& g) {
  Tensor dx = Tensor::allocate(out_backprop.dtype(), TensorShape{g.batch, g.in_h, g.in_w, g.in_c});
  if (dx.num_elements() == 0) return dx;
  dispatch_floating(out_backprop.dtype(), "avg_pool2d_grad", [&](auto t) {
    using T = decltype(t);
    avg_pool_backward<T>(out_backprop.data<T>(), dx.mutable_data<T>(), g);
  });
  return dx;
}

Tensor relu_grad(const Tensor& gradients, const Tensor& features) {
  Tensor out = Tensor::allocate(gradients.dtype(), gradients.shape());
  const int64_t n = out.num_elements();
  if (n == 0) return out;
  dispatch_floating(gradients.dtype(), "relu_grad", [&](auto t) {
    using T = decltype(t);
    const T* g = gradients.data<T>();
    const T* f = features.data<T>();
    T* o = out.mutable_data<T>();
    parallel_for(n, internal::kElementwiseGrain, [&](int64_t s, int64_t e) {
      // A product with the 0/1 mask, as TF's ReluGrad functor: a NaN or
      // infinite gradient stays NaN where the feature is not positive.
      for (int64_t i = s; i < e; ++i) o[i] = g[i] * static_cast<T>(f[i] > T(0));
    });
  });
  return out;
}

Tensor softmax_last_axis(const Tensor& x, bool log_space) {
  Tensor out = Tensor::allocate(x.dtype(), x.shape());
  const int64_t n = x.rank() == 0 ? 1 : x.shape()[-1];
  const int64_t rows = n == 0 ? 0 : x.num_elements() / n;
  if (rows == 0) return out;
  dispatch_floating(x.dtype(), log_space ? "log_softmax" : "softmax", [&](auto t) {
    using T = decltype(t);
    using Row = Eigen::Array<T, Eigen::Dynamic, 1>;
    const T* px = x.data<T>();
    T* po = out.mutable_data<T>();
    parallel_for(rows, std::max<int64_t>(internal::kElementwiseGrain / n, 1),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const Eigen::Map<const Row> in(px + r * n, n);
                     Eigen::Map<Row> o(po + r * n, n);
                     // Subtracting the row max keeps exp() <= 1: no overflow for large logits.
                     const T m = in.maxCoeff();
                     o = (in - m).exp();
                     const T sum = o.sum();
                     if (log_space) {
                       o = (in - m) - std::log(sum);
                     } else {
                       o /= sum;
                     }
                   }
                 });
  });
  return out;
}

}  // namespace strata::kernels
