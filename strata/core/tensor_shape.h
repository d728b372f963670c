#pragma once
// TensorShape: the dimensions of a tensor; -1 marks an unknown dimension (only
// in specs, e.g. the batch dimension of a dataset without drop_remainder).
// An unknown rank is represented by TensorShape::unknown_rank().
//
//   strata::TensorShape s{2, 3};
//   s.rank();            // 2
//   s.num_elements();    // 6
//   s.dims()[1];         // 3
//   s.to_string();       // "[2, 3]"  (unknown dims print as "None", like TF)
//   TensorShape{-1, 784}.is_compatible_with({128, 784});   // true
//
// Up to kInlineDims dimensions are stored inside the object, so that making,
// copying and destroying the shape of an ordinary tensor touches no heap
// (every tensor handle holds one); higher ranks keep theirs on the heap.
//
// Immutable-style value type; thread-compatible.

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <ranges>
#include <span>
#include <string>
#include <vector>

namespace strata {

// The dimensions of a TensorShape: a read-only view, valid while the shape it
// came from lives, that indexes and iterates like a const std::vector<int64_t>
// and converts to one (a copy) or to std::span<const int64_t> (no copy).
class DimsView {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using const_iterator = const int64_t*;
  using iterator = const_iterator;
  using const_reference = const int64_t&;
  using reference = const_reference;

  constexpr DimsView(const int64_t* data, size_t size) noexcept : data_(data), size_(size) {}

  const int64_t* begin() const noexcept { return data_; }
  const int64_t* end() const noexcept { return data_ + size_; }
  const int64_t* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // Unchecked, like std::vector's.
  const int64_t& operator[](size_t i) const noexcept { return data_[i]; }
  const int64_t& front() const noexcept { return data_[0]; }
  const int64_t& back() const noexcept { return data_[size_ - 1]; }

  // NOLINTNEXTLINE(google-explicit-constructor): used where a vector was
  operator std::vector<int64_t>() const { return {begin(), end()}; }

  friend bool operator==(DimsView a, DimsView b) noexcept;

 private:
  const int64_t* data_;
  size_t size_;
};

class TensorShape {
 public:
  // Ranks up to this keep their dimensions inside the object.
  static constexpr int kInlineDims = 6;

  TensorShape() = default;  // scalar: rank 0
  TensorShape(std::initializer_list<int64_t> dims) {
    assign(std::span<const int64_t>(dims.begin(), dims.size()));
  }
  explicit TensorShape(const std::vector<int64_t>& dims) { assign(dims); }
  explicit TensorShape(std::span<const int64_t> dims) { assign(dims); }
  explicit TensorShape(DimsView dims) {
    assign(std::span<const int64_t>(dims.data(), dims.size()));
  }
  static TensorShape unknown_rank();

  bool has_known_rank() const noexcept { return known_rank_; }
  int rank() const noexcept { return static_cast<int>(rank_); }
  int64_t dim(int i) const;  // i may be negative (from the end)
  int64_t operator[](int i) const { return dim(i); }
  DimsView dims() const noexcept { return {data(), rank_}; }
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
    return known_rank_ == other.known_rank_ && dims() == other.dims();
  }

 private:
  // Stores `dims` (InvalidArgumentError unless every one is >= -1).
  void assign(std::span<const int64_t> dims);
  // Makes the rank `rank`, with dimensions to be written through data().
  void set_rank(size_t rank);
  const int64_t* data() const noexcept {
    return rank_ <= kInlineDims ? inline_.data() : heap_.data();
  }
  int64_t* data() noexcept { return rank_ <= kInlineDims ? inline_.data() : heap_.data(); }

  std::array<int64_t, kInlineDims> inline_ = {};  // dims [0, rank) when rank <= kInlineDims
  std::vector<int64_t> heap_;                     // the dims when rank > kInlineDims
  size_t rank_ = 0;
  bool known_rank_ = true;
};

std::ostream& operator<<(std::ostream& os, const TensorShape& s);

}  // namespace strata

// A DimsView does not own its elements: std::span may be made from a temporary one.
template <>
inline constexpr bool std::ranges::enable_borrowed_range<strata::DimsView> = true;
