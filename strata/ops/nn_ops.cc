#include "strata/ops/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/ops/random_ops.h"
#include "strata/ops/recorder.h"
#include "strata/ops/replica_count.h"

namespace strata {
namespace {

// Max-subtracted softmax / log-softmax over the last axis of x viewed as [rows, n].
template <typename T>
Tensor softmax_last(const Tensor& x, bool log_space) {
  Tensor out = Tensor::allocate(x.dtype(), x.shape());
  const int64_t n = x.rank() == 0 ? 1 : x.shape()[-1];
  const int64_t rows = n == 0 ? 0 : x.num_elements() / n;
  const T* px = x.data<T>();
  T* po = out.mutable_data<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const T* in = px + r * n;
    T* o = po + r * n;
    const T m = *std::max_element(in, in + n);
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(in[i] - m);
    if (log_space) {
      const T ls = std::log(sum);
      for (int64_t i = 0; i < n; ++i) o[i] = in[i] - m - ls;
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = std::exp(in[i] - m) / sum;
    }
  }
  return out;
}

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
  Tensor out = logits.dtype() == DType::float32 ? softmax_last<float>(logits, log_space)
                                                : softmax_last<double>(logits, log_space);
  record_op(log_space ? OpKind::LogSoftmax : OpKind::Softmax, {logits}, {out});
  return out;
}

}  // namespace

Tensor softmax(const Tensor& logits, int64_t axis) { return softmax_impl(logits, axis, false); }
Tensor log_softmax(const Tensor& logits, int64_t axis) { return softmax_impl(logits, axis, true); }

namespace nn {

namespace {

std::vector<int64_t> hw(const std::vector<int64_t>& v, const char* who, const char* field) {
  if (v.size() == 2) return v;
  STRATA_CHECK_ARG(v.size() == 4 && v[0] == 1 && v[3] == 1, who, ": expected ", field,
                   " [h, w] or [1, h, w, 1], got ", v);
  return {v[1], v[2]};
}

// Output size and leading padding of one spatial dimension (TF's rule).
std::pair<int64_t, int64_t> out_and_pad(int64_t in, int64_t k, int64_t s, const std::string& padding,
                                        const char* who) {
  if (padding == "VALID") return {in >= k ? (in - k) / s + 1 : 0, 0};
  STRATA_CHECK_ARG(padding == "SAME", who, ": expected padding \"SAME\" or \"VALID\", got \"", padding, "\"");
  const int64_t out = (in + s - 1) / s;
  const int64_t total = std::max<int64_t>((out - 1) * s + k - in, 0);
  return {out, total / 2};
}

struct ConvGeom {
  int64_t n, h, w, c, kh, kw, o, oh, ow, sh, sw, ph, pw;
};

// The attrs Conv2D and its backprops record; `shape` is the input or filter
// shape a backprop op needs (empty for the forward op).
OpAttrs conv_attrs(const ConvGeom& g, const Conv2DOptions& options, TensorShape shape = {}) {
  OpAttrs attrs;
  attrs.strides = {g.sh, g.sw};
  attrs.padding = options.padding;
  attrs.dilations = {1, 1};
  attrs.shape = std::move(shape);
  return attrs;
}

ConvGeom conv_geom(const TensorShape& in, const TensorShape& f, const Conv2DOptions& opt, const char* who) {
  STRATA_CHECK_ARG(in.rank() == 4 && f.rank() == 4 && in[3] == f[2], who,
                   ": expected input NHWC and filter HWIO with matching channels, got ", in, " and ", f);
  const auto st = hw(opt.strides, who, "strides");
  const auto dl = hw(opt.dilations, who, "dilations");
  if (dl[0] != 1 || dl[1] != 1) throw UnimplementedError(str_cat(who, ": dilations other than 1 are not supported, got ", opt.dilations));
  STRATA_CHECK_ARG(st[0] > 0 && st[1] > 0, who, ": expected positive strides, got ", opt.strides);
  ConvGeom g{in[0], in[1], in[2], in[3], f[0], f[1], f[3], 0, 0, st[0], st[1], 0, 0};
  std::tie(g.oh, g.ph) = out_and_pad(g.h, g.kh, g.sh, opt.padding, who);
  std::tie(g.ow, g.pw) = out_and_pad(g.w, g.kw, g.sw, opt.padding, who);
  return g;
}

void check_float32(const Tensor& t, const char* who) {
  STRATA_CHECK_ARG(t.dtype() == DType::float32, who, ": expected float32, got dtype ", t.dtype());
}

// Visits every (output pixel, filter tap) pair that lands inside the input.
template <typename Fn>
void for_each_tap(const ConvGeom& g, Fn&& fn) {
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t y = 0; y < g.oh; ++y)
      for (int64_t x = 0; x < g.ow; ++x)
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t iy = y * g.sh + i - g.ph;
          if (iy < 0 || iy >= g.h) continue;
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t ix = x * g.sw + j - g.pw;
            if (ix < 0 || ix >= g.w) continue;
            fn(((b * g.h + iy) * g.w + ix) * g.c, (i * g.kw + j) * g.c * g.o, ((b * g.oh + y) * g.ow + x) * g.o);
          }
        }
}

}  // namespace

