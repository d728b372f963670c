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
