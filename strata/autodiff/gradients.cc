// The gradient table: one switch over every OpKind of strata/ops/ops.def, with
// no default, so a new op does not build until it has a gradient here or is
// marked non-differentiable. Every gradient is written with public ops, so
// while an outer tape records, the gradient computation is itself
// differentiable (higher-order gradients).

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/collective_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/operators.h"
#include "strata/ops/recorder.h"

namespace strata::autodiff {

namespace {

using Grads = PooledVector<Tensor>;

// Sums `g` over the dimensions that broadcasting added or stretched, back to `shape`.
Tensor unbroadcast(const Tensor& g, const TensorShape& shape) {
  if (g.shape() == shape) return g;
  const int gr = g.rank();
  const int r = shape.rank();
  PooledVector<int64_t> axes;
  for (int i = 0; i < gr; ++i) {
    const int j = i - (gr - r);
    if (j < 0 || (shape.dim(j) == 1 && g.shape().dim(i) != 1)) axes.push_back(i);
  }
  Tensor s = axes.empty() ? g : strata::internal::reduce_sum_over(g, axes, /*keepdims=*/true);
  return strata::internal::reshape_to(s, shape.dims());
}

// The gradient of input k: reduced to its shape and cast to its dtype (inputs
// of mixed float dtypes were promoted by the op).
Tensor fit(const Tensor& g, const OpRecord& op, size_t k) {
  if (!is_floating(op.in[k].dtype)) return Tensor();
  Tensor t = unbroadcast(g, op.in[k].shape);
  if (t.dtype() != op.in[k].dtype) t = cast(t, op.in[k].dtype);
  return t;
}

Tensor as_float_mask(const Tensor& b, const Tensor& like) { return cast(b, like.dtype()); }

PooledVector<int64_t> reduction_axes(const OpRecord& op) {
  const int rank = op.in[0].shape.rank();
  PooledVector<int64_t> axes;
  if (op.attrs.axes.empty()) {
    axes.resize(rank);
    std::iota(axes.begin(), axes.end(), 0);
  } else {
    for (int64_t a : op.attrs.axes) axes.push_back(a < 0 ? a + rank : a);
  }
  return axes;
}

// The input shape with the reduced axes kept as 1.
TensorShape kept_shape(const OpRecord& op) {
  TensorShape kept = op.in[0].shape;
  for (int64_t a : reduction_axes(op)) kept = kept.with_dim(static_cast<int>(a), 1);
  return kept;
}

// g of a reduction, broadcast back over the input.
Tensor spread(const Tensor& g, const OpRecord& op) {
  return broadcast_to(strata::internal::reshape_to(g, kept_shape(op).dims()), op.in[0].shape);
}

// Scatters `g` (the strided selection begin + j * stride per dim) into a zero
// tensor of `full`: the adjoint of strided_slice. Stride-1 dims use pad;
// others an unsorted_segment_sum along that dim.
Tensor scatter_strided(Tensor g, const TensorShape& full, const std::vector<int64_t>& begin,
                       const std::vector<int64_t>& strides) {
  const int rank = full.rank();
  for (int d = 0; d < rank; ++d) {
    const int64_t n = g.shape().dim(d);
    const int64_t stride = strides.empty() ? 1 : strides[d];
    if (n == full.dim(d) && begin[d] == 0 && stride == 1) continue;
    if (stride == 1) {
      std::vector<std::pair<int64_t, int64_t>> pads(rank, {0, 0});
      pads[d] = {begin[d], full.dim(d) - begin[d] - n};
      g = pad(g, pads);
      continue;
    }
    std::vector<int64_t> ids(n);
    for (int64_t j = 0; j < n; ++j) ids[j] = begin[d] + j * stride;
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[0], perm[d]);  // a swap is its own inverse
    Tensor t = d == 0 ? g : transpose(g, perm);
    t = unsorted_segment_sum(t, constant(ids), full.dim(d));
    g = d == 0 ? t : transpose(t, perm);
  }
  return g;
}

// An input nobody differentiates (the first layer's data) gets no product:
// for a Dense layer on the input batch that GEMM is the step's largest.
Grads matmul_grad(const OpRecord& op, const Tensor& g, bool need_a, bool need_b) {
  const Tensor& a = op.input(0);
  const Tensor& b = op.input(1);
  const bool ta = op.attrs.transpose_a;
  const bool tb = op.attrs.transpose_b;
  Tensor ga, gb;
  if (!ta && !tb) {
    if (need_a) ga = matmul(g, b, {.transpose_b = true});
    if (need_b) gb = matmul(a, g, {.transpose_a = true});
  } else if (!ta && tb) {
    if (need_a) ga = matmul(g, b);
    if (need_b) gb = matmul(g, a, {.transpose_a = true});
  } else if (ta && !tb) {
    if (need_a) ga = matmul(b, g, {.transpose_b = true});
    if (need_b) gb = matmul(a, g);
  } else {
    if (need_a) ga = matmul(b, g, {.transpose_a = true, .transpose_b = true});
    if (need_b) gb = matmul(g, a, {.transpose_a = true, .transpose_b = true});
  }
  // Broadcast batch dimensions are summed back.
  return {need_a ? fit(ga, op, 0) : Tensor(), need_b ? fit(gb, op, 1) : Tensor()};
}

// Window geometry of a 2-D pool over NHWC input, as TF computes it.
struct PoolGeometry {
  int64_t kh, kw, sh, sw, oh, ow, pad_top, pad_left, pad_bottom, pad_right;
};

std::vector<int64_t> hw(const std::vector<int64_t>& v, const char* what) {
  if (v.size() == 2) return v;
  STRATA_CHECK_ARG(v.size() == 4, "pool gradient: expected ", what, " of length 2 or 4, got ",
                   v.size());
  return {v[1], v[2]};
}

PoolGeometry pool_geometry(const OpRecord& op) {
  const TensorShape& in = op.in[0].shape;
  const auto k = hw(op.attrs.ksize, "ksize");
  const auto s = hw(op.attrs.strides, "strides");
  PoolGeometry p{k[0], k[1], s[0], s[1], 0, 0, 0, 0, 0, 0};
  const int64_t h = in.dim(1), w = in.dim(2);
  if (op.attrs.padding == "SAME") {
    p.oh = (h + p.sh - 1) / p.sh;
    p.ow = (w + p.sw - 1) / p.sw;
    const int64_t ph = std::max<int64_t>((p.oh - 1) * p.sh + p.kh - h, 0);
    const int64_t pw = std::max<int64_t>((p.ow - 1) * p.sw + p.kw - w, 0);
    p.pad_top = ph / 2;
    p.pad_bottom = ph - p.pad_top;
    p.pad_left = pw / 2;
    p.pad_right = pw - p.pad_left;
  } else {
    STRATA_CHECK(UNIMPLEMENTED, op.attrs.padding == "VALID",
                 "pool gradient: expected padding SAME or VALID, got ", op.attrs.padding);
    p.oh = (h - p.kh) / p.sh + 1;
    p.ow = (w - p.kw) / p.sw + 1;
  }
  return p;
}

// The elements of padded input `xp` under window offset (a, b) for every output position.
Tensor window_slice(const Tensor& xp, const PoolGeometry& p, int64_t a, int64_t b) {
  const TensorShape& s = xp.shape();
  return strided_slice(xp, {0, a, b, 0},
                       {s.dim(0), a + (p.oh - 1) * p.sh + 1, b + (p.ow - 1) * p.sw + 1, s.dim(3)},
                       {1, p.sh, p.sw, 1});
}

Tensor unpad(const Tensor& gp, const PoolGeometry& p, const TensorShape& in) {
  if (p.pad_top == 0 && p.pad_left == 0 && p.pad_bottom == 0 && p.pad_right == 0) return gp;
  return slice(gp, {0, p.pad_top, p.pad_left, 0}, {in.dim(0), in.dim(1), in.dim(2), in.dim(3)});
}

std::vector<std::pair<int64_t, int64_t>> pool_pads(const PoolGeometry& p) {
  return {{0, 0}, {p.pad_top, p.pad_bottom}, {p.pad_left, p.pad_right}, {0, 0}};
}

// True if a tape still recording on this thread (an outer one: the tape
// computing this gradient has paused itself) tracks one of `ts`.
bool tracked_by_active_tape(std::initializer_list<const Tensor*> ts) {
  for (const OpRecorder* r : active_recorders()) {
    for (const Tensor* t : ts) {
      if (r->is_tracking(*t)) return true;
    }
  }
  return false;
}

// MaxPool: each output's gradient goes to the first maximum of its window
// (TF's MaxPoolGrad picks one position per window). When no tape records the
// gradient computation the MaxPoolGrad kernel does it in one pass; otherwise it
// is composed of differentiable ops (window by window), so that second-order
// gradients exist (MaxPool2DGrad itself is not differentiable).
Tensor max_pool_grad(const OpRecord& op, const Tensor& g) {
  const Tensor& x = op.input(0);
  const Tensor& y = op.output(0);
  if (!tracked_by_active_tape({&x, &y, &g})) {
    return nn::max_pool2d_grad(x, y, g, op.attrs.ksize, op.attrs.strides, op.attrs.padding);
  }
  const PoolGeometry p = pool_geometry(op);
  const Tensor xp = pad(x, pool_pads(p), -std::numeric_limits<double>::infinity());
  Tensor taken = zeros(y.shape(), DType::bool_);
  Tensor acc;
  for (int64_t a = 0; a < p.kh; ++a) {
    for (int64_t b = 0; b < p.kw; ++b) {
      const Tensor hit = logical_and(equal(window_slice(xp, p, a, b), y), logical_not(taken));
      taken = logical_or(taken, hit);
      const Tensor part =
          scatter_strided(g * as_float_mask(hit, g), xp.shape(), {0, a, b, 0}, {1, p.sh, p.sw, 1});
      acc = acc.defined() ? acc + part : part;
    }
  }
  return unpad(acc, p, x.shape());
}

nn::Conv2DOptions conv_options(const OpRecord& op) {
  return {
      .strides = op.attrs.strides, .padding = op.attrs.padding, .dilations = op.attrs.dilations};
}

Tensor gather_grad(const OpRecord& op, const Tensor& g) {
  const Tensor& indices = op.input(1);
  const TensorShape& params = op.in[0].shape;
  const int prank = params.rank();
  const int64_t axis = op.attrs.axis < 0 ? op.attrs.axis + prank : op.attrs.axis;
  const int irank = indices.rank();
  const int grank = g.rank();
  // g: params[:axis] + indices.shape + params[axis+1:]. Move the index dims
  // first, flatten them, scatter-add along dim 0, then move that dim back.
  std::vector<int64_t> perm;
  perm.reserve(irank);
  for (int i = 0; i < irank; ++i) perm.push_back(axis + i);
  for (int i = 0; i < axis; ++i) perm.push_back(i);
  for (int i = static_cast<int>(axis) + irank; i < grank; ++i) perm.push_back(i);
  Tensor t = axis == 0 ? g : transpose(g, perm);
  std::vector<int64_t> flat = {indices.num_elements()};
  for (int i = 0; i < prank; ++i) {
    if (i != axis) flat.push_back(params.dim(i));
  }
  t = reshape(t, flat);
  t = unsorted_segment_sum(t, reshape(indices, {-1}), params.dim(static_cast<int>(axis)));
  if (axis == 0) return t;
  std::vector<int64_t> back;
  for (int i = 1; i <= axis; ++i) back.push_back(i);
  back.push_back(0);
  for (int i = static_cast<int>(axis) + 1; i < prank; ++i) back.push_back(i);
  return transpose(t, back);
}

Tensor tile_grad(const OpRecord& op, const Tensor& g) {
  const TensorShape& in = op.in[0].shape;
  std::vector<int64_t> split_dims;
  std::vector<int64_t> axes;
  for (int i = 0; i < in.rank(); ++i) {
    split_dims.push_back(op.attrs.multiples[i]);
    split_dims.push_back(in.dim(i));
    axes.push_back(2 * i);
  }
  if (axes.empty()) return g;
  return reduce_sum(reshape(g, split_dims), {.axis = axes});
}

}  // namespace