// Direct loops: correct but not yet the im2col + GEMM kernel issue #2 asks for.
Tensor conv2d(const Tensor& input, const Tensor& filters, const Conv2DOptions& options) {
  check_float32(input, "nn::conv2d");
  check_float32(filters, "nn::conv2d");
  const ConvGeom g = conv_geom(input.shape(), filters.shape(), options, "nn::conv2d");
  Tensor out = zeros({g.n, g.oh, g.ow, g.o});
  const float* in = input.data<float>();
  const float* f = filters.data<float>();
  float* o = out.mutable_data<float>();
  for_each_tap(g, [&](int64_t ii, int64_t fi, int64_t oi) {
    for (int64_t c = 0; c < g.c; ++c) {
      const float v = in[ii + c];
      const float* fr = f + fi + c * g.o;
      for (int64_t k = 0; k < g.o; ++k) o[oi + k] += v * fr[k];
    }
  });
  record_op(OpKind::Conv2D, {input, filters}, {out}, conv_attrs(g, options));
  return out;
}

Tensor conv2d_backprop_input(const TensorShape& input_shape, const Tensor& filters, const Tensor& dy,
                             const Conv2DOptions& options) {
  check_float32(filters, "nn::conv2d_backprop_input");
  check_float32(dy, "nn::conv2d_backprop_input");
  const ConvGeom g = conv_geom(input_shape, filters.shape(), options, "nn::conv2d_backprop_input");
  STRATA_CHECK_ARG(dy.shape() == (TensorShape{g.n, g.oh, g.ow, g.o}),
                   "nn::conv2d_backprop_input: expected out_backprop shape ", TensorShape{g.n, g.oh, g.ow, g.o},
                   ", got ", dy.shape());
  Tensor dx = zeros(input_shape);
  const float* f = filters.data<float>();
  const float* d = dy.data<float>();
  float* o = dx.mutable_data<float>();
  for_each_tap(g, [&](int64_t ii, int64_t fi, int64_t oi) {
    for (int64_t c = 0; c < g.c; ++c) {
      const float* fr = f + fi + c * g.o;
      float acc = 0;
      for (int64_t k = 0; k < g.o; ++k) acc += d[oi + k] * fr[k];
      o[ii + c] += acc;
    }
  });
  record_op(OpKind::Conv2DBackpropInput, {filters, dy}, {dx}, conv_attrs(g, options, input_shape));
  return dx;
}

Tensor conv2d_backprop_filter(const Tensor& input, const TensorShape& filter_shape, const Tensor& dy,
                              const Conv2DOptions& options) {
  check_float32(input, "nn::conv2d_backprop_filter");
  check_float32(dy, "nn::conv2d_backprop_filter");
  const ConvGeom g = conv_geom(input.shape(), filter_shape, options, "nn::conv2d_backprop_filter");
  STRATA_CHECK_ARG(dy.shape() == (TensorShape{g.n, g.oh, g.ow, g.o}),
                   "nn::conv2d_backprop_filter: expected out_backprop shape ", TensorShape{g.n, g.oh, g.ow, g.o},
                   ", got ", dy.shape());
  Tensor df = zeros(filter_shape);
  const float* in = input.data<float>();
  const float* d = dy.data<float>();
  float* o = df.mutable_data<float>();
  for_each_tap(g, [&](int64_t ii, int64_t fi, int64_t oi) {
    for (int64_t c = 0; c < g.c; ++c) {
      const float v = in[ii + c];
      float* fr = o + fi + c * g.o;
      for (int64_t k = 0; k < g.o; ++k) fr[k] += v * d[oi + k];
    }
  });
  record_op(OpKind::Conv2DBackpropFilter, {input, dy}, {df}, conv_attrs(g, options, filter_shape));
  return df;
}

