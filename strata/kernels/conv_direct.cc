#include "strata/kernels/internal/conv_direct.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "strata/kernels/internal/kernel_util.h"

namespace strata::kernels::internal {
namespace {

#define STRATA_AVX512 __attribute__((target("avx512f")))

constexpr int kLanes = 16;
constexpr int kMaxVectors = 4;  // output channels per block: 64
// A filter slice [K, 64] beyond this many elements (512 KiB) no longer stays
// in L2 while a tile streams it; OpenBLAS's blocked GEMM is better there.
constexpr int64_t kMaxFilterSlice = int64_t{1} << 17;
// Partial filter gradients: at most this many fixed groups, within this budget.
constexpr int64_t kMaxGroups = 8;
constexpr int64_t kGroupBudget = int64_t{1} << 22;

// Output pixels per register tile for NV vectors of channels: 24 accumulators
// (of 32 zmm registers), leaving room for the filter row and the broadcast.
template <int NV>
constexpr int tile_rows() {
  return NV == 1 ? 12 : NV == 2 ? 12 : NV == 3 ? 8 : 6;
}

// The rows of the (virtually zero-padded) input a chunk of output rows reads,
// as [rows, cols, C] with `row_stride` elements per row: the input itself when
// the chunk needs no padding, else a zero-bordered copy in `buffer`.
struct View {
  const float* data;
  int64_t row_stride;
};

struct Plan {
  int64_t kh, kw, c, o;    // filter and channels
  int64_t sh, sw, dh, dw;  // strides, dilations
  int64_t oh, ow;          // output rows, columns
  int64_t padded_w;        // columns a row of the padded input needs
  int64_t rows_per_chunk;  // output rows per parallel chunk
  int64_t chunks_per_image;
  std::vector<int64_t> tap_off;  // element offset of tap (i, j) from a pixel's window corner
};

// The plan of output window w (rows [y0, y1), columns [x0, x1)) of g's output.
Plan make_plan(const ConvGeometry& g, const ConvWindow& w) {
  Plan p{g.filter_h,   g.filter_w,  g.in_c,      g.out_c, g.stride_h, g.stride_w, g.dilation_h,
         g.dilation_w, w.y1 - w.y0, w.x1 - w.x0, 0,       0,          0,          {}};
  p.padded_w = (p.ow - 1) * g.stride_w + (g.filter_w - 1) * g.dilation_w + 1;
  // About 16 chunks over the batch, each at most ~64k output values (the
  // chunk's dy must stay in L2 for the filter gradient). Depends on the
  // geometry only.
  const int64_t by_count = (g.batch * p.oh + 15) / 16;
  const int64_t by_size = std::max<int64_t>(65536 / std::max<int64_t>(p.ow * g.out_c, 1), 1);
  p.rows_per_chunk = std::clamp<int64_t>(std::min(by_count, by_size), 1, p.oh);
  p.chunks_per_image = (p.oh + p.rows_per_chunk - 1) / p.rows_per_chunk;
  return p;
}

ConvWindow full_window(const ConvGeometry& g) { return {0, g.out_h, 0, g.out_w}; }

// Row stride of the view when padding is needed (the buffer's layout).
int64_t padded_row_stride(const Plan& p) { return p.padded_w * p.c; }
int64_t input_rows_for(const Plan& p, int64_t out_rows) {
  return (out_rows - 1) * p.sh + (p.kh - 1) * p.dh + 1;
}

// Output rows [y0, y1), columns from x0 (the plan's window width) of image
// `b` of the tiled input. In place when the rows and columns the chunk reads
// lie inside one tile (row stride: the tile's), else a zero-bordered copy in
// `buffer`, its rows gathered from the tiles they lie in (the halo read in
// place from the neighbouring tiles).
View chunk_view(const ConvTiles& in, int64_t b, const ConvGeometry& g, const Plan& p, int64_t y0,
                int64_t y1, int64_t x0, float* buffer) {
  const int64_t first = y0 * p.sh - g.pad_top;  // input row of the view's row 0
  const int64_t left = x0 * p.sw - g.pad_left;  // input column of the view's column 0
  const int64_t rows = input_rows_for(p, y1 - y0);
  const int64_t th = in.tile_h, tw = in.tile_w;
  const int64_t tile_image = th * tw * p.c;
  if (left >= 0 && left + p.padded_w <= g.in_w && first >= 0 && first + rows <= g.in_h) {
    const int64_t ti = first / th, tj = left / tw;
    if ((first + rows - 1) / th == ti && (left + p.padded_w - 1) / tw == tj) {
      const float* t = in.tiles[ti * in.grid_cols + tj] + b * tile_image;
      return {t + ((first - ti * th) * tw + (left - tj * tw)) * p.c, tw * p.c};
    }
  }
  const int64_t rs = padded_row_stride(p);
  // Columns [px0, px1) of a padded row hold input columns [left + px0, left + px1).
  const int64_t px0 = std::clamp<int64_t>(-left, 0, p.padded_w);
  const int64_t px1 = std::clamp<int64_t>(g.in_w - left, px0, p.padded_w);
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = buffer + r * rs;
    const int64_t iy = first + r;
    if (iy < 0 || iy >= g.in_h) {
      std::fill(dst, dst + rs, 0.f);
      continue;
    }
    std::fill(dst, dst + px0 * p.c, 0.f);
    const int64_t ti = iy / th;
    for (int64_t ix = left + px0; ix < left + px1;) {
      const int64_t tj = ix / tw;
      const int64_t end = std::min(left + px1, (tj + 1) * tw);
      const float* src = in.tiles[ti * in.grid_cols + tj] + b * tile_image +
                         ((iy - ti * th) * tw + (ix - tj * tw)) * p.c;
      std::memcpy(dst + (ix - left) * p.c, src,
                  static_cast<size_t>((end - ix) * p.c) * sizeof(float));
      ix = end;
    }
    std::fill(dst + px1 * p.c, dst + rs, 0.f);
  }
  return {buffer, rs};
}

std::vector<int64_t> tap_offsets(const Plan& p, int64_t row_stride) {
  std::vector<int64_t> off(static_cast<size_t>(p.kh * p.kw));
  for (int64_t i = 0; i < p.kh; ++i)
    for (int64_t j = 0; j < p.kw; ++j) off[i * p.kw + j] = i * p.dh * row_stride + j * p.dw * p.c;
  return off;
}

inline __mmask16 tail_mask(int64_t n) {
  return static_cast<__mmask16>(n >= kLanes ? 0xFFFF : (1u << n) - 1u);
}

// ---- forward ----

// out[r, :] = sum over taps t, channels ci of a[r * step + off[t] + ci] * w[t * c + ci, :]
// for R pixels and NV vectors of output channels (the last masked by `tail`).
template <int R, int NV>
STRATA_AVX512 void forward_tile(const float* a, int64_t step, const int64_t* off, int64_t taps,
                                int64_t c, const float* w, int64_t ldw, __mmask16 tail, float* out,
                                int64_t ldo) {
  __m512 acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t t = 0; t < taps; ++t) {
    const float* at = a + off[t];
    const float* wt = w + t * c * ldw;
    for (int64_t ci = 0; ci < c; ++ci) {
      __m512 b[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        b[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(tail, wt + ci * ldw + v * kLanes)
                           : _mm512_loadu_ps(wt + ci * ldw + v * kLanes);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 x = _mm512_set1_ps(at[r * step + ci]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(x, b[v], acc[r][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* dst = out + r * ldo + v * kLanes;
      if (v == NV - 1) {
        _mm512_mask_storeu_ps(dst, tail, acc[r][v]);
      } else {
        _mm512_storeu_ps(dst, acc[r][v]);
      }
    }
}

struct ForwardArgs {
  const int64_t* off;
  int64_t taps, c;
  const float* w;
  int64_t ldw;
  __mmask16 tail;
  int64_t ldo;
};

// A tile of n < R pixels (the end of a row).
template <int NV, int R>
void forward_tile_n(int64_t n, const float* a, int64_t step, const ForwardArgs& f, float* out) {
  if constexpr (R > 0) {
    if (n == R) {
      forward_tile<R, NV>(a, step, f.off, f.taps, f.c, f.w, f.ldw, f.tail, out, f.ldo);
      return;
    }
    forward_tile_n<NV, R - 1>(n, a, step, f, out);
  }
}

// A row of ow pixels in equal tiles of at most R (ow = 14, R = 12: 7 + 7, not
// 12 + 2, whose 2-pixel tile would reload the filter for little work).
template <int NV>
void forward_row(const float* a, int64_t step, int64_t ow, const ForwardArgs& f, float* out) {
  constexpr int R = tile_rows<NV>();
  const int64_t tiles = (ow + R - 1) / R;
  for (int64_t t = 0, x = 0; t < tiles; ++t) {
    const int64_t n = (ow - x) / (tiles - t);
    forward_tile_n<NV, R>(n, a + x * step, step, f, out + x * f.ldo);
    x += n;
  }
}

void forward_row_block(int nv, const float* a, int64_t step, int64_t ow, const ForwardArgs& f,
                       float* out) {
  switch (nv) {
    case 1: forward_row<1>(a, step, ow, f, out); break;
    case 2: forward_row<2>(a, step, ow, f, out); break;
    case 3: forward_row<3>(a, step, ow, f, out); break;
    default: forward_row<4>(a, step, ow, f, out); break;
  }
}

// ---- filter gradient ----

// df[r, :] (+)= sum over the chunk's pixels of a[pixel + koff[r]] * dy[pixel, :].
// Runs of `run` output rows (at least ~64 pixels) are summed in registers and
// then added to df, so a long chunk does not pile its whole rounding error
// onto one running sum.
template <int R, int NV>
STRATA_AVX512 void filter_tile(const float* a, int64_t row_step, int64_t step, int64_t rows,
                               int64_t run, int64_t ow, const int64_t* koff, const float* dy,
                               int64_t ldy, __mmask16 tail, float* df, int64_t ldw,
                               bool accumulate) {
  int64_t ko[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) ko[r] = koff[r];
  for (int64_t y0 = 0; y0 < rows; y0 += run) {
    __m512 acc[R][NV];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
    for (int64_t y = y0; y < std::min(rows, y0 + run); ++y) {
      const float* arow = a + y * row_step;
      const float* d = dy + y * ow * ldy;
      for (int64_t x = 0; x < ow; ++x, d += ldy) {
        const float* ap = arow + x * step;
        __m512 b[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) {
          b[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(tail, d + v * kLanes)
                             : _mm512_loadu_ps(d + v * kLanes);
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512 xv = _mm512_set1_ps(ap[ko[r]]);
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(xv, b[v], acc[r][v]);
        }
      }
    }
    const bool add = accumulate || y0 > 0;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        float* dst = df + r * ldw + v * kLanes;
        const __mmask16 m = v == NV - 1 ? tail : __mmask16{0xFFFF};
        const __m512 sum =
            add ? _mm512_add_ps(acc[r][v], _mm512_maskz_loadu_ps(m, dst)) : acc[r][v];
        _mm512_mask_storeu_ps(dst, m, sum);
      }
  }
}

struct FilterArgs {
  const float* a;
  int64_t row_step, step, rows, run, ow;
  const float* dy;
  int64_t ldy;
  __mmask16 tail;
  int64_t ldw;
  bool accumulate;
};

template <int NV, int R>
void filter_tile_n(int64_t n, const int64_t* koff, const FilterArgs& f, float* df) {
  if constexpr (R > 0) {
    if (n == R) {
      filter_tile<R, NV>(f.a, f.row_step, f.step, f.rows, f.run, f.ow, koff, f.dy, f.ldy, f.tail,
                         df, f.ldw, f.accumulate);
      return;
    }
    filter_tile_n<NV, R - 1>(n, koff, f, df);
  }
}

// All K rows of df's column block (df points at its first column).
template <int NV>
void filter_block(int64_t k, const int64_t* koff, const FilterArgs& f, float* df) {
  constexpr int R = tile_rows<NV>();
  int64_t r = 0;
  for (; r + R <= k; r += R) {
    filter_tile<R, NV>(f.a, f.row_step, f.step, f.rows, f.run, f.ow, koff + r, f.dy, f.ldy, f.tail,
                       df + r * f.ldw, f.ldw, f.accumulate);
  }
  if (r < k) filter_tile_n<NV, R - 1>(k - r, koff + r, f, df + r * f.ldw);
}

void filter_column_block(int nv, int64_t k, const int64_t* koff, const FilterArgs& f, float* df) {
  switch (nv) {
    case 1: filter_block<1>(k, koff, f, df); break;
    case 2: filter_block<2>(k, koff, f, df); break;
    case 3: filter_block<3>(k, koff, f, df); break;
    default: filter_block<4>(k, koff, f, df); break;
  }
}

bool common_supported(const ConvGeometry& g, int64_t out_channels, int64_t k) {
  return direct_conv_enabled() && out_channels >= 8 && k > 0 &&
         k * std::min<int64_t>(out_channels, kMaxVectors * kLanes) <= kMaxFilterSlice &&
         g.stride_h >= 1 && g.stride_w >= 1 && g.pad_top >= 0 && g.pad_left >= 0;
}

// The stride-1 backprop input as a forward convolution of dy with the filter
// rotated by 180 degrees and its channel axes swapped.
ConvGeometry backprop_input_as_forward(const ConvGeometry& g) {
  ConvGeometry f = g;
  f.in_h = g.out_h;
  f.in_w = g.out_w;
  f.in_c = g.out_c;
  f.out_h = g.in_h;
  f.out_w = g.in_w;
  f.out_c = g.in_c;
  f.pad_top = (g.filter_h - 1) * g.dilation_h - g.pad_top;
  f.pad_left = (g.filter_w - 1) * g.dilation_w - g.pad_left;
  return f;
}

}  // namespace

bool direct_conv_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("STRATA_CONV_DIRECT");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return enabled;
}

bool direct_forward_supported(const ConvGeometry& g) {
  return common_supported(g, g.out_c, g.filter_h * g.filter_w * g.in_c) && g.out_h > 0 &&
         g.out_w > 0;
}

bool direct_backprop_input_supported(const ConvGeometry& g) {
  if (g.stride_h != 1 || g.stride_w != 1) return false;
  if (g.pad_top > (g.filter_h - 1) * g.dilation_h) return false;
  if (g.pad_left > (g.filter_w - 1) * g.dilation_w) return false;
  return direct_forward_supported(backprop_input_as_forward(g));
}

bool direct_backprop_filter_supported(const ConvGeometry& g) {
  return common_supported(g, g.out_c, g.filter_h * g.filter_w * g.in_c) && g.out_h > 0 &&
         g.out_w > 0;
}

void direct_conv_forward(const float* in, const float* filter, float* out, const ConvGeometry& g) {
  direct_conv_forward(ConvTiles::whole(in, g.in_h, g.in_w), filter, out, g, full_window(g));
}

void direct_conv_forward(const ConvTiles& in, const float* filter, float* out,
                         const ConvGeometry& g, const ConvWindow& w) {
  const Plan p = make_plan(g, w);
  const int64_t buffer_size = input_rows_for(p, p.rows_per_chunk) * padded_row_stride(p);
  const std::vector<int64_t> padded_off = tap_offsets(p, padded_row_stride(p));
  const std::vector<int64_t> input_off = tap_offsets(p, in.tile_w * p.c);
  parallel_for(g.batch * p.chunks_per_image, 1, [&](int64_t t0, int64_t t1) {
    internal::ScratchPtr<float> buffer = internal::scratch<float>(buffer_size);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / p.chunks_per_image;
      const int64_t y0 = w.y0 + (t % p.chunks_per_image) * p.rows_per_chunk;
      const int64_t y1 = std::min(w.y1, y0 + p.rows_per_chunk);
      const View v = chunk_view(in, b, g, p, y0, y1, w.x0, buffer.get());
      const int64_t* off = v.data == buffer.get() ? padded_off.data() : input_off.data();
      for (int64_t y = y0; y < y1; ++y) {
        const float* a = v.data + (y - y0) * p.sh * v.row_stride;
        float* o = out + ((b * p.oh + (y - w.y0)) * p.ow) * p.o;
        // Filter rows [i0, i1) read real input rows; the others would only
        // multiply padding, so they are skipped.
        const int64_t top = y * p.sh - g.pad_top;
        int64_t i0 = 0, i1 = p.kh;
        while (i0 < i1 && top + i0 * p.dh < 0) ++i0;
        while (i1 > i0 && top + (i1 - 1) * p.dh >= g.in_h) --i1;
        if (i0 == i1) {
          std::fill(o, o + p.ow * p.o, 0.f);
          continue;
        }
        for (int64_t o0 = 0; o0 < p.o; o0 += kMaxVectors * kLanes) {
          const int64_t n = std::min<int64_t>(p.o - o0, kMaxVectors * kLanes);
          const int nv = static_cast<int>((n + kLanes - 1) / kLanes);
          const ForwardArgs f{off + i0 * p.kw,
                              (i1 - i0) * p.kw,
                              p.c,
                              filter + i0 * p.kw * p.c * p.o + o0,
                              p.o,
                              tail_mask(n - (nv - 1) * kLanes),
                              p.o};
          forward_row_block(nv, a, p.sw * p.c, p.ow, f, o + o0);
        }
      }
    }
  });
}

void direct_conv_backprop_input(const float* filter, const float* dy, float* dx,
                                const ConvGeometry& g) {
  direct_conv_backprop_input(filter, ConvTiles::whole(dy, g.out_h, g.out_w), dx, g,
                             {0, g.in_h, 0, g.in_w});
}

void direct_conv_backprop_input(const float* filter, const ConvTiles& dy, float* dx,
                                const ConvGeometry& g, const ConvWindow& dx_window) {
  const ConvGeometry f = backprop_input_as_forward(g);
  // rotated[i', j', o, c] = filter[KH-1-i', KW-1-j', c, o]
  const int64_t kh = g.filter_h, kw = g.filter_w, c = g.in_c, o = g.out_c;
  internal::ScratchPtr<float> rotated = internal::scratch<float>(kh * kw * c * o);
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j) {
      const float* src = filter + ((kh - 1 - i) * kw + (kw - 1 - j)) * c * o;
      float* dst = rotated.get() + (i * kw + j) * o * c;
      for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t co = 0; co < o; ++co) dst[co * c + ci] = src[ci * o + co];
    }
  direct_conv_forward(dy, rotated.get(), dx, f, dx_window);
}

void direct_conv_backprop_filter(const float* in, const float* dy, float* df,
                                 const ConvGeometry& g) {
  direct_conv_backprop_filter(ConvTiles::whole(in, g.in_h, g.in_w), dy, df, g, full_window(g));
}

void direct_conv_backprop_filter(const ConvTiles& in, const float* dy, float* df,
                                 const ConvGeometry& g, const ConvWindow& w) {
  const Plan p = make_plan(g, w);
  const int64_t k = p.kh * p.kw * p.c;
  const int64_t size = k * p.o;
  const int64_t chunks = g.batch * p.chunks_per_image;
  const int64_t groups = std::clamp<int64_t>(kGroupBudget / size, 1, std::min(kMaxGroups, chunks));
  const int64_t buffer_size = input_rows_for(p, p.rows_per_chunk) * padded_row_stride(p);
  // Offset of patch element k = (tap, ci) from a pixel's window corner.
  auto patch_offsets = [&](int64_t row_stride) {
    const std::vector<int64_t> taps = tap_offsets(p, row_stride);
    std::vector<int64_t> koff(static_cast<size_t>(k));
    for (int64_t t = 0; t < p.kh * p.kw; ++t)
      for (int64_t ci = 0; ci < p.c; ++ci) koff[t * p.c + ci] = taps[t] + ci;
    return koff;
  };
  const std::vector<int64_t> padded_koff = patch_offsets(padded_row_stride(p));
  const std::vector<int64_t> input_koff = patch_offsets(in.tile_w * p.c);
  internal::ScratchPtr<float> partials = internal::scratch<float>((groups - 1) * size);
  parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
    internal::ScratchPtr<float> buffer = internal::scratch<float>(buffer_size);
    for (int64_t grp = g0; grp < g1; ++grp) {
      float* acc = grp == 0 ? df : partials.get() + (grp - 1) * size;
      const int64_t c_begin = chunks * grp / groups, c_end = chunks * (grp + 1) / groups;
      for (int64_t ch = c_begin; ch < c_end; ++ch) {
        const int64_t b = ch / p.chunks_per_image;
        const int64_t y0 = w.y0 + (ch % p.chunks_per_image) * p.rows_per_chunk;
        const int64_t y1 = std::min(w.y1, y0 + p.rows_per_chunk);
        const View v = chunk_view(in, b, g, p, y0, y1, w.x0, buffer.get());
        const int64_t* koff = v.data == buffer.get() ? padded_koff.data() : input_koff.data();
        for (int64_t o0 = 0; o0 < p.o; o0 += kMaxVectors * kLanes) {
          const int64_t n = std::min<int64_t>(p.o - o0, kMaxVectors * kLanes);
          const int nv = static_cast<int>((n + kLanes - 1) / kLanes);
          const int64_t run = std::max<int64_t>((64 + p.ow - 1) / p.ow, 1);
          const FilterArgs f{.a = v.data,
                             .row_step = p.sh * v.row_stride,
                             .step = p.sw * p.c,
                             .rows = y1 - y0,
                             .run = run,
                             .ow = p.ow,
                             .dy = dy + ((b * p.oh + (y0 - w.y0)) * p.ow) * p.o + o0,
                             .ldy = p.o,
                             .tail = tail_mask(n - (nv - 1) * kLanes),
                             .ldw = p.o,
                             .accumulate = ch != c_begin};
          filter_column_block(nv, k, koff, f, acc + o0);
        }
      }
    }
  });
  if (groups > 1) {
    parallel_for(size, kElementwiseGrain, [&](int64_t s, int64_t e) {
      for (int64_t grp = 1; grp < groups; ++grp) {
        const float* part = partials.get() + (grp - 1) * size;
        for (int64_t i = s; i < e; ++i) df[i] += part[i];
      }
    });
  }
}

}  // namespace strata::kernels::internal
