#include "strata/data/internal/tensor_util.h"

#include <cstring>
#include <string>

#include "strata/base/errors.h"

namespace strata::data::internal {
namespace {

// Copies `n` elements of dtype d from src[src_off] to dst[dst_off] (element offsets).
void copy_elements(DType d, const Tensor& src, int64_t src_off, const Tensor& dst, int64_t dst_off,
                   int64_t n) {
  if (n <= 0) return;
  if (d == DType::string) {
    const std::string* s = src.data<std::string>() + src_off;
    std::string* t = dst.mutable_data<std::string>() + dst_off;
    for (int64_t i = 0; i < n; ++i) t[i] = s[i];
  } else {
    const size_t es = dtype_size(d);
    std::memcpy(static_cast<char*>(dst.mutable_raw_data()) + dst_off * es,
                static_cast<const char*>(src.raw_data()) + src_off * es,
                static_cast<size_t>(n) * es);
  }
}

// Copies a tensor of shape `sd` into the top-left corner of a region of shape
// `td` starting at element dst_off of dst (td[i] >= sd[i]).
void copy_padded(const Tensor& src, const std::vector<int64_t>& sd, const Tensor& dst,
                 const std::vector<int64_t>& td, int64_t dst_off) {
  const int r = static_cast<int>(sd.size());
  if (r == 0) return copy_elements(src.dtype(), src, 0, dst, dst_off, 1);
  // Strides of the target region and the source.
  std::vector<int64_t> ts(r, 1), ss(r, 1);
  for (int i = r - 2; i >= 0; --i) {
    ts[i] = ts[i + 1] * td[i + 1];
    ss[i] = ss[i + 1] * sd[i + 1];
  }
  const int64_t rows = ss[0] * sd[0] / std::max<int64_t>(sd[r - 1], 1);
  if (sd[r - 1] == 0) return;
  std::vector<int64_t> idx(r, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t so = 0, to = 0;
    for (int i = 0; i < r - 1; ++i) {
      so += idx[i] * ss[i];
      to += idx[i] * ts[i];
    }
    copy_elements(src.dtype(), src, so, dst, dst_off + to, sd[r - 1]);
    for (int i = r - 2; i >= 0; --i) {
      if (++idx[i] < sd[i]) break;
      idx[i] = 0;
    }
  }
}

}  // namespace

void check_batched(const Element& e, const char* who) {
  STRATA_CHECK_ARG(!e.empty(), who, ": expected an element with components, got none");
  for (size_t i = 0; i < e.size(); ++i) {
    STRATA_CHECK_ARG(e[i].rank() >= 1, who, ": expected component ", i,
                     " to have rank >= 1, got shape ", e[i].shape());
    STRATA_CHECK_ARG(e[i].shape().dim(0) == e[0].shape().dim(0), who,
                     ": expected all components to share the leading dimension, got ", e[0].shape(),
                     " and ", e[i].shape());
  }
}

void check_batched_spec(const std::vector<TensorSpec>& spec) {
  for (const TensorSpec& s : spec)
    STRATA_CHECK_ARG(
        !s.shape.has_known_rank() || s.shape.rank() >= 1,
        "Cannot rebatch dataset: All components must have at least one dimension. Perhaps your "
        "input dataset is not batched? Got component spec ",
        s.to_string());
}

Element stack_elements(const std::vector<Element>& rows, const char* who) {
  STRATA_INTERNAL_CHECK(!rows.empty());
  const Element& first = rows[0];
  Element out;
  out.reserve(first.size());
  const int64_t n = static_cast<int64_t>(rows.size());
  for (size_t c = 0; c < first.size(); ++c) {
    const TensorShape& shape = first[c].shape();
    const DType d = first[c].dtype();
    for (int64_t i = 1; i < n; ++i) {
      STRATA_CHECK_ARG(rows[i].size() == first.size(), who, ": expected element ", i, " to have ",
                       first.size(), " components, got ", rows[i].size());
      const Tensor& t = rows[i][c];
      STRATA_CHECK_ARG(t.shape() == shape && t.dtype() == d, who,
                       ": cannot batch tensors with different shapes in component ", c,
                       ". First element had shape ", shape, " and element ", i, " had shape ",
                       t.shape(), (t.dtype() == d ? "" : " (dtypes differ)"));
    }
    Tensor dst = Tensor::allocate(d, shape.inserted(0, n));
    const int64_t per = shape.num_elements();
    for (int64_t i = 0; i < n; ++i) copy_elements(d, rows[i][c], 0, dst, i * per, per);
    out.push_back(std::move(dst));
  }
  out.with_names_of(first);
  return out;
}

Element concat_elements(const std::vector<Element>& parts) {
  STRATA_INTERNAL_CHECK(!parts.empty());
  Element out;
  for (size_t c = 0; c < parts[0].size(); ++c) {
    int64_t rows = 0;
    const TensorShape inner = parts[0][c].shape().removed(0);
    for (const Element& p : parts) {
      STRATA_CHECK_ARG(p[c].shape().removed(0) == inner,
                       "rebatch: expected batches with row shape ", inner, " in component ", c,
                       ", got ", p[c].shape());
      rows += p[c].shape().dim(0);
    }
    const DType d = parts[0][c].dtype();
    Tensor dst = Tensor::allocate(d, inner.inserted(0, rows));
    int64_t off = 0;
    for (const Element& p : parts) {
      copy_elements(d, p[c], 0, dst, off, p[c].num_elements());
      off += p[c].num_elements();
    }
    out.push_back(std::move(dst));
  }
  out.with_names_of(parts[0]);
  return out;
}

Element pad_and_stack(const std::vector<Element>& rows,
                      const std::vector<TensorShape>& padded_shapes,
                      const std::vector<Tensor>& padding_values) {
  Element out;
  const int64_t n = static_cast<int64_t>(rows.size());
  for (size_t c = 0; c < rows[0].size(); ++c) {
    const DType d = rows[0][c].dtype();
    const int r = rows[0][c].rank();
    std::vector<int64_t> longest(r, 0);
    for (int64_t i = 0; i < n; ++i) {
      const Tensor& t = rows[i][c];
      STRATA_CHECK_ARG(t.rank() == r && t.dtype() == d, "padded_batch: expected element ", i,
                       " component ", c, " of rank ", r, " and dtype ", d, ", got shape ",
                       t.shape(), " dtype ", t.dtype());
      for (int k = 0; k < r; ++k) longest[k] = std::max(longest[k], t.shape().dim(k));
    }
    std::vector<int64_t> target = longest;
    if (!padded_shapes.empty()) {
      for (int k = 0; k < r; ++k) {
        const int64_t p = padded_shapes[c].dim(k);
        if (p < 0) continue;
        STRATA_CHECK_ARG(p >= longest[k], "padded_batch: expected component ", c, " dimension ", k,
                         " to fit the padded shape ", padded_shapes[c], ", got a tensor with size ",
                         longest[k]);
        target[k] = p;
      }
    }
    const TensorShape row_shape(target);
    Tensor dst = Tensor::allocate(d, row_shape.inserted(0, n));
    const int64_t per = row_shape.num_elements();
    const int64_t total = per * n;
    if (d == DType::string) {
      const std::string pad =
          padding_values.empty() ? std::string() : padding_values[c].data<std::string>()[0];
      std::string* p = dst.mutable_data<std::string>();
      for (int64_t i = 0; i < total; ++i) p[i] = pad;
    } else if (padding_values.empty()) {
      std::memset(dst.mutable_raw_data(), 0, static_cast<size_t>(total) * dtype_size(d));
    } else {
      const size_t es = dtype_size(d);
      char* p = static_cast<char*>(dst.mutable_raw_data());
      for (int64_t i = 0; i < total; ++i) std::memcpy(p + i * es, padding_values[c].raw_data(), es);
    }
    for (int64_t i = 0; i < n; ++i)
      copy_padded(rows[i][c], rows[i][c].shape().dims(), dst, target, i * per);
    out.push_back(std::move(dst));
  }
  out.with_names_of(rows[0]);
  return out;
}

}  // namespace strata::data::internal
