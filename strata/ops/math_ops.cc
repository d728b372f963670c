#include "strata/ops/math_ops.h"

#include <algorithm>
#include <cmath>

#include "strata/kernels/array.h"
#include "strata/kernels/elementwise.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/internal/kernel_opcode.h"
#include "strata/ops/operators.h"
#include "strata/ops/recorder.h"

namespace strata {
namespace {

// Promotes both operands to a common dtype (recorded casts, so tapes stay connected).
std::pair<Tensor, Tensor> promote(const Tensor& a, const Tensor& b) {
  const DType d = promote_types(a.dtype(), b.dtype());
  return {a.dtype() == d ? a : cast(a, d), b.dtype() == d ? b : cast(b, d)};
}

// The kernel opcode comes from ops.def (internal/kernel_opcode.h), so an op
// cannot run one kernel and record itself as another.
template <OpKind kKind>
Tensor binary_op(const Tensor& a0, const Tensor& b0, const char* who) {
  static_assert(op_kernel(kKind) == OpKernel::Binary);
  if (auto out = internal::dispatch(kKind, who, {a0, b0}, {}, [=](std::span<const Tensor> in) {
        return binary_op<kKind>(in[0], in[1], who);
      }))
    return *out;
  auto [a, b] = promote(a0, b0);
  Tensor out = kernels::binary(internal::binary_opcode(kKind), a, b, who);
  record_op(kKind, {a, b}, {out});
  return out;
}

template <OpKind kKind>
Tensor unary_op(const Tensor& x, const char* who, double alpha = 0.0) {
  static_assert(op_kernel(kKind) == OpKernel::Unary);
  OpAttrs attrs;
  attrs.alpha = alpha;
  if (auto out = internal::dispatch(kKind, who, {x}, attrs, [=](std::span<const Tensor> in) {
        return unary_op<kKind>(in[0], who, alpha);
      }))
    return *out;
  Tensor out = kernels::unary(internal::unary_opcode(kKind), x, alpha, who);
  record_op(kKind, {x}, {out}, attrs);
  return out;
}

PooledVector<int64_t> normalise_axes(const Tensor& x, std::span<const int64_t> axis,
                                     const char* who) {
  PooledVector<int64_t> axes;
  if (axis.empty()) {
    for (int i = 0; i < x.rank(); ++i) axes.push_back(i);
    return axes;
  }
  for (int64_t a : axis) {
    STRATA_CHECK_ARG(a >= -x.rank() && a < x.rank(), who, ": expected axis in [", -x.rank(), ", ",
                     x.rank(), "), got ", a, " for shape ", x.shape());
    axes.push_back(a < 0 ? a + x.rank() : a);
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

template <OpKind kKind>
Tensor reduce_op(const Tensor& x, std::span<const int64_t> axis, bool keepdims, const char* who) {
  static_assert(op_kernel(kKind) == OpKernel::Reduce);
  OpAttrs attrs;
  attrs.axes = normalise_axes(x, axis, who);
  attrs.keepdims = keepdims;
  if (auto out = internal::dispatch(kKind, who, {x}, attrs,
                                    [axis, keepdims, who](std::span<const Tensor> in) {
                                      return reduce_op<kKind>(in[0], axis, keepdims, who);
                                    }))
    return *out;
  Tensor out = kernels::reduce(internal::reduce_opcode(kKind), x, attrs.axes, keepdims);
  record_op(kKind, {x}, {out}, attrs);
  return out;
}

}  // namespace

namespace internal {
Tensor scalar_like(const Tensor& like, double value) {
  return kernels::fill(like.dtype(), TensorShape{}, value);
}

Tensor scalar_operand(const Tensor& like, double value, const char* op) {
  const DType d = like.dtype();
  if (d == DType::uint8 || d == DType::int32 || d == DType::int64) {
    const double lo = d == DType::uint8   ? 0.0
                      : d == DType::int32 ? -2147483648.0
                                          : -9.2233720368547758e18;
    const double hi = d == DType::uint8   ? 255.0
                      : d == DType::int32 ? 2147483647.0
                                          : 9.2233720368547758e18;
    STRATA_CHECK_ARG(
        std::isfinite(value) && value == std::floor(value) && value >= lo && value <= hi,
        "operator", op, ": the scalar ", value, " cannot be converted to the tensor's dtype ",
        dtype_name(d),
        " (TensorFlow raises a TypeError); cast the tensor first, e.g. "
        "strata::cast(x, DType::float32) ",
        op, " ", value);
  }
  return scalar_like(like, value);
}
}  // namespace internal

Tensor add(const Tensor& a, const Tensor& b) { return binary_op<OpKind::Add>(a, b, "add"); }
Tensor subtract(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::Sub>(a, b, "subtract");
}
Tensor multiply(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::Mul>(a, b, "multiply");
}
Tensor divide(const Tensor& a, const Tensor& b) {
  const DType d = promote_types(a.dtype(), b.dtype());
  if (!is_floating(d)) {
    // TF's truediv table: uint8 divides as float32, int32 and int64 as float64.
    const DType f = d == DType::uint8 ? DType::float32 : DType::float64;
    return binary_op<OpKind::Div>(cast(a, f), cast(b, f), "divide");
  }
  return binary_op<OpKind::Div>(a, b, "divide");
}
Tensor floordiv(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::FloorDiv>(a, b, "floordiv");
}
Tensor floormod(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::FloorMod>(a, b, "floormod");
}
Tensor pow(const Tensor& a, const Tensor& b) { return binary_op<OpKind::Pow>(a, b, "pow"); }
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::Maximum>(a, b, "maximum");
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::Minimum>(a, b, "minimum");
}
Tensor squared_difference(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::SquaredDifference>(a, b, "squared_difference");
}
Tensor add_n(const std::vector<Tensor>& inputs) {
  if (auto out = internal::dispatch(OpKind::AddN, "add_n", std::span<const Tensor>(inputs), {},
                                    [](std::span<const Tensor> in) {
                                      return add_n(std::vector<Tensor>(in.begin(), in.end()));
                                    }))
    return *out;
  Tensor out = kernels::add_n(inputs);
  if (any_recorder_active())
    record_op(OpKind::AddN, std::span<const Tensor>(inputs), {&out, 1}, {});
  return out;
}

Tensor equal(const Tensor& a, const Tensor& b) { return binary_op<OpKind::Equal>(a, b, "equal"); }
Tensor not_equal(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::NotEqual>(a, b, "not_equal");
}
Tensor less(const Tensor& a, const Tensor& b) { return binary_op<OpKind::Less>(a, b, "less"); }
Tensor less_equal(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::LessEqual>(a, b, "less_equal");
}
Tensor greater(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::Greater>(a, b, "greater");
}
Tensor greater_equal(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::GreaterEqual>(a, b, "greater_equal");
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::LogicalAnd>(a, b, "logical_and");
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return binary_op<OpKind::LogicalOr>(a, b, "logical_or");
}
Tensor logical_not(const Tensor& a) { return unary_op<OpKind::LogicalNot>(a, "logical_not"); }

Tensor identity(const Tensor& x) {
  Tensor out = x.reshaped(x.shape());
  record_op(OpKind::Identity, {x}, {out});
  return out;
}
Tensor negative(const Tensor& x) { return unary_op<OpKind::Neg>(x, "negative"); }
Tensor abs(const Tensor& x) { return unary_op<OpKind::Abs>(x, "abs"); }
Tensor sign(const Tensor& x) { return unary_op<OpKind::Sign>(x, "sign"); }
Tensor exp(const Tensor& x) { return unary_op<OpKind::Exp>(x, "exp"); }
Tensor log(const Tensor& x) { return unary_op<OpKind::Log>(x, "log"); }
Tensor log1p(const Tensor& x) { return unary_op<OpKind::Log1p>(x, "log1p"); }
Tensor sqrt(const Tensor& x) { return unary_op<OpKind::Sqrt>(x, "sqrt"); }
Tensor rsqrt(const Tensor& x) { return unary_op<OpKind::Rsqrt>(x, "rsqrt"); }
Tensor square(const Tensor& x) { return unary_op<OpKind::Square>(x, "square"); }
Tensor reciprocal(const Tensor& x) { return unary_op<OpKind::Reciprocal>(x, "reciprocal"); }
Tensor sin(const Tensor& x) { return unary_op<OpKind::Sin>(x, "sin"); }
Tensor cos(const Tensor& x) { return unary_op<OpKind::Cos>(x, "cos"); }
Tensor floor(const Tensor& x) { return unary_op<OpKind::Floor>(x, "floor"); }
Tensor ceil(const Tensor& x) { return unary_op<OpKind::Ceil>(x, "ceil"); }
Tensor round(const Tensor& x) { return unary_op<OpKind::Round>(x, "round"); }
Tensor relu(const Tensor& x) { return unary_op<OpKind::Relu>(x, "relu"); }
Tensor relu6(const Tensor& x) { return unary_op<OpKind::Relu6>(x, "relu6"); }
Tensor leaky_relu(const Tensor& x, double alpha) {
  return unary_op<OpKind::LeakyRelu>(x, "leaky_relu", alpha);
}
Tensor elu(const Tensor& x) { return unary_op<OpKind::Elu>(x, "elu", 1.0); }
Tensor sigmoid(const Tensor& x) { return unary_op<OpKind::Sigmoid>(x, "sigmoid"); }
Tensor tanh(const Tensor& x) { return unary_op<OpKind::Tanh>(x, "tanh"); }
Tensor softplus(const Tensor& x) { return unary_op<OpKind::Softplus>(x, "softplus"); }
Tensor cast(const Tensor& x, DType dtype) {
  OpAttrs attrs;
  attrs.dtype = dtype;
  if (auto out = internal::dispatch(OpKind::Cast, "cast", {x}, attrs,
                                    [=](std::span<const Tensor> in) { return cast(in[0], dtype); }))
    return *out;
  Tensor out = kernels::cast(x, dtype);
  record_op(OpKind::Cast, {x}, {out}, attrs);
  return out;
}
Tensor where(const Tensor& condition, const Tensor& x0, const Tensor& y0) {
  if (auto out =
          internal::dispatch(OpKind::Select, "where", {condition, x0, y0}, {},
                             [](std::span<const Tensor> in) { return where(in[0], in[1], in[2]); }))
    return *out;
  auto [x, y] = promote(x0, y0);
  Tensor out = kernels::select(condition, x, y);
  record_op(OpKind::Select, {condition, x, y}, {out});
  return out;
}
Tensor stop_gradient(const Tensor& x) { return x.reshaped(x.shape()); }

namespace internal {
Tensor reduce_sum_over(const Tensor& x, std::span<const int64_t> axes, bool keepdims) {
  return reduce_op<OpKind::Sum>(x, axes, keepdims, "reduce_sum");
}
}  // namespace internal

Tensor reduce_sum(const Tensor& x, const ReduceOptions& o) {
  return reduce_op<OpKind::Sum>(x, o.axis, o.keepdims, "reduce_sum");
}
Tensor reduce_mean(const Tensor& x, const ReduceOptions& o) {
  return reduce_op<OpKind::Mean>(x, o.axis, o.keepdims, "reduce_mean");
}
Tensor reduce_max(const Tensor& x, const ReduceOptions& o) {
  return reduce_op<OpKind::Max>(x, o.axis, o.keepdims, "reduce_max");
}
Tensor reduce_min(const Tensor& x, const ReduceOptions& o) {
  return reduce_op<OpKind::Min>(x, o.axis, o.keepdims, "reduce_min");
}
Tensor reduce_prod(const Tensor& x, const ReduceOptions& o) {
  return reduce_op<OpKind::Prod>(x, o.axis, o.keepdims, "reduce_prod");
}
Tensor argmax(const Tensor& x, int64_t axis) {
  return kernels::arg_reduce(true, x, x.shape().canonical_axis(axis, "argmax"));
}
Tensor argmin(const Tensor& x, int64_t axis) {
  return kernels::arg_reduce(false, x, x.shape().canonical_axis(axis, "argmin"));
}

Tensor matmul(const Tensor& a0, const Tensor& b0, const MatMulOptions& options) {
  OpAttrs dispatch_attrs;
  dispatch_attrs.transpose_a = options.transpose_a;
  dispatch_attrs.transpose_b = options.transpose_b;
  if (auto out = internal::dispatch(
          OpKind::MatMul, "matmul", {a0, b0}, dispatch_attrs,
          [=](std::span<const Tensor> in) { return matmul(in[0], in[1], options); }))
    return *out;
  auto [a, b] = promote(a0, b0);
  STRATA_CHECK_ARG(a.rank() >= 2 && b.rank() >= 2,
                   "matmul: expected operands of rank >= 2, got shapes ", a.shape(), " and ",
                   b.shape());
  const int ra = a.rank();
  const int rb = b.rank();
  const int64_t ka = options.transpose_a ? a.shape()[ra - 2] : a.shape()[ra - 1];
  const int64_t kb = options.transpose_b ? b.shape()[rb - 1] : b.shape()[rb - 2];
  STRATA_CHECK_ARG(ka == kb, "matmul: expected matching inner dimensions, got shapes ", a.shape(),
                   " and ", b.shape(), " (transpose_a=", options.transpose_a,
                   ", transpose_b=", options.transpose_b, ")");
  // Batch dims broadcast as NumPy (BatchMatMulV2); the kernel's check would
  // only name the batch dims, so name the operands' full shapes here.
  const TensorShape a_batch = a.shape().sub_shape(0, ra - 2);
  const TensorShape b_batch = b.shape().sub_shape(0, rb - 2);
  for (int i = 1; i <= std::min(a_batch.rank(), b_batch.rank()); ++i) {
    const int64_t da = a_batch[a_batch.rank() - i], db = b_batch[b_batch.rank() - i];
    STRATA_CHECK_ARG(da == db || da == 1 || db == 1, "matmul: batch dimensions ", a_batch, " and ",
                     b_batch, " of shapes ", a.shape(), " and ", b.shape(), " do not broadcast");
  }
  Tensor out = kernels::matmul(a, b, options.transpose_a, options.transpose_b);
  OpAttrs attrs;
  attrs.transpose_a = options.transpose_a;
  attrs.transpose_b = options.transpose_b;
  record_op(OpKind::MatMul, {a, b}, {out}, attrs);
  return out;
}

}  // namespace strata
