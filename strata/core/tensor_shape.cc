#include "strata/core/tensor_shape.h"

#include "strata/base/errors.h"

namespace strata {

void TensorShape::validate() const {
  for (int64_t d : dims_) {
    STRATA_CHECK_ARG(d >= -1, "TensorShape: expected dimensions >= 0 (or -1 for unknown), got ",
                     dims_);
  }
}

TensorShape TensorShape::unknown_rank() {
  TensorShape s;
  s.known_rank_ = false;
  return s;
}

int64_t TensorShape::dim(int i) const { return dims_[canonical_axis(i, "TensorShape::dim")]; }

bool TensorShape::is_fully_defined() const noexcept {
  if (!known_rank_) return false;
  for (int64_t d : dims_)
    if (d < 0) return false;
  return true;
}

int64_t TensorShape::num_elements() const noexcept {
  if (!is_fully_defined()) return -1;
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

bool TensorShape::is_compatible_with(const TensorShape& other) const noexcept {
  if (!known_rank_ || !other.known_rank_) return true;
  if (rank() != other.rank()) return false;
  for (int i = 0; i < rank(); ++i) {
    if (dims_[i] >= 0 && other.dims_[i] >= 0 && dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

TensorShape TensorShape::merge_with(const TensorShape& other) const {
  STRATA_CHECK_ARG(is_compatible_with(other), "TensorShape::merge_with: shapes ", *this, " and ",
                   other, " are not compatible");
  if (!known_rank_) return other;
  if (!other.known_rank_) return *this;
  std::vector<int64_t> d(dims_);
  for (int i = 0; i < rank(); ++i)
    if (d[i] < 0) d[i] = other.dims_[i];
  return TensorShape(std::move(d));
}

TensorShape TensorShape::with_dim(int i, int64_t d) const {
  std::vector<int64_t> v(dims_);
  v[canonical_axis(i, "TensorShape::with_dim")] = d;
  return TensorShape(std::move(v));
}

TensorShape TensorShape::inserted(int i, int64_t d) const {
  STRATA_CHECK_ARG(i >= 0 && i <= rank(), "TensorShape::inserted: expected position in [0, ",
                   rank(), "], got ", i);
  std::vector<int64_t> v(dims_);
  v.insert(v.begin() + i, d);
  return TensorShape(std::move(v));
}

TensorShape TensorShape::removed(int i) const {
  std::vector<int64_t> v(dims_);
  v.erase(v.begin() + canonical_axis(i, "TensorShape::removed"));
  return TensorShape(std::move(v));
}

TensorShape TensorShape::sub_shape(int begin, int end) const {
  STRATA_CHECK_ARG(0 <= begin && begin <= end && end <= rank(), "TensorShape::sub_shape: range [",
                   begin, ", ", end, ") outside rank ", rank());
  return TensorShape(std::vector<int64_t>(dims_.begin() + begin, dims_.begin() + end));
}

TensorShape TensorShape::concatenate(const TensorShape& other) const {
  std::vector<int64_t> v(dims_);
  v.insert(v.end(), other.dims_.begin(), other.dims_.end());
  return TensorShape(std::move(v));
}

int TensorShape::canonical_axis(int64_t axis, const char* who) const {
  const int64_t r = rank();
  STRATA_CHECK_ARG(axis >= -r && axis < r, who, ": axis ", axis, " is out of range for shape ",
                   *this, " (rank ", r, ")");
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

std::string TensorShape::to_string() const {
  if (!known_rank_) return "<unknown>";
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += dims_[i] < 0 ? std::string("None") : std::to_string(dims_[i]);
  }
  return s + "]";
}

std::ostream& operator<<(std::ostream& os, const TensorShape& s) { return os << s.to_string(); }

}  // namespace strata
