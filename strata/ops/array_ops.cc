#include "strata/ops/array_ops.h"

#include <algorithm>

#include "strata/kernels/array.h"
#include "strata/kernels/elementwise.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/recorder.h"

namespace strata {

Tensor zeros(const TensorShape& shape, DType dtype) { return kernels::fill(dtype, shape, 0.0); }
Tensor ones(const TensorShape& shape, DType dtype) { return kernels::fill(dtype, shape, 1.0); }
Tensor fill(const TensorShape& shape, const Tensor& value) {
  STRATA_CHECK_ARG(value.rank() == 0, "fill: expected a scalar value, got shape ", value.shape());
  return kernels::broadcast_to(value, shape);
}
Tensor zeros_like(const Tensor& x) { return zeros(x.shape(), x.dtype()); }
Tensor ones_like(const Tensor& x) { return ones(x.shape(), x.dtype()); }
Tensor range(int64_t start, int64_t limit, int64_t delta) {
  STRATA_CHECK_ARG(delta != 0, "range: expected a non-zero delta, got 0");
  int64_t n =
      delta > 0 ? (limit - start + delta - 1) / delta : (start - limit - delta - 1) / -delta;
  if (n < 0) n = 0;
  Tensor out = Tensor::allocate(DType::int64, TensorShape{n});
  int64_t* p = out.mutable_data<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = start + i * delta;
  return out;
}
Tensor range(int64_t limit) { return range(0, limit, 1); }

namespace internal {
Tensor reshape_to(const Tensor& x, std::span<const int64_t> shape) {
  // The attrs only when a dispatcher may look at them (copying the shape is a
  // heap allocation, and reshape runs several times a training step).
  if (g_op_dispatcher.load(std::memory_order_relaxed) != nullptr) {
    OpAttrs requested;
    requested.size.assign(shape.begin(), shape.end());  // the requested shape, -1 included
    if (auto out = dispatch(OpKind::Reshape, "reshape", {x}, requested,
                            [&](std::span<const Tensor> in) { return reshape_to(in[0], shape); }))
      return *out;
  }
  int64_t known = 1;
  int unknown = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      STRATA_CHECK_ARG(unknown < 0, "reshape: expected at most one -1, got ", shape);
      unknown = static_cast<int>(i);
    } else {
      STRATA_CHECK_ARG(shape[i] >= 0, "reshape: expected dimensions >= 0 or -1, got ", shape);
      known *= shape[i];
    }
  }
  TensorShape target(shape);
  if (unknown >= 0) {
    STRATA_CHECK_ARG(known > 0 && x.num_elements() % known == 0,
                     "reshape: cannot reshape a tensor of shape ", x.shape(), " into ", shape);
    target = target.with_dim(unknown, x.num_elements() / known);
  }
  STRATA_CHECK_ARG(target.num_elements() == x.num_elements(), "reshape: expected ",
                   x.num_elements(), " elements (shape ", x.shape(), "), got target shape ", shape);
  Tensor out = x.reshaped(target);
  OpAttrs attrs;
  attrs.shape = target;
  record_op(OpKind::Reshape, {x}, {out}, attrs);
  return out;
}
}  // namespace internal

Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape) {
  return internal::reshape_to(x, shape);
}

