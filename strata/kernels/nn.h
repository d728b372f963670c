#pragma once
// Neural-network kernels: 2-D convolution (im2col + GEMM) and its two
// backprops (GEMM + col2im), max/avg pooling and their gradients, and
// softmax / log-softmax over the last axis. float32 and float64.
//
//   kernels::ConvGeometry g = ...;   // computed and validated by strata/ops (nn_ops.cc)
//   Tensor y = kernels::conv2d(x, filter, g);
//
// Layout is NHWC, filters HWIO. The geometry is trusted: strata/ops checks
// shapes, dtypes and TF's padding rule before calling. Work is split over the
// current device's intra-op pool in chunks whose boundaries do not depend on
// the number of threads, so results are the same for any pool size.
// Thread-safe (pure functions of their inputs).

#include <cstdint>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::kernels {

// One 2-D window op (convolution or pool) over an NHWC input.
struct ConvGeometry {
  int64_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  int64_t filter_h = 0, filter_w = 0, out_c = 0;  // out_c: conv output channels (pools: unused)
  int64_t out_h = 0, out_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;  // the bottom/right padding follows from out_h/out_w
};

// input [N, H, W, C], filter [KH, KW, C, O] -> [N, OH, OW, O].
Tensor conv2d(const Tensor& input, const Tensor& filter, const ConvGeometry& g);
// filter [KH, KW, C, O], out_backprop [N, OH, OW, O] -> d input [N, H, W, C].
Tensor conv2d_backprop_input(const Tensor& filter, const Tensor& out_backprop,
                             const ConvGeometry& g);
// input [N, H, W, C], out_backprop [N, OH, OW, O] -> d filter [KH, KW, C, O].
Tensor conv2d_backprop_filter(const Tensor& input, const Tensor& out_backprop,
                              const ConvGeometry& g);

// --- spatially partitioned convolution (TPU model parallelism) ---
// The input is held as a grid of equal float32 tiles [N, tile_h, tile_w, C]
// (the shards of one batch slice of a partitioned tensor; tiles[i *
// grid_cols + j] covers rows [i * tile_h, ...) and columns [j * tile_w, ...)
// of the whole input g describes) and is read in place: the halo rows and
// columns a window needs come straight from the neighbouring tiles, with no
// copied window and no full-size temporary. Only one window of the result
// is computed, each element the same sum, in the same order, as in the
// whole convolution. Outputs are allocated on the current device.
struct ConvTileGrid {
  std::vector<Tensor> tiles;
  int64_t grid_rows = 1, grid_cols = 1;
};
// Rows [y0, y1) and columns [x0, x1) (of a conv's output, or for the input
// gradient, of its input).
struct ConvWindow {
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
};
// Whether the tiled kernels take g (float32, the direct AVX-512 kernels
// enabled and suited to g); callers use the plain kernels otherwise.
bool tiled_conv2d_supported(const ConvGeometry& g);                 // forward, filter gradient
bool tiled_conv2d_backprop_input_supported(const ConvGeometry& g);  // stride 1
// Window w of conv2d(input, filter) -> [N, w.y1 - w.y0, w.x1 - w.x0, O].
Tensor tiled_conv2d(const ConvTileGrid& input, const Tensor& filter, const ConvGeometry& g,
                    const ConvWindow& w);
// Window w (input rows/columns) of the input gradient, out_backprop tiled.
Tensor tiled_conv2d_backprop_input(const Tensor& filter, const ConvTileGrid& out_backprop,
                                   const ConvGeometry& g, const ConvWindow& w);
// The filter gradient contributed by output window w, whose gradient is
// out_backprop [N, w.y1 - w.y0, w.x1 - w.x0, O].
Tensor tiled_conv2d_backprop_filter(const ConvTileGrid& input, const Tensor& out_backprop,
                                    const ConvGeometry& g, const ConvWindow& w);

// Pools use filter_h/filter_w as the window and in_c as the channel count;
// dilations must be 1. Padded positions never take part (TF): max ignores
// them, avg divides by the number of in-bounds elements of each window.
Tensor max_pool2d(const Tensor& input, const ConvGeometry& g);
Tensor avg_pool2d(const Tensor& input, const ConvGeometry& g);
// Each out_backprop value goes to the first maximum (row-major window order)
// of its window, as TF's CPU MaxPoolGrad.
Tensor max_pool2d_grad(const Tensor& input, const Tensor& out_backprop, const ConvGeometry& g);
// gradients * (features > 0) (same shape and floating dtype), in one pass.
Tensor relu_grad(const Tensor& gradients, const Tensor& features);
// Each out_backprop value is shared equally by its window's in-bounds elements.
Tensor avg_pool2d_grad(const Tensor& out_backprop, const ConvGeometry& g);

// Max-subtracted softmax (or log-softmax) over the last axis; rows in parallel.
Tensor softmax_last_axis(const Tensor& x, bool log_space);

}  // namespace strata::kernels
