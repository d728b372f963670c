#include "strata/distribute/partitioners.h"

#include <algorithm>

#include "strata/base/errors.h"

namespace strata::distribute {
namespace {

// The shape every partitioner accepts: rank >= 1 and fully defined.
void check_partitionable(const TensorShape& shape, const char* who) {
  STRATA_CHECK_ARG(shape.has_known_rank() && shape.is_fully_defined(), who,
                   ": expected a fully defined shape, got ", shape);
  STRATA_CHECK_ARG(shape.rank() >= 1, who,
                   ": can not partition a variable along axis 0 when its shape is ", shape,
                   " (rank 0)");
}

int64_t element_bytes(DType dtype, int64_t bytes_per_string) {
  return dtype == DType::string ? bytes_per_string : static_cast<int64_t>(dtype_size(dtype));
}

// num_elements * element_size, refusing products that do not fit in int64.
int64_t total_bytes(const TensorShape& shape, int64_t element_size, const char* who) {
  int64_t total = 0;
  STRATA_CHECK_ARG(!__builtin_mul_overflow(shape.num_elements(), element_size, &total), who,
                   ": the size in bytes of shape ", shape, " overflows int64");
  return total;
}

// {first, 1, 1, ...} with one entry per axis of `shape`.
std::vector<int64_t> partitions_of(const TensorShape& shape, int64_t first) {
  std::vector<int64_t> result(static_cast<size_t>(shape.rank()), 1);
  result[0] = first;
  return result;
}

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

FixedShardsPartitioner::FixedShardsPartitioner(int64_t num_shards) : num_shards_(num_shards) {
  STRATA_CHECK_ARG(
      num_shards >= 1,
      "FixedShardsPartitioner: argument `num_shards` must be positive. Received: ", num_shards);
}

std::vector<int64_t> FixedShardsPartitioner::operator()(const TensorShape& shape,
                                                        DType /*dtype*/) const {
  check_partitionable(shape, "FixedShardsPartitioner");
  return partitions_of(shape, std::min(num_shards_, shape.dim(0)));
}

MinSizePartitioner::MinSizePartitioner(int64_t min_shard_bytes, int64_t max_shards,
                                       int64_t bytes_per_string)
    : min_shard_bytes_(min_shard_bytes),
      max_shards_(max_shards),
      bytes_per_string_(bytes_per_string) {
  STRATA_CHECK_ARG(min_shard_bytes >= 1,
                   "MinSizePartitioner: argument `min_shard_bytes` must be positive. Received: ",
                   min_shard_bytes);
  STRATA_CHECK_ARG(
      max_shards >= 1,
      "MinSizePartitioner: argument `max_shards` must be positive. Received: ", max_shards);
  STRATA_CHECK_ARG(bytes_per_string >= 1,
                   "MinSizePartitioner: argument `bytes_per_string` must be positive. Received: ",
                   bytes_per_string);
}

std::vector<int64_t> MinSizePartitioner::operator()(const TensorShape& shape, DType dtype) const {
  check_partitionable(shape, "MinSizePartitioner");
  const int64_t bytes =
      total_bytes(shape, element_bytes(dtype, bytes_per_string_), "MinSizePartitioner");
  // TF: max(1, min(shape[0], max_partitions, ceil(total_bytes / min_slice_size))).
  const int64_t wanted = ceil_div(bytes, min_shard_bytes_);
  return partitions_of(shape, std::max<int64_t>(1, std::min({shape.dim(0), max_shards_, wanted})));
}

MaxSizePartitioner::MaxSizePartitioner(int64_t max_shard_bytes, std::optional<int64_t> max_shards,
                                       int64_t bytes_per_string)
    : max_shard_bytes_(max_shard_bytes),
      max_shards_(max_shards),
      bytes_per_string_(bytes_per_string) {
  STRATA_CHECK_ARG(max_shard_bytes >= 1,
                   "MaxSizePartitioner: argument `max_shard_bytes` must be positive. Received ",
                   max_shard_bytes);
  STRATA_CHECK_ARG(!max_shards.has_value() || *max_shards >= 1,
                   "MaxSizePartitioner: argument `max_shards` must be positive. Received ",
                   max_shards.value_or(0), " (use std::nullopt for no limit)");
  STRATA_CHECK_ARG(bytes_per_string >= 1,
                   "MaxSizePartitioner: argument `bytes_per_string` must be positive. Received: ",
                   bytes_per_string);
}

std::vector<int64_t> MaxSizePartitioner::operator()(const TensorShape& shape, DType dtype) const {
  check_partitionable(shape, "MaxSizePartitioner");
  const int64_t rows = shape.dim(0);
  // A shape without elements has nothing to spread (TF divides by zero here).
  if (shape.num_elements() == 0) return partitions_of(shape, 1);
  const int64_t bytes_per_slice =
      total_bytes(shape.sub_shape(1, shape.rank()), element_bytes(dtype, bytes_per_string_),
                  "MaxSizePartitioner");
  // At least one slice per shard, even when one slice exceeds max_shard_bytes.
  const int64_t slices_per_shard = std::max<int64_t>(1, max_shard_bytes_ / bytes_per_slice);
  int64_t shards = ceil_div(rows, slices_per_shard);
  if (max_shards_.has_value()) shards = std::min(shards, *max_shards_);
  return partitions_of(shape, shards);
}

int64_t num_partitions(const VariablePartitioner& partitioner, const TensorShape& shape,
                       DType dtype) {
  if (!partitioner || shape.rank() == 0) return 1;  // TF never partitions a rank-0 variable
  const std::vector<int64_t> result = partitioner(shape, dtype);
  bool valid = !result.empty() && result[0] >= 1;
  for (size_t i = 1; valid && i < result.size(); ++i) valid = result[i] == 1;
  STRATA_CHECK_ARG(valid,
                   "variable_partitioner must return a list whose elements are 1 besides the "
                   "first element (non-zero), got: ",
                   result, " for shape ", shape);
  return std::max<int64_t>(1, std::min(result[0], shape.dim(0)));
}

std::vector<int64_t> div_layout(int64_t rows, int64_t num_shards) {
  STRATA_CHECK_ARG(rows >= 0, "div_layout: expected rows >= 0, got ", rows);
  STRATA_CHECK_ARG(
      num_shards >= 1 && num_shards <= std::max<int64_t>(rows, 1),
      "div_layout: expected 1 <= num_shards <= max(rows, 1) = ", std::max<int64_t>(rows, 1),
      ", got num_shards ", num_shards, " for ", rows, " rows");
  const int64_t base = rows / num_shards;
  const int64_t extra = rows % num_shards;
  std::vector<int64_t> sizes(static_cast<size_t>(num_shards), base);
  for (int64_t i = 0; i < extra; ++i) ++sizes[static_cast<size_t>(i)];
  return sizes;
}

}  // namespace strata::distribute