Tensor expand_dims(const Tensor& x, int64_t axis) {
  STRATA_CHECK_ARG(axis >= -x.rank() - 1 && axis <= x.rank(), "expand_dims: expected axis in [",
                   -x.rank() - 1, ", ", x.rank(), "], got ", axis);
  const int a = static_cast<int>(axis < 0 ? axis + x.rank() + 1 : axis);
  return internal::reshape_to(x, x.shape().inserted(a, 1).dims());
}

Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axis) {
  std::vector<bool> drop(x.rank(), false);
  if (axis.empty()) {
    for (int i = 0; i < x.rank(); ++i) drop[i] = x.shape()[i] == 1;
  } else {
    for (int64_t a : axis) {
      const int c = x.shape().canonical_axis(a, "squeeze");
      STRATA_CHECK_ARG(x.shape()[c] == 1, "squeeze: expected dimension ", a, " to be 1, got shape ",
                       x.shape());
      drop[c] = true;
    }
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < x.rank(); ++i)
    if (!drop[i]) dims.push_back(x.shape()[i]);
  return reshape(x, dims);
}

Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm_in) {
  if (auto out =
          internal::dispatch(OpKind::Transpose, "transpose", {x}, {},
                             [=](std::span<const Tensor> in) { return transpose(in[0], perm_in); }))
    return *out;
  std::vector<int64_t> perm = perm_in;
  if (perm.empty())
    for (int i = x.rank() - 1; i >= 0; --i) perm.push_back(i);
  STRATA_CHECK_ARG(static_cast<int>(perm.size()) == x.rank(),
                   "transpose: expected a permutation of ", x.rank(), " dimensions, got ", perm_in);
  std::vector<bool> seen(x.rank(), false);
  for (auto& p : perm) {
    STRATA_CHECK_ARG(p >= -x.rank() && p < x.rank(), "transpose: expected a permutation, got ",
                     perm_in);
    if (p < 0) p += x.rank();
    STRATA_CHECK_ARG(!seen[p], "transpose: expected a permutation, got ", perm_in);
    seen[p] = true;
  }
  Tensor out = kernels::transpose(x, perm);
  OpAttrs attrs;
  attrs.perm = perm;
  record_op(OpKind::Transpose, {x}, {out}, attrs);
  return out;
}

Tensor broadcast_to(const Tensor& x, const TensorShape& shape) {
  if (auto out = internal::dispatch(
          OpKind::BroadcastTo, "broadcast_to", {x}, {},
          [=](std::span<const Tensor> in) { return broadcast_to(in[0], shape); }))
    return *out;
  STRATA_CHECK_ARG(kernels::broadcast_shape(x.shape(), shape, "broadcast_to") == shape,
                   "broadcast_to: expected a shape that ", x.shape(), " broadcasts to, got ",
                   shape);
  Tensor out = kernels::broadcast_to(x, shape);
  OpAttrs attrs;
  attrs.shape = shape;
  record_op(OpKind::BroadcastTo, {x}, {out}, attrs);
  return out;
}

Tensor concat(const std::vector<Tensor>& values, int64_t axis) {
  if (auto out = internal::dispatch(OpKind::Concat, "concat", std::span<const Tensor>(values), {},
                                    [=](std::span<const Tensor> in) {
                                      return concat(std::vector<Tensor>(in.begin(), in.end()),
                                                    axis);
                                    }))
    return *out;
  STRATA_CHECK_ARG(!values.empty(), "concat: expected at least one tensor, got 0");
  const Tensor& f = values[0];
  STRATA_CHECK_ARG(f.rank() > 0, "concat: expected tensors of rank >= 1, got a scalar");
  const int a = f.shape().canonical_axis(axis, "concat");
  for (const Tensor& v : values) {
    STRATA_CHECK_ARG(v.dtype() == f.dtype() && v.rank() == f.rank() &&
                         v.shape().removed(a) == f.shape().removed(a),
                     "concat: expected equal dtypes and shapes except along axis ", axis, ", got ",
                     f.shape(), " ", f.dtype(), " and ", v.shape(), " ", v.dtype());
  }
  Tensor out = kernels::concat(values, a);
  if (any_recorder_active()) {
    OpAttrs attrs;
    attrs.axis = a;
    record_op(OpKind::Concat, std::span<const Tensor>(values), {&out, 1}, attrs);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& values, int64_t axis) {
  STRATA_CHECK_ARG(!values.empty(), "stack: expected at least one tensor, got 0");
  const int r = values[0].rank();
  STRATA_CHECK_ARG(axis >= -r - 1 && axis <= r, "stack: expected axis in [", -r - 1, ", ", r,
                   "], got ", axis);
  const int64_t a = axis < 0 ? axis + r + 1 : axis;
  std::vector<Tensor> parts;
  for (const Tensor& v : values) {
    STRATA_CHECK_ARG(v.shape() == values[0].shape(), "stack: expected equal shapes, got ",
                     values[0].shape(), " and ", v.shape());
    parts.push_back(expand_dims(v, a));
  }
  return concat(parts, a);
}

Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size) {
  if (auto out =
          internal::dispatch(OpKind::Slice, "slice", {x}, {},
                             [=](std::span<const Tensor> in) { return slice(in[0], begin, size); }))
    return *out;
  STRATA_CHECK_ARG(
      static_cast<int>(begin.size()) == x.rank() && static_cast<int>(size.size()) == x.rank(),
      "slice: expected begin and size of length ", x.rank(), ", got ", begin, " and ", size);
  std::vector<int64_t> sz = size;
  for (int i = 0; i < x.rank(); ++i) {
    const int64_t d = x.shape()[i];
    if (sz[i] == -1) sz[i] = d - begin[i];
    STRATA_CHECK_ARG(begin[i] >= 0 && sz[i] >= 0 && begin[i] + sz[i] <= d, "slice: expected begin ",
                     begin, " and size ", size, " within shape ", x.shape());
  }
  Tensor out = kernels::strided_slice(x, begin, std::vector<int64_t>(x.rank(), 1), TensorShape(sz));
  OpAttrs attrs;
  attrs.begin = begin;
  attrs.size = sz;
  record_op(OpKind::Slice, {x}, {out}, attrs);
  return out;
}

