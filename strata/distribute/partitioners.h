#pragma once
// Variable partitioners (tf.distribute.experimental.partitioners): how many
// shards a variable created under a ParameterServerStrategy gets.
//
//   namespace sd = strata::distribute;
//   sd::VariablePartitioner p = sd::FixedShardsPartitioner(2);
//   p(strata::TensorShape{10, 3}, strata::DType::float32);          // {2, 1}
//   sd::MinSizePartitioner(/*min_shard_bytes=*/4, /*max_shards=*/2)({6, 1}, DType::float32);
//                                                                     // {2, 1}
//   sd::MaxSizePartitioner(/*max_shard_bytes=*/4)({6, 1}, DType::float32);   // {6, 1}
//   sd::num_partitions(p, {13, 4}, DType::float32);  // 2: what the strategy creates
//   sd::div_layout(13, 5);                           // {3, 3, 3, 2, 2} rows per shard
//
// A partitioner is any callable `(shape, dtype) -> std::vector<int64_t>`
// returning the number of partitions per axis (one entry per axis of
// `shape`). Only axis 0 may be partitioned, as in TensorFlow: the built-in
// partitioners always return 1 for the other axes, and num_partitions()
// rejects a result that does not. Sizes count dtype_size(dtype) bytes per
// element, and `bytes_per_string` bytes per element of a string variable.
//
// The arithmetic is TensorFlow's:
//   FixedShards: min(num_shards, shape[0]).
//   MinSize:     max(1, min(shape[0], max_shards, ceil(total_bytes / min_shard_bytes))).
//   MaxSize:     bytes_per_slice = (num_elements / shape[0]) * element_size,
//                slices_per_shard = max(1, floor(max_shard_bytes / bytes_per_slice)),
//                ceil(shape[0] / slices_per_shard), capped by max_shards.
//
// Errors: constructor arguments are validated like TensorFlow's ValueErrors
// and raise InvalidArgumentError naming the argument and its value. Calling a
// partitioner with a rank-0 shape or a shape that is not fully defined is
// InvalidArgumentError naming the shape.
//
// Designed beyond TensorFlow (TF either accepts the value silently or fails
// with an unrelated Python error):
//   - FixedShardsPartitioner(num_shards < 1) is refused at construction (TF
//     only fails later, when the strategy sees a 0 or negative shard count).
//   - MaxSizePartitioner's "no limit" is std::nullopt; max_shards = 0 is
//     refused (TF's `if max_shards and ...` lets 0 through as "no limit").
//   - A rank-0 shape raises InvalidArgumentError in every partitioner (TF:
//     IndexError from FixedShards/MaxSize, ValueError from MinSize).
//   - MaxSize on a shape with zero elements returns 1 shard (TF divides by
//     zero).
//
// Thread-safety: partitioners are immutable values; calling them is
// thread-safe.

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "strata/core/dtype.h"
#include "strata/core/tensor_shape.h"

namespace strata::distribute {

// tf.distribute.experimental.partitioners.Partitioner: (shape, dtype) ->
// partitions per axis.
using VariablePartitioner =
    std::function<std::vector<int64_t>(const TensorShape& shape, DType dtype)>;

// tf.distribute.experimental.partitioners.FixedShardsPartitioner.
class FixedShardsPartitioner {
 public:
  // InvalidArgumentError if num_shards < 1.
  explicit FixedShardsPartitioner(int64_t num_shards);
  std::vector<int64_t> operator()(const TensorShape& shape, DType dtype) const;
  int64_t num_shards() const noexcept { return num_shards_; }

 private:
  int64_t num_shards_;
};

// tf.distribute.experimental.partitioners.MinSizePartitioner: each shard holds
// at least min_shard_bytes, as many shards as possible up to max_shards.
// Defaults are TensorFlow's.
class MinSizePartitioner {
 public:
  // InvalidArgumentError if any argument is < 1.
  explicit MinSizePartitioner(int64_t min_shard_bytes = 256 << 10, int64_t max_shards = 1,
                              int64_t bytes_per_string = 16);
  std::vector<int64_t> operator()(const TensorShape& shape, DType dtype) const;

  int64_t min_shard_bytes() const noexcept { return min_shard_bytes_; }
  int64_t max_shards() const noexcept { return max_shards_; }
  int64_t bytes_per_string() const noexcept { return bytes_per_string_; }

 private:
  int64_t min_shard_bytes_;
  int64_t max_shards_;
  int64_t bytes_per_string_;
};

// tf.distribute.experimental.partitioners.MaxSizePartitioner: shards of at
// most max_shard_bytes (as few as possible); max_shards, when set, takes
// precedence (shards may then exceed max_shard_bytes). Defaults are
// TensorFlow's (max_shards = None).
class MaxSizePartitioner {
 public:
  // InvalidArgumentError if max_shard_bytes < 1, max_shards < 1 (when set) or
  // bytes_per_string < 1.
  explicit MaxSizePartitioner(int64_t max_shard_bytes,
                              std::optional<int64_t> max_shards = std::nullopt,
                              int64_t bytes_per_string = 16);
  std::vector<int64_t> operator()(const TensorShape& shape, DType dtype) const;

  int64_t max_shard_bytes() const noexcept { return max_shard_bytes_; }
  std::optional<int64_t> max_shards() const noexcept { return max_shards_; }
  int64_t bytes_per_string() const noexcept { return bytes_per_string_; }

 private:
  int64_t max_shard_bytes_;
  std::optional<int64_t> max_shards_;
  int64_t bytes_per_string_;
};

// What ParameterServerStrategy does with a partitioner when it creates a
// variable of `shape` and `dtype` (TF's _create_variable): the number of
// shards to create. A rank-0 variable is never partitioned (1, the
// partitioner is not called); an empty `partitioner` means 1. The result
// must be non-empty with a first element >= 1 and every other element 1,
// else InvalidArgumentError ("variable_partitioner must return a list whose
// elements are 1 besides the first element (non-zero), got: [...]"); TF
// accepts a negative first element and fails later, Strata refuses it here.
// The count is capped at shape[0] (a variable with 0 rows gets 1 shard).
int64_t num_partitions(const VariablePartitioner& partitioner, const TensorShape& shape,
                       DType dtype);

// TensorFlow's "div" layout: rows per shard when `rows` rows are split into
// `num_shards` shards; the first rows % num_shards shards get one extra row
// (13 rows in 5 shards -> {3, 3, 3, 2, 2}). InvalidArgumentError if
// num_shards < 1, rows < 0 or num_shards > max(rows, 1) (cap the count with
// num_partitions() first).
std::vector<int64_t> div_layout(int64_t rows, int64_t num_shards);

// TensorFlow's spelling, tf.distribute.experimental.partitioners.*.
namespace experimental::partitioners {
using ::strata::distribute::FixedShardsPartitioner;
using ::strata::distribute::MaxSizePartitioner;
using ::strata::distribute::MinSizePartitioner;
using Partitioner = ::strata::distribute::VariablePartitioner;
}  // namespace experimental::partitioners

}  // namespace strata::distribute
