#include "strata/ops/nn_ops.h"

#include <algorithm>
#include <cmath>

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
[[noreturn]] void not_yet(const char* who) {
  throw UnimplementedError(str_cat(who, ": not implemented yet in Strata (issue #2)"));
}
}  // namespace

Tensor conv2d(const Tensor&, const Tensor&, const Conv2DOptions&) { not_yet("nn::conv2d"); }
Tensor conv2d_backprop_input(const TensorShape&, const Tensor&, const Tensor&, const Conv2DOptions&) {
  not_yet("nn::conv2d_backprop_input");
}
Tensor conv2d_backprop_filter(const Tensor&, const TensorShape&, const Tensor&, const Conv2DOptions&) {
  not_yet("nn::conv2d_backprop_filter");
}
Tensor max_pool2d(const Tensor&, const std::vector<int64_t>&, const std::vector<int64_t>&, const std::string&) {
  not_yet("nn::max_pool2d");
}
Tensor avg_pool2d(const Tensor&, const std::vector<int64_t>&, const std::vector<int64_t>&, const std::string&) {
  not_yet("nn::avg_pool2d");
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