namespace {
Tensor pool(const Tensor& input, const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
            const std::string& padding, bool is_max) {
  const char* who = is_max ? "nn::max_pool2d" : "nn::avg_pool2d";
  check_float32(input, who);
  STRATA_CHECK_ARG(input.rank() == 4, who, ": expected NHWC input, got shape ", input.shape());
  const auto k = hw(ksize, who, "ksize");
  const auto s = hw(strides, who, "strides");
  STRATA_CHECK_ARG(k[0] > 0 && k[1] > 0 && s[0] > 0 && s[1] > 0, who, ": expected positive ksize and strides, got ",
                   ksize, " and ", strides);
  const int64_t n = input.shape()[0], h = input.shape()[1], w = input.shape()[2], c = input.shape()[3];
  const auto [oh, ph] = out_and_pad(h, k[0], s[0], padding, who);
  const auto [ow, pw] = out_and_pad(w, k[1], s[1], padding, who);
  Tensor out = Tensor::allocate(DType::float32, TensorShape{n, oh, ow, c});
  const float* in = input.data<float>();
  float* o = out.mutable_data<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t ch = 0; ch < c; ++ch) {
          float acc = is_max ? -INFINITY : 0.f;
          int64_t count = 0;
          for (int64_t i = 0; i < k[0]; ++i) {
            const int64_t iy = y * s[0] + i - ph;
            if (iy < 0 || iy >= h) continue;
            for (int64_t j = 0; j < k[1]; ++j) {
              const int64_t ix = x * s[1] + j - pw;
              if (ix < 0 || ix >= w) continue;
              const float v = in[((b * h + iy) * w + ix) * c + ch];
              acc = is_max ? std::max(acc, v) : acc + v;
              ++count;
            }
          }
          // TF's avg pool divides by the number of in-bounds elements.
          o[((b * oh + y) * ow + x) * c + ch] = is_max ? acc : acc / static_cast<float>(std::max<int64_t>(count, 1));
        }
  OpAttrs attrs;
  attrs.ksize = k;
  attrs.strides = s;
  attrs.padding = padding;
  record_op(is_max ? OpKind::MaxPool2D : OpKind::AvgPool2D, {input}, {out}, attrs);
  return out;
}
}  // namespace

Tensor max_pool2d(const Tensor& input, const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
                  const std::string& padding) {
  return pool(input, ksize, strides, padding, true);
}
Tensor avg_pool2d(const Tensor& input, const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
                  const std::string& padding) {
  return pool(input, ksize, strides, padding, false);
}

namespace {
Tensor pool_grad(const TensorShape& in_shape, const Tensor* input, const Tensor& dy,
                 const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
                 const std::string& padding, bool is_max) {
  const char* who = is_max ? "nn::max_pool2d_grad" : "nn::avg_pool2d_grad";
  check_float32(dy, who);
  STRATA_CHECK_ARG(in_shape.rank() == 4, who, ": expected an NHWC input shape, got ", in_shape);
  const auto k = hw(ksize, who, "ksize");
  const auto s = hw(strides, who, "strides");
  const int64_t n = in_shape[0], h = in_shape[1], w = in_shape[2], c = in_shape[3];
  const auto [oh, ph] = out_and_pad(h, k[0], s[0], padding, who);
  const auto [ow, pw] = out_and_pad(w, k[1], s[1], padding, who);
  STRATA_CHECK_ARG(dy.shape() == (TensorShape{n, oh, ow, c}), who, ": expected out_backprop shape ",
                   TensorShape{n, oh, ow, c}, ", got ", dy.shape());
  Tensor dx = zeros(in_shape);
  float* o = dx.mutable_data<float>();
  const float* d = dy.data<float>();
  const float* in = input ? input->data<float>() : nullptr;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t ch = 0; ch < c; ++ch) {
          float best = -INFINITY;
          int64_t best_i = -1, count = 0;
          for (int pass = 0; pass < 2; ++pass) {
            for (int64_t i = 0; i < k[0]; ++i) {
              const int64_t iy = y * s[0] + i - ph;
              if (iy < 0 || iy >= h) continue;
              for (int64_t j = 0; j < k[1]; ++j) {
                const int64_t ix = x * s[1] + j - pw;
                if (ix < 0 || ix >= w) continue;
                const int64_t idx = ((b * h + iy) * w + ix) * c + ch;
                if (pass == 0) {
                  ++count;
                  if (is_max && in[idx] > best) best = in[idx], best_i = idx;
                } else if (!is_max) {
                  o[idx] += d[((b * oh + y) * ow + x) * c + ch] / static_cast<float>(count);
                }
              }
            }
            if (is_max) break;
          }
          if (is_max && best_i >= 0) o[best_i] += d[((b * oh + y) * ow + x) * c + ch];
        }
  return dx;
}
}  // namespace

