#include "strata/ops/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "strata/kernels/nn.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/ops/random_ops.h"
#include "strata/ops/recorder.h"
#include "strata/ops/replica_count.h"

namespace strata {
namespace {

Tensor softmax_impl(const Tensor& logits, int64_t axis, bool log_space) {
  const char* who = log_space ? "log_softmax" : "softmax";
  STRATA_CHECK_ARG(logits.dtype() == DType::float32 || logits.dtype() == DType::float64, who,
                   ": expected a floating-point tensor, got dtype ", logits.dtype());
  STRATA_CHECK_ARG(logits.rank() >= 1, who, ": expected rank >= 1, got a scalar");
  const int a = logits.shape().canonical_axis(axis, who);
  if (a != logits.rank() - 1) {
    // Move `axis` last, apply, move it back: built from recorded primitives.
    std::vector<int64_t> perm;
    for (int i = 0; i < logits.rank(); ++i)
      if (i != a) perm.push_back(i);
    perm.push_back(a);
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
    return transpose(softmax_impl(transpose(logits, perm), -1, log_space), inv);
  }
  if (auto out = internal::dispatch(
          log_space ? OpKind::LogSoftmax : OpKind::Softmax, who, {logits}, {},
          [=](std::span<const Tensor> in) { return softmax_impl(in[0], -1, log_space); }))
    return *out;
  Tensor out = kernels::softmax_last_axis(logits, log_space);
  record_op(log_space ? OpKind::LogSoftmax : OpKind::Softmax, {logits}, {out});
  return out;
}

}  // namespace

Tensor softmax(const Tensor& logits, int64_t axis) { return softmax_impl(logits, axis, false); }
Tensor log_softmax(const Tensor& logits, int64_t axis) { return softmax_impl(logits, axis, true); }

namespace nn {

namespace {

// TF's forms of a per-dimension attr: [s] (both dims), [h, w] or [1, h, w, 1].
std::vector<int64_t> hw(const std::vector<int64_t>& v, const char* who, const char* field) {
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return v;
  STRATA_CHECK_ARG(v.size() == 4 && v[0] == 1 && v[3] == 1, who, ": expected ", field,
                   " [s], [h, w] or [1, h, w, 1], got ", v);
  return {v[1], v[2]};
}

// Output size and leading padding of one spatial dimension, TF's rule
// (GetWindowedOutputSize with a dilated window of (k - 1) * d + 1): SAME gives
// ceil(in / s) outputs and pads half the total before, the odd one after;
// VALID gives floor((in - window) / s) + 1 and no padding.
std::pair<int64_t, int64_t> out_and_pad(int64_t in, int64_t k, int64_t d, int64_t s,
                                        const std::string& padding, const char* who,
                                        const char* dim) {
  const int64_t window = (k - 1) * d + 1;
  if (padding == "VALID") {
    const int64_t out = (in - window + s) / s;
    STRATA_CHECK_ARG(in - window + s >= 0, who, ": the input ", dim, " ", in,
                     " is smaller than the window ", window, " (VALID padding)");
    return {out, 0};
  }
  STRATA_CHECK_ARG(padding == "SAME", who, ": expected padding \"SAME\" or \"VALID\", got \"",
                   padding, "\"");
  const int64_t out = (in + s - 1) / s;
  const int64_t total = std::max<int64_t>((out - 1) * s + window - in, 0);
  return {out, total / 2};
}

kernels::ConvGeometry conv_geom(const TensorShape& in, const TensorShape& f,
                                const Conv2DOptions& opt, const char* who) {
  STRATA_CHECK_ARG(in.rank() == 4 && f.rank() == 4, who,
                   ": expected input NHWC and filter HWIO, got ", in, " and ", f);
  if (in[3] != f[2] && f[2] > 0 && in[3] % f[2] == 0) {
    // TF reads this as a grouped convolution (in / filter-in groups).
    throw UnimplementedError(str_cat(who, ": grouped convolutions (input channels ", in[3],
                                     " a multiple of the filter's ", f[2],
                                     ") are not supported; got ", in, " and ", f));
  }
  STRATA_CHECK_ARG(in[3] == f[2], who,
                   ": expected input NHWC and filter HWIO with matching channels, got ", in,
                   " and ", f);
  const auto st = hw(opt.strides, who, "strides");
  const auto dl = hw(opt.dilations, who, "dilations");
  STRATA_CHECK_ARG(st[0] > 0 && st[1] > 0, who, ": expected positive strides, got ", opt.strides);
  STRATA_CHECK_ARG(dl[0] > 0 && dl[1] > 0, who, ": expected positive dilations, got ",
                   opt.dilations);
  STRATA_CHECK_ARG(f[0] > 0 && f[1] > 0, who,
                   ": expected a non-empty filter window, got filter shape ", f);
  kernels::ConvGeometry g;
  g.batch = in[0];
  g.in_h = in[1];
  g.in_w = in[2];
  g.in_c = in[3];
  g.filter_h = f[0];
  g.filter_w = f[1];
  g.out_c = f[3];
  g.stride_h = st[0];
  g.stride_w = st[1];
  g.dilation_h = dl[0];
  g.dilation_w = dl[1];
  std::tie(g.out_h, g.pad_top) =
      out_and_pad(g.in_h, g.filter_h, g.dilation_h, g.stride_h, opt.padding, who, "height");
  std::tie(g.out_w, g.pad_left) =
      out_and_pad(g.in_w, g.filter_w, g.dilation_w, g.stride_w, opt.padding, who, "width");
  return g;
}

TensorShape conv_out_shape(const kernels::ConvGeometry& g) {
  return {g.batch, g.out_h, g.out_w, g.out_c};
}

// The attrs Conv2D and its backprops record; `shape` is the input or filter
// shape a backprop op needs (empty for the forward op).
OpAttrs conv_attrs(const kernels::ConvGeometry& g, const Conv2DOptions& options,
                   TensorShape shape = {}) {
  OpAttrs attrs;
  attrs.strides = {g.stride_h, g.stride_w};
  attrs.padding = options.padding;
  attrs.dilations = {g.dilation_h, g.dilation_w};
  attrs.shape = std::move(shape);
  return attrs;
}

// The arguments as the caller gave them (strides and dilations of length 2
// or 4), for the dispatcher: checked by the op itself when it runs.
OpAttrs raw_attrs(const Conv2DOptions& options) {
  OpAttrs attrs;
  attrs.strides = options.strides;
  attrs.padding = options.padding;
  attrs.dilations = options.dilations;
  return attrs;
}
OpAttrs raw_pool_attrs(const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
                       const std::string& padding) {
  OpAttrs attrs;
  attrs.ksize = ksize;
  attrs.strides = strides;
  attrs.padding = padding;
  return attrs;
}

// Both operands float32 or both float64 (TF's Conv2D has one type T).
void check_same_floating(const Tensor& a, const Tensor& b, const char* who, const char* a_name,
                         const char* b_name) {
  STRATA_CHECK_ARG(is_floating(a.dtype()) && a.dtype() == b.dtype(), who, ": expected ", a_name,
                   " and ", b_name, " of the same floating-point dtype (float32 or float64), got ",
                   a.dtype(), " and ", b.dtype());
}

void check_out_backprop(const Tensor& dy, const TensorShape& expected, const char* who) {
  STRATA_CHECK_ARG(dy.shape() == expected, who, ": expected out_backprop shape ", expected,
                   ", got ", dy.shape());
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& filters, const Conv2DOptions& options) {
  if (auto out = internal::dispatch(
          OpKind::Conv2D, "conv2d", {input, filters}, raw_attrs(options),
          [=](std::span<const Tensor> in) { return conv2d(in[0], in[1], options); }))
    return *out;
  check_same_floating(input, filters, "nn::conv2d", "input", "filters");
  const kernels::ConvGeometry g = conv_geom(input.shape(), filters.shape(), options, "nn::conv2d");
  Tensor out = kernels::conv2d(input, filters, g);
  record_op(OpKind::Conv2D, {input, filters}, {out}, conv_attrs(g, options));
  return out;
}

Tensor conv2d(const Tensor& input, const Tensor& filters, const std::vector<int64_t>& strides,
              const std::string& padding, const Conv2DFormatOptions& format) {
  if (format.data_format == "NCHW") {
    throw UnimplementedError(
        "nn::conv2d: data_format 'NCHW' is not supported (the CPU kernels are NHWC only, as "
        "TensorFlow's on CPU); transpose the input to NHWC");
  }
  STRATA_CHECK_ARG(format.data_format == "NHWC",
                   "nn::conv2d: data_format must be 'NHWC' or 'NCHW', got '", format.data_format,
                   "'");
  return conv2d(
      input, filters,
      Conv2DOptions{.strides = strides, .padding = padding, .dilations = format.dilations});
}

Tensor conv2d_backprop_input(const TensorShape& input_shape, const Tensor& filters,
                             const Tensor& dy, const Conv2DOptions& options) {
  const char* who = "nn::conv2d_backprop_input";
  check_same_floating(filters, dy, who, "filters", "out_backprop");
  const kernels::ConvGeometry g = conv_geom(input_shape, filters.shape(), options, who);
  check_out_backprop(dy, conv_out_shape(g), who);
  Tensor dx = kernels::conv2d_backprop_input(filters, dy, g);
  record_op(OpKind::Conv2DBackpropInput, {filters, dy}, {dx}, conv_attrs(g, options, input_shape));
  return dx;
}

Tensor conv2d_backprop_filter(const Tensor& input, const TensorShape& filter_shape,
                              const Tensor& dy, const Conv2DOptions& options) {
  const char* who = "nn::conv2d_backprop_filter";
  check_same_floating(input, dy, who, "input", "out_backprop");
  const kernels::ConvGeometry g = conv_geom(input.shape(), filter_shape, options, who);
  check_out_backprop(dy, conv_out_shape(g), who);
  Tensor df = kernels::conv2d_backprop_filter(input, dy, g);
  record_op(OpKind::Conv2DBackpropFilter, {input, dy}, {df}, conv_attrs(g, options, filter_shape));
  return df;
}

namespace {

kernels::ConvGeometry pool_geom(const TensorShape& in, const std::vector<int64_t>& ksize,
                                const std::vector<int64_t>& strides, const std::string& padding,
                                const char* who) {
  STRATA_CHECK_ARG(in.rank() == 4, who, ": expected an NHWC input, got shape ", in);
  const auto k = hw(ksize, who, "ksize");
  const auto s = hw(strides, who, "strides");
  STRATA_CHECK_ARG(k[0] > 0 && k[1] > 0 && s[0] > 0 && s[1] > 0, who,
                   ": expected positive ksize and strides, got ", ksize, " and ", strides);
  kernels::ConvGeometry g;
  g.batch = in[0];
  g.in_h = in[1];
  g.in_w = in[2];
  g.in_c = in[3];
  g.filter_h = k[0];
  g.filter_w = k[1];
  g.out_c = in[3];
  g.stride_h = s[0];
  g.stride_w = s[1];
  std::tie(g.out_h, g.pad_top) =
      out_and_pad(g.in_h, g.filter_h, 1, g.stride_h, padding, who, "height");
  std::tie(g.out_w, g.pad_left) =
      out_and_pad(g.in_w, g.filter_w, 1, g.stride_w, padding, who, "width");
  return g;
}

OpAttrs pool_attrs(const kernels::ConvGeometry& g, const std::string& padding,
                   TensorShape shape = {}) {
  OpAttrs attrs;
  attrs.ksize = {g.filter_h, g.filter_w};
  attrs.strides = {g.stride_h, g.stride_w};
  attrs.padding = padding;
  attrs.shape = std::move(shape);
  return attrs;
}

void check_floating(const Tensor& t, const char* who, const char* name) {
  STRATA_CHECK_ARG(is_floating(t.dtype()), who, ": expected a floating-point ", name,
                   " (float32 or float64), got dtype ", t.dtype());
}

}  // namespace

Tensor max_pool2d(const Tensor& input, const std::vector<int64_t>& ksize,
                  const std::vector<int64_t>& strides, const std::string& padding) {
  if (auto out = internal::dispatch(
          OpKind::MaxPool2D, "max_pool2d", {input}, raw_pool_attrs(ksize, strides, padding),
          [=](std::span<const Tensor> in) { return max_pool2d(in[0], ksize, strides, padding); }))
    return *out;
  check_floating(input, "nn::max_pool2d", "input");
  const kernels::ConvGeometry g =
      pool_geom(input.shape(), ksize, strides, padding, "nn::max_pool2d");
  Tensor out = kernels::max_pool2d(input, g);
  record_op(OpKind::MaxPool2D, {input}, {out}, pool_attrs(g, padding));
  return out;
}

Tensor avg_pool2d(const Tensor& input, const std::vector<int64_t>& ksize,
                  const std::vector<int64_t>& strides, const std::string& padding) {
  if (auto out = internal::dispatch(
          OpKind::AvgPool2D, "avg_pool2d", {input}, raw_pool_attrs(ksize, strides, padding),
          [=](std::span<const Tensor> in) { return avg_pool2d(in[0], ksize, strides, padding); }))
    return *out;
  check_floating(input, "nn::avg_pool2d", "input");
  const kernels::ConvGeometry g =
      pool_geom(input.shape(), ksize, strides, padding, "nn::avg_pool2d");
  Tensor out = kernels::avg_pool2d(input, g);
  record_op(OpKind::AvgPool2D, {input}, {out}, pool_attrs(g, padding));
  return out;
}

Tensor max_pool2d_grad(const Tensor& input, const Tensor& output, const Tensor& out_backprop,
                       const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
                       const std::string& padding) {
  const char* who = "nn::max_pool2d_grad";
  check_same_floating(input, out_backprop, who, "input", "out_backprop");
  const kernels::ConvGeometry g = pool_geom(input.shape(), ksize, strides, padding, who);
  const TensorShape out_shape{g.batch, g.out_h, g.out_w, g.in_c};
  STRATA_CHECK_ARG(output.shape() == out_shape, who, ": expected output shape ", out_shape,
                   ", got ", output.shape());
  check_out_backprop(out_backprop, out_shape, who);
  // Like TF's CPU kernel, the max positions are found again from `input`;
  // `output` is only checked.
  Tensor dx = kernels::max_pool2d_grad(input, out_backprop, g);
  record_op(OpKind::MaxPool2DGrad, {input, output, out_backprop}, {dx}, pool_attrs(g, padding));
  return dx;
}

Tensor relu_grad(const Tensor& gradients, const Tensor& features) {
  if (auto out =
          internal::dispatch(OpKind::ReluGrad, "relu_grad", {gradients, features}, {},
                             [](std::span<const Tensor> in) { return relu_grad(in[0], in[1]); }))
    return *out;
  const char* who = "nn::relu_grad";
  check_same_floating(gradients, features, who, "gradients", "features");
  STRATA_CHECK_ARG(gradients.shape() == features.shape(), who,
                   ": expected gradients and features of the same shape, got ", gradients.shape(),
                   " and ", features.shape());
  Tensor dx = kernels::relu_grad(gradients, features);
  record_op(OpKind::ReluGrad, {gradients, features}, {dx});
  return dx;
}

Tensor avg_pool2d_grad(const TensorShape& input_shape, const Tensor& out_backprop,
                       const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
                       const std::string& padding) {
  const char* who = "nn::avg_pool2d_grad";
  check_floating(out_backprop, who, "out_backprop");
  const kernels::ConvGeometry g = pool_geom(input_shape, ksize, strides, padding, who);
  check_out_backprop(out_backprop, TensorShape{g.batch, g.out_h, g.out_w, g.in_c}, who);
  Tensor dx = kernels::avg_pool2d_grad(out_backprop, g);
  record_op(OpKind::AvgPool2DGrad, {out_backprop}, {dx}, pool_attrs(g, padding, input_shape));
  return dx;
}

Tensor dropout(const Tensor& x, double rate, const DropoutOptions& options) {
  STRATA_CHECK_ARG(rate >= 0 && rate < 1, "dropout: expected rate in [0, 1), got ", rate);
  STRATA_CHECK_ARG(is_floating(x.dtype()), "dropout: expected a floating-point tensor, got dtype ",
                   x.dtype());
  if (rate == 0) return identity(x);
  const TensorShape noise = options.noise_shape ? TensorShape(*options.noise_shape) : x.shape();
  Tensor u = random::uniform(noise, {.dtype = x.dtype(), .seed = options.seed});
  Tensor keep = cast(greater_equal(u, internal::scalar_like(u, rate)), x.dtype());
  return multiply(x, multiply(keep, internal::scalar_like(x, 1.0 / (1.0 - rate))));
}

Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  // Dispatched as the recorded primitive: (logits, labels).
  if (auto out = internal::dispatch(OpKind::SparseSoftmaxCrossEntropyWithLogits,
                                    "sparse_softmax_cross_entropy_with_logits", {logits, labels},
                                    {}, [](std::span<const Tensor> in) {
                                      return sparse_softmax_cross_entropy_with_logits(in[1], in[0]);
                                    }))
    return *out;
  STRATA_CHECK_ARG(
      logits.rank() == 2 && labels.rank() == 1 && labels.shape()[0] == logits.shape()[0],
      "sparse_softmax_cross_entropy_with_logits: expected logits [N, C] and labels [N], got ",
      logits.shape(), " and ", labels.shape());
  STRATA_CHECK_ARG(
      labels.dtype() == DType::int32 || labels.dtype() == DType::int64,
      "sparse_softmax_cross_entropy_with_logits: expected int32 or int64 labels, got dtype ",
      labels.dtype());
  STRATA_CHECK_ARG(is_floating(logits.dtype()),
                   "sparse_softmax_cross_entropy_with_logits: expected floating logits, got dtype ",
                   logits.dtype());
  const int64_t n = logits.shape()[0], c = logits.shape()[1];
  Tensor out = Tensor::allocate(logits.dtype(), TensorShape{n});
  dispatch_numeric(logits.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_floating_point_v<T>) {
      const T* pl = logits.data<T>();
      T* po = out.mutable_data<T>();
      for (int64_t i = 0; i < n; ++i) {
        const int64_t y =
            labels.dtype() == DType::int32 ? labels.data<int32_t>()[i] : labels.data<int64_t>()[i];
        STRATA_CHECK_ARG(y >= 0 && y < c, "sparse_softmax_cross_entropy_with_logits: labels[", i,
                         "] = ", y, " is not in [0, ", c, ")");
        const T* row = pl + i * c;
        const T m = *std::max_element(row, row + c);
        T s = 0;
        for (int64_t j = 0; j < c; ++j) s += std::exp(row[j] - m);
        po[i] = std::log(s) + m - row[y];
      }
    }
  });
  record_op(OpKind::SparseSoftmaxCrossEntropyWithLogits, {logits, labels}, {out});
  return out;
}

Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits, int64_t axis) {
  return negative(reduce_sum(multiply(labels, log_softmax(logits, axis)), {.axis = {axis}}));
}

Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  // max(x, 0) - x * z + log(1 + exp(-|x|)), TF's stable form.
  return add(subtract(relu(logits), multiply(logits, labels)), log1p(exp(negative(abs(logits)))));
}

