#pragma once
// Neural-network ops (tf.nn): softmax, convolutions, pooling, dropout, losses.
//
//   Tensor p = strata::softmax(logits);                          // last axis
//   Tensor y = strata::nn::conv2d(x, filters, {.strides = {1, 1}, .padding = "SAME"});
//   Tensor z = strata::nn::conv2d(x, filters, {1, 1}, "SAME");   // tf.nn.conv2d's positionals
//   Tensor m = strata::nn::max_pool2d(y, {2, 2}, {2, 2}, "VALID");
//   Tensor d = strata::nn::dropout(x, 0.5, {.seed = 1});
//   Tensor l = strata::nn::compute_average_loss(per_example, {.global_batch_size = 64});
//
// Layout is NHWC (TF's default); filters are HWIO [height, width, in, out].
// Padding "SAME" pads so that out = ceil(in / stride), the extra row/column
// going after (bottom/right), as TF; "VALID" uses no padding. Convolutions and
// pools take float32 or float64 (conv operands of one dtype) and run as
// im2col + GEMM / direct window loops in strata/kernels/nn.h.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strata/core/tensor.h"

namespace strata {

// Numerically stable (max-subtracted) softmax / log-softmax along `axis`.
Tensor softmax(const Tensor& logits, int64_t axis = -1);
Tensor log_softmax(const Tensor& logits, int64_t axis = -1);

namespace nn {

struct Conv2DOptions {
  std::vector<int64_t> strides = {1, 1};  // [h, w] (TF also accepts [s] and [1, h, w, 1])
  std::string padding = "VALID";
  std::vector<int64_t> dilations = {
      1, 1};  // [h, w] (or [1, h, w, 1]); k - 1 input cells skipped per tap
};
Tensor conv2d(const Tensor& input, const Tensor& filters, const Conv2DOptions& options = {});

// tf.nn.conv2d's keyword arguments after its required positionals.
struct Conv2DFormatOptions {
  std::string data_format = "NHWC";  // "NCHW" is UnimplementedError (NHWC only, as TF on CPU)
  std::vector<int64_t> dilations = {1, 1};  // [h, w] or [1, h, w, 1]
};
// tf.nn.conv2d(input, filters, strides, padding, data_format, dilations) with
// TF's required positionals: conv2d(x, f, {1, 1}, "SAME", {.dilations = {2, 2}}).
Tensor conv2d(const Tensor& input, const Tensor& filters, const std::vector<int64_t>& strides,
              const std::string& padding, const Conv2DFormatOptions& format = {});
// The gradients of conv2d (used by autodiff; public as in tf.nn).
Tensor conv2d_backprop_input(const TensorShape& input_shape, const Tensor& filters,
                             const Tensor& out_backprop, const Conv2DOptions& options = {});
Tensor conv2d_backprop_filter(const Tensor& input, const TensorShape& filter_shape,
                              const Tensor& out_backprop, const Conv2DOptions& options = {});

// ksize, strides: [h, w] (or [s], [1, h, w, 1]).
Tensor max_pool2d(const Tensor& input, const std::vector<int64_t>& ksize,
                  const std::vector<int64_t>& strides, const std::string& padding = "VALID");
Tensor avg_pool2d(const Tensor& input, const std::vector<int64_t>& ksize,
                  const std::vector<int64_t>& strides, const std::string& padding = "VALID");

// The gradients of the pools (used by autodiff). max: each out_backprop value
// goes to the first max of its window; avg: spread over the in-bounds elements.
Tensor max_pool2d_grad(const Tensor& input, const Tensor& output, const Tensor& out_backprop,
                       const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
                       const std::string& padding = "VALID");
Tensor avg_pool2d_grad(const TensorShape& input_shape, const Tensor& out_backprop,
                       const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
                       const std::string& padding = "VALID");

// TF's ReluGrad: gradients * (features > 0), so a NaN gradient stays NaN
// even where the feature is not positive (features: the relu's input or
// output; same shape and floating dtype). One fused pass (the Relu
// gradient's kernel); differentiable like TF's (_ReluGradGrad).
Tensor relu_grad(const Tensor& gradients, const Tensor& features);

struct DropoutOptions {
  std::optional<std::vector<int64_t>> noise_shape = std::nullopt;
  std::optional<uint64_t> seed = std::nullopt;
};
// Keeps each element with probability 1 - rate and scales kept ones by 1 / (1 - rate).
Tensor dropout(const Tensor& x, double rate, const DropoutOptions& options = {});

// Per-example loss of integer labels [N] against logits [N, C]
// (tf.nn.sparse_softmax_cross_entropy_with_logits).
Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits,
                                         int64_t axis = -1);
Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
Tensor bias_add(const Tensor& value, const Tensor& bias);
Tensor l2_loss(const Tensor& t);

struct ComputeAverageLossOptions {
  std::optional<Tensor> sample_weight = std::nullopt;
  std::optional<int64_t> global_batch_size = std::nullopt;  // default: batch * num_replicas_in_sync
};
// sum(per_example_loss * sample_weight) / global_batch_size (tf.nn.compute_average_loss).
// Without global_batch_size it uses the per-replica batch times the
// number of replicas of the current replica context (1 outside any strategy);
// the distribute layer provides that count through strata/ops/replica_count.h.
// As TensorFlow's: per_example_loss needs rank >= 1 (InvalidArgumentError for
// a scalar); the sample weights are cast to the loss's dtype and a weight of
// rank one more ([batch, 1] against [batch]) is squeezed, one less expanded,
// before they broadcast (squeeze_or_expand_dimensions); a global batch of 0
// gives 0 (div_no_nan); a negative one is InvalidArgumentError.
//
//   # tf.nn.compute_average_loss([1., 2., 3., 4.], sample_weight=[1., 0., 1., 0.],
//   #                            global_batch_size=8)  -> (1 + 3) / 8 = 0.5
//   nn::compute_average_loss(strata::constant({1.f, 2.f, 3.f, 4.f}, {4}),
//                            {.sample_weight = strata::constant({1.f, 0.f, 1.f, 0.f}, {4}),
//                             .global_batch_size = 8});
Tensor compute_average_loss(const Tensor& per_example_loss,
                            const ComputeAverageLossOptions& options = {});

// tf.nn.scale_regularization_loss: reduce_sum(regularization_loss) divided by
// the number of replicas in sync (1 outside strategy.run), so that adding it
// to every replica's loss adds it once to the summed gradient.
//   loss += nn::scale_regularization_loss(strata::add_n(model->losses()));
Tensor scale_regularization_loss(const Tensor& regularization_loss);

}  // namespace nn
}  // namespace strata
