#include "strata/core/tensor_shape.h"

#include <algorithm>

#include "strata/base/errors.h"

namespace strata {

bool operator==(DimsView a, DimsView b) noexcept {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

void TensorShape::assign(std::span<const int64_t> dims) {
  for (int64_t d : dims) {
    STRATA_CHECK_ARG(d >= -1, "TensorShape: expected dimensions >= 0 (or -1 for unknown), got ",
                     std::vector<int64_t>(dims.begin(), dims.end()));
  }
  rank_ = dims.size();
  if (rank_ <= kInlineDims) {
    std::copy(dims.begin(), dims.end(), inline_.begin());
    heap_.clear();
  } else {
    heap_.assign(dims.begin(), dims.end());
  }
}

TensorShape TensorShape::unknown_rank() {
  TensorShape s;
  s.known_rank_ = false;
  return s;
}

int64_t TensorShape::dim(int i) const { return data()[canonical_axis(i, "TensorShape::dim")]; }

bool TensorShape::is_fully_defined() const noexcept {
  if (!known_rank_) return false;
  for (int64_t d : dims())
    if (d < 0) return false;
  return true;
}

int64_t TensorShape::num_elements() const noexcept {
  if (!is_fully_defined()) return -1;
  int64_t n = 1;
  for (int64_t d : dims()) n *= d;
  return n;
}

bool TensorShape::is_compatible_with(const TensorShape& other) const noexcept {
  if (!known_rank_ || !other.known_rank_) return true;
  if (rank() != other.rank()) return false;
  const DimsView a = dims(), b = other.dims();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  }
  return true;
}

TensorShape TensorShape::merge_with(const TensorShape& other) const {
  STRATA_CHECK_ARG(is_compatible_with(other), "TensorShape::merge_with: shapes ", *this, " and ",
                   other, " are not compatible");
  if (!known_rank_) return other;
  if (!other.known_rank_) return *this;
  TensorShape merged = *this;
  int64_t* d = merged.data();
  for (int i = 0; i < rank(); ++i)
    if (d[i] < 0) d[i] = other.data()[i];
  return merged;
}

TensorShape TensorShape::with_dim(int i, int64_t d) const {
  const int axis = canonical_axis(i, "TensorShape::with_dim");
  STRATA_CHECK_ARG(d >= -1, "TensorShape: expected dimensions >= 0 (or -1 for unknown), got ", d);
  TensorShape s = *this;
  s.data()[axis] = d;
  return s;
}

TensorShape TensorShape::inserted(int i, int64_t d) const {
  STRATA_CHECK_ARG(i >= 0 && i <= rank(), "TensorShape::inserted: expected position in [0, ",
                   rank(), "], got ", i);
  STRATA_CHECK_ARG(d >= -1, "TensorShape: expected dimensions >= 0 (or -1 for unknown), got ", d);
  TensorShape s;
  s.set_rank(rank_ + 1);
  std::copy(data(), data() + i, s.data());
  s.data()[i] = d;
  std::copy(data() + i, data() + rank_, s.data() + i + 1);
  return s;
}

TensorShape TensorShape::removed(int i) const {
  const int axis = canonical_axis(i, "TensorShape::removed");
  TensorShape s;
  s.set_rank(rank_ - 1);
  std::copy(data(), data() + axis, s.data());
  std::copy(data() + axis + 1, data() + rank_, s.data() + axis);
  return s;
}

TensorShape TensorShape::sub_shape(int begin, int end) const {
  STRATA_CHECK_ARG(0 <= begin && begin <= end && end <= rank(), "TensorShape::sub_shape: range [",
                   begin, ", ", end, ") outside rank ", rank());
  return TensorShape(std::span<const int64_t>(data() + begin, data() + end));
}

TensorShape TensorShape::concatenate(const TensorShape& other) const {
  TensorShape s;
  s.set_rank(rank_ + other.rank_);
  std::copy(other.data(), other.data() + other.rank_, std::copy(data(), data() + rank_, s.data()));
  return s;
}

void TensorShape::set_rank(size_t rank) {
  rank_ = rank;
  if (rank > kInlineDims) {
    heap_.assign(rank, 0);
  } else {
    heap_.clear();
  }
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
  const DimsView d = dims();
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ", ";
    s += d[i] < 0 ? std::string("None") : std::to_string(d[i]);
  }
  return s + "]";
}

std::ostream& operator<<(std::ostream& os, const TensorShape& s) { return os << s.to_string(); }

}  // namespace strata