Tensor bias_add(const Tensor& value, const Tensor& bias) {
  STRATA_CHECK_ARG(bias.rank() == 1 && value.rank() >= 1 && value.shape()[-1] == bias.shape()[0],
                   "bias_add: expected bias [C] matching the last dimension of value, got ",
                   value.shape(), " and ", bias.shape());
  return add(value, bias);
}

Tensor l2_loss(const Tensor& t) {
  return multiply(reduce_sum(square(t)), internal::scalar_like(t, 0.5));
}

Tensor compute_average_loss(const Tensor& per_example_loss,
                            const ComputeAverageLossOptions& options) {
  STRATA_CHECK_ARG(per_example_loss.defined() && per_example_loss.rank() >= 1,
                   "compute_average_loss: expected per_example_loss of rank >= 1, got ",
                   per_example_loss.defined() ? per_example_loss.shape().to_string()
                                              : std::string("an undefined tensor"));
  Tensor loss = per_example_loss;
  if (options.sample_weight) {
    // TF's scale_losses_by_sample_weight: weights in the loss's dtype, their
    // rank aligned with the loss's (squeeze_or_expand_dimensions).
    Tensor w = cast(*options.sample_weight, loss.dtype());
    if (w.rank() > 0) {
      if (w.rank() - loss.rank() == 1) {
        w = squeeze(w, {-1});
      } else if (loss.rank() - w.rank() == 1) {
        w = expand_dims(w, -1);
      }
    }
    loss = multiply(loss, w);
  }
  const int64_t per_replica = per_example_loss.shape()[0];
  const int64_t global = options.global_batch_size ? *options.global_batch_size
                                                   : per_replica * current_num_replicas_in_sync();
  STRATA_CHECK_ARG(global >= 0, "compute_average_loss: expected global_batch_size >= 0, got ",
                   global);
  Tensor total = reduce_sum(loss);
  // TF divides with div_no_nan: an empty global batch gives 0.
  if (global == 0) return multiply(total, internal::scalar_like(total, 0.0));
  return divide(total, internal::scalar_like(total, static_cast<double>(global)));
}

Tensor scale_regularization_loss(const Tensor& regularization_loss) {
  STRATA_CHECK_ARG(regularization_loss.defined(),
                   "scale_regularization_loss: expected a tensor, got an undefined one");
  Tensor total = reduce_sum(regularization_loss);
  return divide(total,
                internal::scalar_like(total, static_cast<double>(current_num_replicas_in_sync())));
}

}  // namespace nn
}  // namespace strata
