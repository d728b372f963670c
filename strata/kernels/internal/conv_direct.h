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

#include "strata/kernels/nn.h"

namespace strata::kernels::internal {

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
// filter [KH, KW, C, O], dy [N, OH, OW, O] -> dx [N, H, W, C] (stride 1 only).
void direct_conv_backprop_input(const float* filter, const float* dy, float* dx,
                                const ConvGeometry& g);
// input [N, H, W, C], dy [N, OH, OW, O] -> df [KH, KW, C, O].
void direct_conv_backprop_filter(const float* in, const float* dy, float* df,
                                 const ConvGeometry& g);

}  // namespace strata::kernels::internal