PooledVector<Tensor> op_gradient(const OpRecord& op, const PooledVector<Tensor>& output_grads,
                                 const PooledVector<bool>& needed) {
  auto need = [&](size_t k) { return needed.empty() || needed[k]; };
  const Tensor& g = output_grads[0];
  // Values only through the record's checked accessors: a gradient reading
  // one that ops.def's grad_needs does not declare is an InternalError.
  auto in = [&](size_t k) -> const Tensor& { return op.input(k); };
  auto y = [&]() -> const Tensor& { return op.output(0); };
  switch (op.kind) {
    // --- element-wise binary ---
    case OpKind::Add: return {fit(g, op, 0), fit(g, op, 1)};
    case OpKind::Sub: return {fit(g, op, 0), fit(-g, op, 1)};
    case OpKind::Mul: return {fit(g * in(1), op, 0), fit(g * in(0), op, 1)};
    case OpKind::Div: return {fit(g / in(1), op, 0), fit(-g * in(0) / square(in(1)), op, 1)};
    case OpKind::Pow: {
      // d/dx x^y = y x^(y-1); d/dy x^y = x^y log x, taken as 0 where x <= 0 (TF).
      const Tensor& x = in(0);
      const Tensor& p = in(1);
      const Tensor gx = g * p * pow(x, p - 1.0);
      const Tensor safe_log = where(x > 0.0, log(where(x > 0.0, x, ones_like(x))), zeros_like(x));
      const Tensor gy = g * y() * safe_log;
      return {fit(gx, op, 0), fit(gy, op, 1)};
    }
    case OpKind::Maximum: {
      const Tensor xmask = as_float_mask(greater_equal(in(0), in(1)), g);
      return {fit(g * xmask, op, 0), fit(g * (1.0 - xmask), op, 1)};
    }
    case OpKind::Minimum: {
      const Tensor xmask = as_float_mask(less_equal(in(0), in(1)), g);
      return {fit(g * xmask, op, 0), fit(g * (1.0 - xmask), op, 1)};
    }
    case OpKind::SquaredDifference: {
      const Tensor gx = 2.0 * g * (in(0) - in(1));
      return {fit(gx, op, 0), fit(-gx, op, 1)};
    }
    case OpKind::FloorDiv:
    case OpKind::FloorMod:
    case OpKind::Equal:
    case OpKind::NotEqual:
    case OpKind::Less:
    case OpKind::LessEqual:
    case OpKind::Greater:
    case OpKind::GreaterEqual:
    case OpKind::LogicalAnd:
    case OpKind::LogicalOr:
    case OpKind::LogicalNot:
    case OpKind::Sign:
    case OpKind::Floor:
    case OpKind::Ceil:
    case OpKind::Round:
    case OpKind::ArgMax:
    case OpKind::ArgMin:
    case OpKind::OneHot:
    case OpKind::MaxPool2DGrad:
      // Not differentiable (ops.def): never recorded; zero/none gradient like TF.
      return Grads(op.in.size());
    // --- element-wise unary ---
    case OpKind::Identity: return {g};
    case OpKind::Neg: return {-g};
    case OpKind::Abs: return {g * sign(in(0))};
    case OpKind::Exp: return {g * y()};
    case OpKind::Log: return {g / in(0)};
    case OpKind::Log1p: return {g / (1.0 + in(0))};
    case OpKind::Sqrt: return {g * 0.5 / y()};
    case OpKind::Rsqrt: return {g * -0.5 * y() * y() * y()};
    case OpKind::Square: return {g * 2.0 * in(0)};
    case OpKind::Reciprocal: return {-g * y() * y()};
    case OpKind::Sin: return {g * cos(in(0))};
    case OpKind::Cos: return {-g * sin(in(0))};
    case OpKind::Relu: return {nn::relu_grad(g, y())};  // y > 0 exactly where x > 0
    case OpKind::ReluGrad:
      // As TF's _ReluGradGrad: linear in the gradients, constant in the features.
      return {nn::relu_grad(g, in(1)), zeros_like(in(1))};
    case OpKind::Relu6: return {g * as_float_mask(logical_and(in(0) > 0.0, in(0) < 6.0), g)};
    case OpKind::LeakyRelu: return {where(in(0) > 0.0, g, g * op.attrs.alpha)};
    case OpKind::Elu: return {where(y() > 0.0, g, g * (y() + 1.0))};
    case OpKind::Sigmoid: return {g * y() * (1.0 - y())};
    case OpKind::Tanh: return {g * (1.0 - y() * y())};
    case OpKind::Softplus: return {g * sigmoid(in(0))};
    case OpKind::Cast:
      // TF: only between floating dtypes.
      if (!is_floating(op.in[0].dtype) || !is_floating(op.out[0].dtype)) return {Tensor()};
      return {cast(g, op.in[0].dtype)};
    case OpKind::Select: {
      const Tensor& cond = in(0);
      const Tensor zero = zeros_like(g);
      return {Tensor(), fit(where(cond, g, zero), op, 1), fit(where(cond, zero, g), op, 2)};
    }
    case OpKind::AddN: return Grads(op.in.size(), g);
    // --- reductions ---
    case OpKind::Sum: return {spread(g, op)};
    case OpKind::Mean: {
      const double n = static_cast<double>(op.in[0].shape.num_elements());
      const double m = static_cast<double>(std::max<int64_t>(op.out[0].shape.num_elements(), 1));
      return {spread(g, op) * (m / std::max(n, 1.0))};
    }
    case OpKind::Max:
    case OpKind::Min: {
      // Ties share the gradient equally (TF's reduce_max gradient).
      const Tensor mask =
          as_float_mask(equal(in(0), strata::internal::reshape_to(y(), kept_shape(op).dims())), g);
      const Tensor count =
          strata::internal::reduce_sum_over(mask, reduction_axes(op), /*keepdims=*/true);
      return {spread(g, op) * mask / count};
    }
    case OpKind::Prod:
      // d prod / d x_i = prod / x_i.
      // TODO(#3): exact gradient at zeros needs an exclusive cumprod (TF); here zeros give inf/nan.
      return {spread(g, op) * strata::internal::reshape_to(y(), kept_shape(op).dims()) / in(0)};
    // --- shape and layout ---
    case OpKind::Reshape: return {strata::internal::reshape_to(g, op.in[0].shape.dims())};
    case OpKind::Transpose: {
      std::vector<int64_t> perm = op.attrs.perm;
      const int rank = op.in[0].shape.rank();
      if (perm.empty()) {
        for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
      }
      std::vector<int64_t> inverse(rank);
      for (int i = 0; i < rank; ++i) inverse[perm[i] < 0 ? perm[i] + rank : perm[i]] = i;
      return {transpose(g, inverse)};
    }
    case OpKind::BroadcastTo: return {fit(g, op, 0)};
    case OpKind::Concat: {
      const int rank = g.rank();
      const int64_t axis = op.attrs.axis < 0 ? op.attrs.axis + rank : op.attrs.axis;
      std::vector<int64_t> sizes;
      for (const TensorRecord& r : op.in) sizes.push_back(r.shape.dim(static_cast<int>(axis)));
      const std::vector<Tensor> parts = split(g, sizes, axis);
      return Grads(parts.begin(), parts.end());
    }
    case OpKind::Slice: {
      const TensorShape& s = op.in[0].shape;
      std::vector<std::pair<int64_t, int64_t>> pads;
      for (int i = 0; i < s.rank(); ++i) {
        const int64_t b = op.attrs.begin[i];
        pads.push_back({b, s.dim(i) - b - op.out[0].shape.dim(i)});
      }
      return {pad(g, pads)};
    }
    case OpKind::StridedSlice: {
      const TensorShape& out = op.out[0].shape;
      if (out.num_elements() == 0) return {zeros(op.in[0].shape, g.dtype())};
      return {scatter_strided(g, op.in[0].shape, op.attrs.begin, op.attrs.strides)};
    }
    case OpKind::Pad: {
      const TensorShape& s = op.in[0].shape;
      std::vector<int64_t> begin;
      begin.reserve(s.rank());
      for (int i = 0; i < s.rank(); ++i) begin.push_back(op.attrs.paddings[2 * i]);
      return {slice(g, begin, s.dims())};
    }
    case OpKind::Tile: return {tile_grad(op, g)};
    case OpKind::Gather: return {gather_grad(op, g), Tensor()};
    case OpKind::UnsortedSegmentSum: return {gather(g, in(1), 0), Tensor()};
    // --- linear algebra ---
    case OpKind::MatMul: return matmul_grad(op, g, need(0), need(1));
    // --- neural network ---
    case OpKind::Softmax:
      return {y() * (g - reduce_sum(g * y(), {.axis = {-1}, .keepdims = true}))};
    case OpKind::LogSoftmax:
      return {g - exp(y()) * reduce_sum(g, {.axis = {-1}, .keepdims = true})};
    case OpKind::Conv2D: {
      const auto opts = conv_options(op);
      return {need(0) ? nn::conv2d_backprop_input(op.in[0].shape, in(1), g, opts) : Tensor(),
              need(1) ? nn::conv2d_backprop_filter(in(0), op.in[1].shape, g, opts) : Tensor()};
    }
    case OpKind::Conv2DBackpropInput: {
      // (filter, out_backprop) -> dx, as TF's _Conv2DBackpropInputGrad.
      const auto opts = conv_options(op);
      return {nn::conv2d_backprop_filter(g, op.in[0].shape, in(1), opts),
              nn::conv2d(g, in(0), opts)};
    }
    case OpKind::Conv2DBackpropFilter: {
      // (input, out_backprop) -> dfilter, as TF's _Conv2DBackpropFilterGrad.
      const auto opts = conv_options(op);
      return {nn::conv2d_backprop_input(op.in[0].shape, g, in(1), opts),
              nn::conv2d(in(0), g, opts)};
    }
    case OpKind::MaxPool2D: return {max_pool_grad(op, g)};
    case OpKind::AvgPool2D:
      // AvgPool2DGrad is itself differentiable (its gradient is an avg pool).
      return {nn::avg_pool2d_grad(op.in[0].shape, g, hw(op.attrs.ksize, "ksize"),
                                  hw(op.attrs.strides, "strides"), op.attrs.padding)};
    case OpKind::AvgPool2DGrad: {
      const auto k = hw(op.attrs.ksize, "ksize");
      const auto s = hw(op.attrs.strides, "strides");
      return {nn::avg_pool2d(g, k, s, op.attrs.padding)};
    }
    case OpKind::SparseSoftmaxCrossEntropyWithLogits: {
      const Tensor& logits = in(0);
      const int64_t classes = op.in[0].shape.dim(-1);
      const Tensor onehot = one_hot(in(1), classes, {.dtype = logits.dtype()});
      return {(softmax(logits) - onehot) * expand_dims(g, -1), Tensor()};
    }
    // --- collectives across replicas (TF's ReplicaContext custom gradients) ---
    // y_j = sum_i x_i on every replica j, so dL/dx_i = sum_j dy_j: the same
    // all-reduce of the upstream gradient (MEAN: the mean of dy_j, likewise).
    case OpKind::CollectiveReduce: return {collective_all_reduce({g}, op.attrs.mean)[0]};
    // y = concat_i x_i on every replica: dL/dx_i is the slice of sum_j dy_j at
    // x_i's rows; x_i's offset is the sum of the earlier replicas' sizes,
    // gathered from every replica as TF does.
    case OpKind::CollectiveGather: {
      const int64_t axis = op.attrs.axis;
      const TensorShape& s = op.in[0].shape;
      const int64_t n = s.dim(static_cast<int>(axis));
      const Tensor summed = collective_all_reduce({g}, /*mean=*/false)[0];
      const std::vector<int64_t> sizes =
          collective_all_gather({constant(std::vector<int64_t>{n})}, 0)[0].to_vector<int64_t>();
      const ReplicaCollectives* c = current_replica_collectives();
      const int replica = c != nullptr ? c->replica_id() : 0;
      STRATA_INTERNAL_CHECK(replica < static_cast<int>(sizes.size()));
      std::vector<int64_t> begin(static_cast<size_t>(s.rank()), 0);
      begin[static_cast<size_t>(axis)] =
          std::accumulate(sizes.begin(), sizes.begin() + replica, int64_t{0});
      return {slice(summed, begin, s.dims())};
    }
  }
  STRATA_INTERNAL_CHECK(false, "op_gradient: unknown OpKind ", static_cast<int>(op.kind));
  return {};
}

}  // namespace strata::autodiff
