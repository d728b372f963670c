#pragma once
// TensorShape: the dimensions of a tensor; -1 marks an unknown dimension (only
// in specs, e.g. the batch dimension of a dataset without drop_remainder).
// An unknown rank is represented by TensorShape::unknown_rank().
//
//   strata::TensorShape s{2, 3};
//   s.rank();            // 2
//   s.num_elements();    // 6
//   s.to_string();       // "[2, 3]"  (unknown dims print as "None", like TF)
//   TensorShape{-1, 784}.is_compatible_with({128, 784});   // true
//
// Immutable-style value type; thread-compatible.

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace strata {

class TensorShape {
 public:
  TensorShape() = default;  // scalar: rank 0
  TensorShape(std::initializer_list<int64_t> dims) : dims_(dims) { validate(); }
  explicit TensorShape(std::vector<int64_t> dims) : dims_(std::move(dims)) { validate(); }
  explicit TensorShape(std::span<const int64_t> dims) : dims_(dims.begin(), dims.end()) {
    validate();
  }
  static TensorShape unknown_rank();

  bool has_known_rank() const noexcept { return known_rank_; }
  int rank() const noexcept { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const;  // i may be negative (from the end)
  int64_t operator[](int i) const { return dim(i); }
  const std::vector<int64_t>& dims() const noexcept { return dims_; }
  // True when the rank and every dimension are known.
  bool is_fully_defined() const noexcept;
  // Product of the dimensions (1 for a scalar); -1 if any is unknown.
  int64_t num_elements() const noexcept;

  // TF's compatibility: unknown rank/dims match anything of equal rank.
  bool is_compatible_with(const TensorShape& other) const noexcept;
  // The most specific shape compatible with both (InvalidArgumentError if none).
  TensorShape merge_with(const TensorShape& other) const;

  // A copy with dimension i replaced / with `d` inserted before i / without i.
  TensorShape with_dim(int i, int64_t d) const;
  TensorShape inserted(int i, int64_t d) const;
  TensorShape removed(int i) const;
  // Dimensions [begin, end).
  TensorShape sub_shape(int begin, int end) const;
  TensorShape concatenate(const TensorShape& other) const;

  // Normalises a possibly negative axis into [0, rank); InvalidArgumentError
  // naming `who` when out of range.
  int canonical_axis(int64_t axis, const char* who) const;

  std::string to_string() const;
  bool operator==(const TensorShape& other) const noexcept {
    return known_rank_ == other.known_rank_ && dims_ == other.dims_;
  }

 private:
  void validate() const;
  std::vector<int64_t> dims_;
  bool known_rank_ = true;
};

std::ostream& operator<<(std::ostream& os, const TensorShape& s);

}  // namespace strata
