#pragma once
// Sharding: how a tensor is laid out over the logical devices of one replica
// (model parallelism), as XLA's OpSharding built by TPUStrategy's
// experimental_assign_to_logical_device / _replicate_to_logical_devices /
// _split_to_logical_devices.
//
//   namespace tpu = strata::tpu::experimental;
//   // 8 logical devices, an image batch [B, W, H, C] split 2 ways in W and 4 in H:
//   auto s = tpu::Sharding::split_to_logical_devices(images.shape(), {1, 2, 4, 1}, 8);
//   s.shard_shape(images.shape());      // [B, W/2, H/4, C]
//   s.tile_index(6);                    // {0, 1, 2, 0}: device i*4 + j holds tile (w_i, h_j)
//   std::vector<strata::Tensor> shards = tpu::split(images, s);   // one per logical device
//   strata::Tensor back = tpu::assemble(shards, s);               // equal to images
//   tpu::Sharding::maximal(0, 8).to_string();                     // "{maximal device=0}"
//
// Kinds (OpSharding.Type values):
//  * REPLICATED: every logical device holds the whole tensor.
//  * MAXIMAL: one logical device holds the whole tensor (the others hold nothing).
//  * OTHER (tiled): the tensor is cut along each dimension i into
//    partition_dimensions[i] equal parts; the tile with per-dimension index
//    (t0, t1, ...) lives on the logical device whose number is that index in
//    row-major order over partition_dimensions (XLA's tile assignment
//    0..P-1 reshaped to partition_dimensions). Uneven tiles are not allowed.
//
// Immutable values: thread-safe.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/core/tensor_shape.h"

namespace strata {
class Device;
}

namespace strata::tpu::experimental {

class Sharding {
 public:
  // xla::OpSharding::Type.
  enum class Type : int { REPLICATED = 0, MAXIMAL = 1, OTHER = 3 };

  // Every one of `num_logical_devices` devices holds the whole tensor.
  // InvalidArgumentError if num_logical_devices < 1.
  static Sharding replicated(int num_logical_devices);
  // Only `logical_device` holds the tensor. InvalidArgumentError (TF's
  // ValueError "`logical_core_id` to assign must be lower then total number of
  // logical devices per replica...") unless 0 <= logical_device < num_logical_devices.
  static Sharding maximal(int logical_device, int num_logical_devices);
  // Tiles over prod(partition_dimensions) logical devices, without a shape
  // check. InvalidArgumentError if an entry is < 1.
  static Sharding tiled(std::vector<int64_t> partition_dimensions);
  // experimental_split_to_logical_devices's sharding, with TensorFlow's checks
  // in its order (InvalidArgumentError, TF's ValueError): the length of
  // partition_dimensions equals the rank of `shape`; every known dimension is
  // divisible by its partition count (unknown ones are not checked); the
  // product equals num_logical_devices. Also entries must be >= 1.
  static Sharding split_to_logical_devices(const TensorShape& shape,
                                           std::vector<int64_t> partition_dimensions,
                                           int num_logical_devices);

  Type type() const noexcept { return type_; }
  bool is_replicated() const noexcept { return type_ == Type::REPLICATED; }
  bool is_maximal() const noexcept { return type_ == Type::MAXIMAL; }
  bool is_tiled() const noexcept { return type_ == Type::OTHER; }
  // The logical devices per replica this sharding spans.
  int num_logical_devices() const noexcept { return num_devices_; }
  // The device of a MAXIMAL sharding; InvalidArgumentError for other kinds.
  int maximal_device() const;
  // The partition counts of a tiled sharding ({} for the other kinds).
  const std::vector<int64_t>& partition_dimensions() const noexcept {
    return partition_dimensions_;
  }
  // OpSharding's tile_assignment_dimensions / tile_assignment_devices: MAXIMAL
  // [1] / [k]; tiled partition_dimensions / 0..P-1; REPLICATED empty.
  std::vector<int64_t> tile_assignment_dimensions() const;
  std::vector<int> tile_assignment_devices() const;

  // Whether `logical_device` holds a shard (all devices, except for MAXIMAL).
  bool holds_shard(int logical_device) const;
  // The per-dimension tile index of `logical_device` (row-major over
  // partition_dimensions, last dimension fastest); empty unless tiled.
  // InvalidArgumentError if the device is out of range.
  std::vector<int64_t> tile_index(int logical_device) const;
  // The logical device holding the tile at `index` (tiled shardings).
  int logical_device_at_tile(std::span<const int64_t> index) const;

  // Checks that tensors of `shape` can carry this sharding: tiled: rank equal
  // to the partition rank and every dimension divisible (messages as
  // split_to_logical_devices). Any shape suits the other kinds.
  void check_shape(const TensorShape& shape) const;
  // The shape of each shard of a tensor of `full` (full itself unless tiled).
  TensorShape shard_shape(const TensorShape& full) const;
  // Where `logical_device`'s shard starts in the full tensor.
  std::vector<int64_t> shard_offset(const TensorShape& full, int logical_device) const;

  // XLA's HloSharding text: "{replicated}", "{maximal device=1}",
  // "{devices=[1,2,4,1]0,1,2,3,4,5,6,7}".
  std::string to_string() const;
  bool operator==(const Sharding& other) const = default;

 private:
  Sharding(Type type, int num_devices, int maximal_device,
           std::vector<int64_t> partition_dimensions);
  void check_device(int logical_device, const char* who) const;

  Type type_ = Type::REPLICATED;
  int num_devices_ = 1;
  int maximal_device_ = 0;
  std::vector<int64_t> partition_dimensions_;
};

// Cuts `full` into one shard per logical device: result[d] is device d's
// shard, placed on devices[d] (if `devices` is non-empty it must name one
// device per logical device; else shards stay on full's device). Tiled: fresh
// tensors holding copies of the tiles. Replicated: full itself (shared, no
// copy) on every device. Maximal: full on its device and an undefined Tensor
// (defined() == false) for the others. InvalidArgumentError if the shape does
// not suit the sharding (check_shape) or `devices` has the wrong length.
std::vector<Tensor> split(const Tensor& full, const Sharding& sharding,
                          std::span<const Device* const> devices = {});

// The inverse of split: joins device shards into the full tensor, on `device`
// (nullptr = shard 0's device; for MAXIMAL the holder's). Tiled: a fresh tensor
// with every tile copied in; replicated: shards[0]; maximal: the holder's
// shard. InvalidArgumentError if the number of shards differs from the
// sharding's devices, a needed shard is undefined, or shards differ in dtype
// or in shape (tiled shards must all have one shape).
Tensor assemble(std::span<const Tensor> shards, const Sharding& sharding,
                const Device* device = nullptr);

// The TensorExtension that carries a sharding. Layers above derive from it to
// carry more (the distribute layer's sharded results carry their shards), so
// sharding_of sees those too. Immutable.
class ShardingExtension : public TensorExtension {
 public:
  explicit ShardingExtension(Sharding s) : sharding(std::move(s)) {}
  const Sharding sharding;
};

// The sharding a tensor carries (as a TensorExtension); nullptr for none.
const Sharding* sharding_of(const Tensor& t);
// `t` carrying `sharding` (check_shape first); the value and buffer are shared.
Tensor with_sharding(const Tensor& t, const Sharding& sharding);

}  // namespace strata::tpu::experimental