std::vector<Tensor> unstack(const Tensor& x, int64_t axis) {
  const int a = x.shape().canonical_axis(axis, "unstack");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.shape()[a]; ++i) {
    std::vector<int64_t> begin(x.rank(), 0), size = x.shape().dims();
    begin[a] = i;
    size[a] = 1;
    out.push_back(squeeze(slice(x, begin, size), {a}));
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& size_splits, int64_t axis) {
  const int a = x.shape().canonical_axis(axis, "split");
  std::vector<int64_t> sizes = size_splits;
  int64_t known = 0;
  int unknown = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1)
      unknown = static_cast<int>(i);
    else
      known += sizes[i];
  }
  if (unknown >= 0) sizes[unknown] = x.shape()[a] - known;
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  STRATA_CHECK_ARG(total == x.shape()[a], "split: expected sizes summing to ", x.shape()[a],
                   ", got ", size_splits);
  std::vector<Tensor> out;
  int64_t pos = 0;
  for (int64_t s : sizes) {
    std::vector<int64_t> begin(x.rank(), 0), size = x.shape().dims();
    begin[a] = pos;
    size[a] = s;
    out.push_back(slice(x, begin, size));
    pos += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t num_splits, int64_t axis) {
  const int a = x.shape().canonical_axis(axis, "split");
  STRATA_CHECK_ARG(num_splits > 0 && x.shape()[a] % num_splits == 0, "split: expected dimension ",
                   axis, " of shape ", x.shape(), " to be divisible by num_splits, got ",
                   num_splits);
  return split(x, std::vector<int64_t>(num_splits, x.shape()[a] / num_splits), a);
}

Tensor strided_slice(const Tensor& x, const std::vector<int64_t>& begin_in,
                     const std::vector<int64_t>& end_in, const std::vector<int64_t>& strides_in) {
  const int r = x.rank();
  std::vector<int64_t> strides =
      strides_in.empty() ? std::vector<int64_t>(begin_in.size(), 1) : strides_in;
  STRATA_CHECK_ARG(static_cast<int>(begin_in.size()) <= r && begin_in.size() == end_in.size() &&
                       strides.size() == begin_in.size(),
                   "strided_slice: expected begin, end and strides of equal length <= ", r,
                   ", got ", begin_in, ", ", end_in, ", ", strides_in);
  std::vector<int64_t> begin(r), end(r), st(r, 1), dims(r);
  for (int i = 0; i < r; ++i) {
    const int64_t d = x.shape()[i];
    if (i >= static_cast<int>(begin_in.size())) {
      begin[i] = 0;
      end[i] = d;
      dims[i] = d;
      continue;
    }
    const int64_t s = strides[i];
    STRATA_CHECK_ARG(s != 0, "strided_slice: expected non-zero strides, got ", strides_in);
    // Python slice semantics: negative indices count from the end, then clamp.
    auto norm = [&](int64_t v, bool is_begin) {
      if (v < 0) v += d;
      if (s > 0) return std::clamp<int64_t>(v, 0, d);
      (void)is_begin;
      return std::clamp<int64_t>(v, -1, d - 1);
    };
    begin[i] = norm(begin_in[i], true);
    end[i] = norm(end_in[i], false);
    st[i] = s;
    const int64_t n = s > 0 ? (end[i] - begin[i] + s - 1) / s : (begin[i] - end[i] - s - 1) / -s;
    dims[i] = std::max<int64_t>(0, n);
  }
  Tensor out = kernels::strided_slice(x, begin, st, TensorShape(dims));
  OpAttrs attrs;
  attrs.begin = begin;
  attrs.end = end;
  attrs.strides = st;
  record_op(OpKind::StridedSlice, {x}, {out}, attrs);
  return out;
}

Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& paddings,
           double constant_value) {
  if (auto out = internal::dispatch(OpKind::Pad, "pad", {x}, {}, [=](std::span<const Tensor> in) {
        return pad(in[0], paddings, constant_value);
      }))
    return *out;
  STRATA_CHECK_ARG(static_cast<int>(paddings.size()) == x.rank(), "pad: expected ", x.rank(),
                   " {before, after} pairs, got ", paddings.size());
  OpAttrs attrs;
  for (auto [b, a] : paddings) {
    STRATA_CHECK_ARG(b >= 0 && a >= 0, "pad: expected non-negative paddings, got {", b, ", ", a,
                     "}");
    attrs.paddings.push_back(b);
    attrs.paddings.push_back(a);
  }
  attrs.constant_value = constant_value;
  Tensor out = kernels::pad(x, attrs.paddings, constant_value);
  record_op(OpKind::Pad, {x}, {out}, attrs);
  return out;
}

