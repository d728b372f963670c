#pragma once
// Direct (no im2col, no GEMM) float32 convolution kernels for CPUs with
// AVX-512F (not part of the public API). nn.cc uses them when
// direct_conv_supported() says the geometry suits them, else im2col + GEMM.
//
// Each output pixel's channels are a few 16-lane vectors; a tile of several
// output pixels of one row keeps its accumulators in registers while the
// filter rows stream from L1/L2 and the input values are broadcast straight
// from the image (no patch matrix, no packing, no zeroing of the output).
// Padding is materialised per chunk of rows as a zero-bordered copy, so the
// inner loops never test bounds. Every output element is summed in the same
// order whatever the number of threads.

#include <cstdint>
#include <vector>

#include "strata/kernels/nn.h"

namespace strata::kernels::internal {

// An NHWC input [N, H, W, C] held as a grid of equal tiles, each
// [N, tile_h, tile_w, C] and contiguous (the shards of one batch slice of a
// spatially partitioned tensor), tiles[i * grid_cols + j] covering rows
// [i * tile_h, (i + 1) * tile_h) and columns [j * tile_w, (j + 1) * tile_w).
// The kernels read it in place: a window that crosses tiles (the halo) is
// gathered row by row into the chunk buffer the padding needs anyway.
struct ConvTiles {
  std::vector<const float*> tiles;
  int64_t grid_rows = 1, grid_cols = 1, tile_h = 0, tile_w = 0;
  static ConvTiles whole(const float* data, int64_t h, int64_t w) { return {{data}, 1, 1, h, w}; }
};

// True when the CPU runs the direct kernels (AVX-512F); STRATA_CONV_DIRECT=0
// in the environment turns them off (to compare against im2col + GEMM).
bool direct_conv_enabled();

// Whether the direct kernels handle these float32 cases (they need enough
// output channels to fill vectors and a filter slice that fits in L2).
bool direct_forward_supported(const ConvGeometry& g);
bool direct_backprop_input_supported(const ConvGeometry& g);
bool direct_backprop_filter_supported(const ConvGeometry& g);

// input [N, H, W, C], filter [KH, KW, C, O] -> out [N, OH, OW, O].
void direct_conv_forward(const float* in, const float* filter, float* out, const ConvGeometry& g);
// Only window w of g's output (out [N, w.y1 - w.y0, w.x1 - w.x0, O]) of the
// tiled input (the tiles' union is g's input). Every output element is the
// same sum, in the same order, as in the whole convolution.
void direct_conv_forward(const ConvTiles& in, const float* filter, float* out,
                         const ConvGeometry& g, const ConvWindow& w);
// filter [KH, KW, C, O], dy [N, OH, OW, O] -> dx [N, H, W, C] (stride 1 only).
void direct_conv_backprop_input(const float* filter, const float* dy, float* dx,
                                const ConvGeometry& g);
// Only window dx_window of dx (rows and columns of g's input), reading the
// tiled dy (the tiles' union is g's whole output gradient) in place.
void direct_conv_backprop_input(const float* filter, const ConvTiles& dy, float* dx,
                                const ConvGeometry& g, const ConvWindow& dx_window);
// input [N, H, W, C], dy [N, OH, OW, O] -> df [KH, KW, C, O].
void direct_conv_backprop_filter(const float* in, const float* dy, float* df,
                                 const ConvGeometry& g);
// The part of df contributed by output window w: dy is that window's
// gradient [N, w.y1 - w.y0, w.x1 - w.x0, O], the input tiled.
void direct_conv_backprop_filter(const ConvTiles& in, const float* dy, float* df,
                                 const ConvGeometry& g, const ConvWindow& w);

}  // namespace strata::kernels::internal
