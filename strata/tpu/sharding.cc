#include "strata/tpu/sharding.h"

#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/core/device.h"
#include "strata/core/dtype.h"

namespace strata::tpu::experimental {

namespace {

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

constexpr int64_t kMaxDevices = int64_t{1} << 20;

void check_partition_entries(const std::vector<int64_t>& dims, const char* who) {
  int64_t p = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    STRATA_CHECK_ARG(dims[i] >= 1, who,
                     ": expected every entry of `partition_dimensions` >= 1, got ", dims);
    p *= dims[i];
    STRATA_CHECK_ARG(p <= kMaxDevices, who, ": expected at most ", kMaxDevices, " partitions, got ",
                     dims);
  }
}

// Copies the box `extent` starting at `src_start` of a row-major tensor of
// `src_dims` into the box at `dst_start` of a row-major tensor of `dst_dims`:
// one contiguous run per index of all but the last dimension.
void copy_box(DType dtype, const void* src, const std::vector<int64_t>& src_dims,
              const std::vector<int64_t>& src_start, void* dst,
              const std::vector<int64_t>& dst_dims, const std::vector<int64_t>& dst_start,
              const std::vector<int64_t>& extent) {
  const int rank = static_cast<int>(extent.size());
  const size_t elem = dtype_size(dtype);
  if (product(extent) == 0) return;
  const int64_t run = rank == 0 ? 1 : extent[rank - 1];
  std::vector<int64_t> idx(rank > 0 ? rank - 1 : 0, 0);
  while (true) {
    int64_t s = 0, d = 0;
    for (int i = 0; i < rank; ++i) {
      const int64_t at = i < rank - 1 ? idx[i] : 0;
      s = s * src_dims[i] + src_start[i] + at;
      d = d * dst_dims[i] + dst_start[i] + at;
    }
    if (dtype == DType::string) {
      // Strings are objects, not bytes.
      const auto* from = static_cast<const std::string*>(src) + s;
      auto* to = static_cast<std::string*>(dst) + d;
      for (int64_t k = 0; k < run; ++k) to[k] = from[k];
    } else {
      std::memcpy(static_cast<std::byte*>(dst) + d * elem,
                  static_cast<const std::byte*>(src) + s * elem, static_cast<size_t>(run) * elem);
    }
    // Next index over the leading rank - 1 dimensions, last fastest.
    int i = rank - 2;
    for (; i >= 0; --i) {
      if (++idx[i] < extent[i]) break;
      idx[i] = 0;
    }
    if (i < 0) return;
  }
}

}  // namespace

Sharding::Sharding(Type type, int num_devices, int maximal_device,
                   std::vector<int64_t> partition_dimensions)
    : type_(type),
      num_devices_(num_devices),
      maximal_device_(maximal_device),
      partition_dimensions_(std::move(partition_dimensions)) {}

Sharding Sharding::replicated(int num_logical_devices) {
  STRATA_CHECK_ARG(num_logical_devices >= 1,
                   "Sharding::replicated: expected num_logical_devices >= 1, got ",
                   num_logical_devices);
  return Sharding(Type::REPLICATED, num_logical_devices, 0, {});
}

Sharding Sharding::maximal(int logical_device, int num_logical_devices) {
  STRATA_CHECK_ARG(num_logical_devices >= 1,
                   "Sharding::maximal: expected num_logical_devices >= 1, got ",
                   num_logical_devices);
  STRATA_CHECK_ARG(
      logical_device >= 0 && logical_device < num_logical_devices,
      "experimental_assign_to_logical_device: `logical_core_id` to assign must be lower then "
      "total number of logical devices per replica. Received logical device id ",
      logical_device, " but there are only total of ", num_logical_devices,
      " logical devices in replica.");
  return Sharding(Type::MAXIMAL, num_logical_devices, logical_device, {});
}

Sharding Sharding::tiled(std::vector<int64_t> partition_dimensions) {
  check_partition_entries(partition_dimensions, "Sharding::tiled");
  const auto n = static_cast<int>(product(partition_dimensions));
  return Sharding(Type::OTHER, n, 0, std::move(partition_dimensions));
}

Sharding Sharding::split_to_logical_devices(const TensorShape& shape,
                                            std::vector<int64_t> partition_dimensions,
                                            int num_logical_devices) {
  constexpr const char* kWho = "experimental_split_to_logical_devices";
  check_partition_entries(partition_dimensions, kWho);
  const auto n = static_cast<int>(product(partition_dimensions));
  Sharding s(Type::OTHER, n, 0, std::move(partition_dimensions));
  s.check_shape(shape);
  STRATA_CHECK_ARG(
      s.num_devices_ == num_logical_devices, kWho,
      ": The product of `partition_dimensions` should be the same as the number of logical "
      "devices (=",
      num_logical_devices, "). Received `partition_dimensions`=", s.partition_dimensions_,
      ",and their product is ", s.num_devices_, ".");
  return s;
}