Tensor max_pool2d_grad(const Tensor& input, const Tensor& output, const Tensor& out_backprop,
                       const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
                       const std::string& padding) {
  check_float32(input, "nn::max_pool2d_grad");
  Tensor dx = pool_grad(input.shape(), &input, out_backprop, ksize, strides, padding, true);
  OpAttrs attrs;
  attrs.ksize = hw(ksize, "nn::max_pool2d_grad", "ksize");
  attrs.strides = hw(strides, "nn::max_pool2d_grad", "strides");
  attrs.padding = padding;
  record_op(OpKind::MaxPool2DGrad, {input, output, out_backprop}, {dx}, attrs);
  return dx;
}

Tensor avg_pool2d_grad(const TensorShape& input_shape, const Tensor& out_backprop,
                       const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
                       const std::string& padding) {
  Tensor dx = pool_grad(input_shape, nullptr, out_backprop, ksize, strides, padding, false);
  OpAttrs attrs;
  attrs.ksize = hw(ksize, "nn::avg_pool2d_grad", "ksize");
  attrs.strides = hw(strides, "nn::avg_pool2d_grad", "strides");
  attrs.padding = padding;
  attrs.shape = input_shape;
  record_op(OpKind::AvgPool2DGrad, {out_backprop}, {dx}, attrs);
  return dx;
}

Tensor dropout(const Tensor& x, double rate, const DropoutOptions& options) {
  STRATA_CHECK_ARG(rate >= 0 && rate < 1, "dropout: expected rate in [0, 1), got ", rate);
  STRATA_CHECK_ARG(is_floating(x.dtype()), "dropout: expected a floating-point tensor, got dtype ", x.dtype());
  if (rate == 0) return identity(x);
  const TensorShape noise = options.noise_shape ? TensorShape(*options.noise_shape) : x.shape();
  Tensor u = random::uniform(noise, {.dtype = x.dtype(), .seed = options.seed});
  Tensor keep = cast(greater_equal(u, internal::scalar_like(u, rate)), x.dtype());
  return multiply(x, multiply(keep, internal::scalar_like(x, 1.0 / (1.0 - rate))));
}

Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  STRATA_CHECK_ARG(logits.rank() == 2 && labels.rank() == 1 && labels.shape()[0] == logits.shape()[0],
                   "sparse_softmax_cross_entropy_with_logits: expected logits [N, C] and labels [N], got ",
                   logits.shape(), " and ", labels.shape());
  STRATA_CHECK_ARG(labels.dtype() == DType::int32 || labels.dtype() == DType::int64,
                   "sparse_softmax_cross_entropy_with_logits: expected int32 or int64 labels, got dtype ",
                   labels.dtype());
  STRATA_CHECK_ARG(is_floating(logits.dtype()),
                   "sparse_softmax_cross_entropy_with_logits: expected floating logits, got dtype ", logits.dtype());
  const int64_t n = logits.shape()[0], c = logits.shape()[1];
  Tensor out = Tensor::allocate(logits.dtype(), TensorShape{n});
  dispatch_numeric(logits.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_floating_point_v<T>) {
      const T* pl = logits.data<T>();
      T* po = out.mutable_data<T>();
      for (int64_t i = 0; i < n; ++i) {
        const int64_t y = labels.dtype() == DType::int32 ? labels.data<int32_t>()[i] : labels.data<int64_t>()[i];
        STRATA_CHECK_ARG(y >= 0 && y < c, "sparse_softmax_cross_entropy_with_logits: labels[", i, "] = ", y,
                         " is not in [0, ", c, ")");
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
                   "bias_add: expected bias [C] matching the last dimension of value, got ", value.shape(),
                   " and ", bias.shape());
  return add(value, bias);
}

Tensor l2_loss(const Tensor& t) {
  return multiply(reduce_sum(square(t)), internal::scalar_like(t, 0.5));
}

Tensor compute_average_loss(const Tensor& per_example_loss, const ComputeAverageLossOptions& options) {
  Tensor loss = per_example_loss;
  if (options.sample_weight) loss = multiply(loss, *options.sample_weight);
  const int64_t per_replica = per_example_loss.rank() == 0 ? 1 : per_example_loss.shape()[0];
  const int64_t global = options.global_batch_size ? *options.global_batch_size
                                                   : per_replica * current_num_replicas_in_sync();
  STRATA_CHECK_ARG(!options.global_batch_size || global > 0,
                   "compute_average_loss: expected global_batch_size > 0, got ", global);
  Tensor total = reduce_sum(loss);
  if (global == 0) return multiply(total, internal::scalar_like(total, 0.0));
  return divide(total, internal::scalar_like(total, static_cast<double>(global)));
}

}  // namespace nn
}  // namespace strata