Tensor tile(const Tensor& x, const std::vector<int64_t>& multiples) {
  if (auto out = internal::dispatch(OpKind::Tile, "tile", {x}, {}, [=](std::span<const Tensor> in) {
        return tile(in[0], multiples);
      }))
    return *out;
  STRATA_CHECK_ARG(static_cast<int>(multiples.size()) == x.rank(), "tile: expected ", x.rank(),
                   " multiples, got ", multiples);
  // tile = broadcast of x reshaped to [1, d0, 1, d1, ...] to [m0, d0, m1, d1, ...].
  std::vector<int64_t> ex, bc, outd;
  for (int i = 0; i < x.rank(); ++i) {
    STRATA_CHECK_ARG(multiples[i] >= 0, "tile: expected non-negative multiples, got ", multiples);
    ex.insert(ex.end(), {1, x.shape()[i]});
    bc.insert(bc.end(), {multiples[i], x.shape()[i]});
    outd.push_back(multiples[i] * x.shape()[i]);
  }
  Tensor out = kernels::broadcast_to(x.reshaped(TensorShape(ex)), TensorShape(bc))
                   .reshaped(TensorShape(outd));
  OpAttrs attrs;
  attrs.multiples = multiples;
  record_op(OpKind::Tile, {x}, {out}, attrs);
  return out;
}

Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis) {
  if (auto out = internal::dispatch(
          OpKind::Gather, "gather", {params, indices}, {},
          [=](std::span<const Tensor> in) { return gather(in[0], in[1], axis); }))
    return *out;
  STRATA_CHECK_ARG(params.rank() >= 1, "gather: expected params of rank >= 1, got a scalar");
  const int a = params.shape().canonical_axis(axis, "gather");
  Tensor out = kernels::gather(params, indices, a);
  OpAttrs attrs;
  attrs.axis = a;
  record_op(OpKind::Gather, {params, indices}, {out}, attrs);
  return out;
}

Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments) {
  STRATA_CHECK_ARG(segment_ids.rank() <= data.rank() &&
                       data.shape().sub_shape(0, segment_ids.rank()) == segment_ids.shape(),
                   "unsorted_segment_sum: expected segment_ids shape to prefix data shape, got ",
                   segment_ids.shape(), " and ", data.shape());
  STRATA_CHECK_ARG(num_segments >= 0, "unsorted_segment_sum: expected num_segments >= 0, got ",
                   num_segments);
  Tensor out = kernels::unsorted_segment_sum(data, segment_ids, num_segments);
  OpAttrs attrs;
  attrs.num_segments = num_segments;
  record_op(OpKind::UnsortedSegmentSum, {data, segment_ids}, {out}, attrs);
  return out;
}

Tensor one_hot(const Tensor& indices, int64_t depth, const OneHotOptions& o) {
  STRATA_CHECK_ARG(depth >= 0, "one_hot: expected depth >= 0, got ", depth);
  const int r = indices.rank();
  STRATA_CHECK_ARG(o.axis >= -1 && o.axis <= r, "one_hot: expected axis in [-1, ", r, "], got ",
                   o.axis);
  const int a = o.axis == -1 ? r : static_cast<int>(o.axis);
  return kernels::one_hot(indices, depth, o.on_value, o.off_value, a, o.dtype);
}

}  // namespace strata