void Sharding::check_shape(const TensorShape& shape) const {
  if (!is_tiled()) return;
  constexpr const char* kWho = "experimental_split_to_logical_devices";
  STRATA_CHECK_ARG(shape.has_known_rank(), kWho, ": expected a tensor of known rank ",
                   partition_dimensions_.size(), ", got an unknown rank");
  STRATA_CHECK_ARG(static_cast<size_t>(shape.rank()) == partition_dimensions_.size(), kWho,
                   ": Length of `partition_dimensions` must equal to the rank of `tensor.shape` (",
                   shape.rank(),
                   "). Received len(partition_dimensions)=", partition_dimensions_.size(), ".");
  for (int i = 0; i < shape.rank(); ++i) {
    const int64_t dim = shape.dims()[i];
    if (dim < 0) continue;  // unknown: not checked, as TF
    STRATA_CHECK_ARG(
        dim % partition_dimensions_[i] == 0, kWho, ": Tensor shape at `partition_dimensions[", i,
        "]` must be divisible by corresponding value specified by `partition_dimensions` (",
        partition_dimensions_[i], "). Received: ", dim, ".");
  }
}

int Sharding::maximal_device() const {
  STRATA_CHECK_ARG(is_maximal(), "Sharding::maximal_device: expected a MAXIMAL sharding, got ",
                   to_string());
  return maximal_device_;
}

std::vector<int64_t> Sharding::tile_assignment_dimensions() const {
  if (is_maximal()) return {1};
  return partition_dimensions_;
}

std::vector<int> Sharding::tile_assignment_devices() const {
  if (is_maximal()) return {maximal_device_};
  std::vector<int> devices;
  if (is_tiled()) {
    for (int d = 0; d < num_devices_; ++d) devices.push_back(d);
  }
  return devices;
}

void Sharding::check_device(int logical_device, const char* who) const {
  STRATA_CHECK_ARG(logical_device >= 0 && logical_device < num_devices_, who,
                   ": expected a logical device in [0, ", num_devices_, "), got ", logical_device);
}

bool Sharding::holds_shard(int logical_device) const {
  check_device(logical_device, "Sharding::holds_shard");
  return !is_maximal() || logical_device == maximal_device_;
}

std::vector<int64_t> Sharding::tile_index(int logical_device) const {
  check_device(logical_device, "Sharding::tile_index");
  std::vector<int64_t> index(partition_dimensions_.size(), 0);
  int64_t rest = logical_device;
  for (size_t i = index.size(); i-- > 0;) {
    index[i] = rest % partition_dimensions_[i];
    rest /= partition_dimensions_[i];
  }
  return index;
}

int Sharding::logical_device_at_tile(std::span<const int64_t> index) const {
  STRATA_CHECK_ARG(is_tiled(), "Sharding::logical_device_at_tile: expected a tiled sharding, got ",
                   to_string());
  STRATA_CHECK_ARG(index.size() == partition_dimensions_.size(),
                   "Sharding::logical_device_at_tile: expected a tile index of rank ",
                   partition_dimensions_.size(), ", got ",
                   std::vector<int64_t>(index.begin(), index.end()));
  int64_t device = 0;
  for (size_t i = 0; i < index.size(); ++i) {
    STRATA_CHECK_ARG(index[i] >= 0 && index[i] < partition_dimensions_[i],
                     "Sharding::logical_device_at_tile: expected a tile index inside ",
                     partition_dimensions_, ", got ",
                     std::vector<int64_t>(index.begin(), index.end()));
    device = device * partition_dimensions_[i] + index[i];
  }
  return static_cast<int>(device);
}

TensorShape Sharding::shard_shape(const TensorShape& full) const {
  if (!is_tiled()) return full;
  check_shape(full);
  std::vector<int64_t> dims = full.dims();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= 0) dims[i] /= partition_dimensions_[i];
  }
  return TensorShape(dims);
}

std::vector<int64_t> Sharding::shard_offset(const TensorShape& full, int logical_device) const {
  check_device(logical_device, "Sharding::shard_offset");
  std::vector<int64_t> offset(full.has_known_rank() ? full.rank() : 0, 0);
  if (!is_tiled()) return offset;
  const TensorShape shard = shard_shape(full);
  STRATA_CHECK_ARG(shard.is_fully_defined(),
                   "Sharding::shard_offset: expected a fully defined shape, got ", full);
  const auto index = tile_index(logical_device);
  for (size_t i = 0; i < offset.size(); ++i) offset[i] = index[i] * shard.dims()[i];
  return offset;
}

std::string Sharding::to_string() const {
  switch (type_) {
    case Type::REPLICATED: return "{replicated}";
    case Type::MAXIMAL: return str_cat("{maximal device=", maximal_device_, "}");
    case Type::OTHER: {
      std::string devices;
      for (int d = 0; d < num_devices_; ++d) devices += str_cat(d == 0 ? "" : ",", d);
      return str_cat("{devices=[", str_join(partition_dimensions_, ","), "]", devices, "}");
    }
  }
  return "{unknown}";
}

std::vector<Tensor> split(const Tensor& full, const Sharding& sharding,
                          std::span<const Device* const> devices) {
  STRATA_CHECK_ARG(full.defined(), "split: expected a tensor, got an undefined one");
  const int n = sharding.num_logical_devices();
  STRATA_CHECK_ARG(devices.empty() || static_cast<int>(devices.size()) == n, "split: expected ", n,
                   " devices (one per logical device of ", sharding.to_string(), "), got ",
                   devices.size());
  sharding.check_shape(full.shape());
  const auto device_of = [&](int d) -> const Device& {
    return devices.empty() ? full.placement() : *devices[d];
  };
  std::vector<Tensor> shards(n);
  if (!sharding.is_tiled()) {
    for (int d = 0; d < n; ++d) {
      if (sharding.holds_shard(d)) shards[d] = full.on_device(device_of(d));
    }
    return shards;
  }
  const TensorShape shard_shape = sharding.shard_shape(full.shape());
  for (int d = 0; d < n; ++d) {
    Tensor shard = Tensor::allocate(full.dtype(), shard_shape, &device_of(d));
    copy_box(full.dtype(), full.raw_data(), full.shape().dims(),
             sharding.shard_offset(full.shape(), d), shard.mutable_raw_data(), shard_shape.dims(),
             std::vector<int64_t>(shard_shape.rank(), 0), shard_shape.dims());
    shards[d] = std::move(shard);
  }
  return shards;
}

Tensor assemble(std::span<const Tensor> shards, const Sharding& sharding, const Device* device) {
  const int n = sharding.num_logical_devices();
  STRATA_CHECK_ARG(static_cast<int>(shards.size()) == n, "assemble: expected ", n,
                   " shards (one per logical device of ", sharding.to_string(), "), got ",
                   shards.size());
  if (sharding.is_maximal()) {
    const Tensor& t = shards[sharding.maximal_device()];
    STRATA_CHECK_ARG(t.defined(), "assemble: expected the shard of logical device ",
                     sharding.maximal_device(), " of ", sharding.to_string(),
                     ", got an undefined tensor");
    return device ? t.on_device(*device) : t;
  }
  for (int d = 0; d < n; ++d) {
    STRATA_CHECK_ARG(shards[d].defined(), "assemble: expected a shard for logical device ", d,
                     " of ", sharding.to_string(), ", got an undefined tensor");
    STRATA_CHECK_ARG(shards[d].dtype() == shards[0].dtype(),
                     "assemble: expected every shard of dtype ", dtype_name(shards[0].dtype()),
                     ", got ", dtype_name(shards[d].dtype()), " for logical device ", d);
    STRATA_CHECK_ARG(shards[d].shape() == shards[0].shape(),
                     "assemble: expected every shard of shape ", shards[0].shape(), ", got ",
                     shards[d].shape(), " for logical device ", d);
  }
  if (sharding.is_replicated()) return device ? shards[0].on_device(*device) : shards[0];
  const TensorShape& shard_shape = shards[0].shape();
  const auto& parts = sharding.partition_dimensions();
  STRATA_CHECK_ARG(static_cast<size_t>(shard_shape.rank()) == parts.size(),
                   "assemble: expected shards of rank ", parts.size(), " for ",
                   sharding.to_string(), ", got shape ", shard_shape);
  std::vector<int64_t> full_dims = shard_shape.dims();
  for (size_t i = 0; i < full_dims.size(); ++i) full_dims[i] *= parts[i];
  const TensorShape full_shape(full_dims);
  Tensor full =
      Tensor::allocate(shards[0].dtype(), full_shape, device ? device : &shards[0].placement());
  for (int d = 0; d < n; ++d) {
    copy_box(full.dtype(), shards[d].raw_data(), shard_shape.dims(),
             std::vector<int64_t>(shard_shape.rank(), 0), full.mutable_raw_data(), full_dims,
             sharding.shard_offset(full_shape, d), shard_shape.dims());
  }
  return full;
}

const Sharding* sharding_of(const Tensor& t) {
  const auto* ext = dynamic_cast<const ShardingExtension*>(t.extension().get());
  return ext ? &ext->sharding : nullptr;
}

Tensor with_sharding(const Tensor& t, const Sharding& sharding) {
  sharding.check_shape(t.shape());
  return t.with_extension(std::make_shared<const ShardingExtension>(sharding));
}

}  // namespace strata::tpu::experimental
