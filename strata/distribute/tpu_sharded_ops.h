#pragma once
// Sharded execution over a replica's logical devices (TPUStrategy model
// parallelism): a ShardedTensor holds one shard per logical device, laid out
// by a tpu::Sharding, and the ops below run shard-wise, in parallel, each
// shard on its own logical device.
//
//   namespace sh = strata::distribute::sharded;
//   strategy.run([&](Tensor images) {
//     Tensor annotated = strategy.experimental_split_to_logical_devices(images, {1, 2, 2, 1});
//     sh::ShardedTensor x = sh::shard(strategy, annotated);     // 4 shards on 4 devices
//     x = sh::relu(sh::conv2d(x, filters, {.padding = "SAME"})); // halo exchange, no gather
//     x = sh::max_pool2d(x, {2, 2}, {2, 2}, "VALID");
//     Tensor flat = sh::unshard(sh::reshape(x, {-1, 16 * 16 * 32}));   // gathers (fallback)
//     return flat;
//   }, dist_images);
//
// Rules (each op says which inputs it handles without moving whole tensors;
// anything else takes the fallback: gather every input to logical device 0,
// run the ordinary op there, re-shard the result to the first sharded input's
// layout when the shapes allow, else to the replicated layout. The fallback
// is always correct, only slower; fallback_count(op) counts it per op):
//  * element-wise (unary and binary): shard-wise when the sharded operands
//    have equal shardings; an unsharded (plain Tensor) or replicated operand
//    broadcasts, sliced to each shard's tile where it has the full dimension.
//  * matmul [M, K] x [K, N] with a plain or replicated b: a split in M (batch)
//    runs shard-wise, no communication; a split in K only computes partial
//    products a_k @ b_k and sums them on every device (the all-reduce), so
//    the result is replicated.
//  * reduce_sum / reduce_mean: over no split dimension, shard-wise; over all
//    split dimensions, local reduce + cross-shard sum (replicated result).
//  * reshape: shard-wise when the prefix up to the last split dimension is
//    unchanged (the split dimensions survive), e.g. flatten of a batch split.
//  * conv2d, max_pool2d, avg_pool2d on NHWC inputs split in batch, height and
//    width (not channels): each device receives the halo rows/columns its
//    output window needs from its neighbours' shards, pads at the image
//    border (zeros; -inf for max pool; the in-bounds count for avg pool), and
//    runs the VALID op. SAME and VALID, any stride and dilation, as long as
//    the output height/width divide by the partition counts.
//
// Gradients: every shard computation is made of ordinary recorded ops
// (slice, concat, pad, conv2d, add_n, ...), so a GradientTape on the calling
// thread records them, also those that run on the per-shard threads (buffered
// per thread and replayed into the caller's recorders in logical-device order
// after the join: deterministic), and tape.gradient goes back through the
// same shard-wise computations.
//
// Thread-safety: ShardedTensor is an immutable value. Each op spawns one
// thread per extra shard and joins it before returning (bounded work, no
// waits on other parties); the calling thread runs shard 0.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "strata/core/device.h"
#include "strata/core/tensor.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/tpu/sharding.h"

namespace strata::distribute {
class TPUStrategy;
}

namespace strata::distribute::sharded {

namespace tpu = strata::tpu::experimental;

class ShardedTensor {
 public:
  ShardedTensor() = default;
  // shards[d] is logical device d's shard (undefined for the non-holders of a
  // MAXIMAL sharding); devices[d] its device. InvalidArgumentError if the
  // counts differ from the sharding's devices or a shard's shape is not the
  // sharding's shard shape of `shape`.
  ShardedTensor(tpu::Sharding sharding, TensorShape shape, std::vector<Tensor> shards,
                std::vector<const Device*> devices);

  bool defined() const noexcept { return !shards_.empty(); }
  const tpu::Sharding& sharding() const noexcept { return sharding_; }
  const TensorShape& shape() const noexcept { return shape_; }
  DType dtype() const;
  int rank() const { return shape_.rank(); }
  int num_logical_devices() const noexcept { return static_cast<int>(devices_.size()); }
  const std::vector<Tensor>& shards() const noexcept { return shards_; }
  const Tensor& shard(int logical_device) const;
  const std::vector<const Device*>& devices() const noexcept { return devices_; }

 private:
  tpu::Sharding sharding_ = tpu::Sharding::replicated(1);
  TensorShape shape_;
  std::vector<Tensor> shards_;
  std::vector<const Device*> devices_;
};

// Cuts `full` by `sharding` onto `devices` (one per logical device) with
// recorded ops (tiles are slices, so gradients flow back to `full`).
ShardedTensor shard(const Tensor& full, const tpu::Sharding& sharding,
                    const std::vector<const Device*>& devices);
// A tensor annotated by TPUStrategy's experimental_*_to_logical_devices over
// the calling replica's logical devices (its carried sharding; an unannotated
// tensor is maximal on logical device 0, TF's default). FailedPreconditionError
// outside a replica context of `strategy`.
ShardedTensor shard(const TPUStrategy& strategy, const Tensor& annotated);
// The full tensor, assembled with recorded concats on `device` (nullptr:
// logical device 0, or the holder of a MAXIMAL sharding).
Tensor unshard(const ShardedTensor& x, const Device* device = nullptr);
// `x` laid out by another sharding (unshard + shard when they differ).
ShardedTensor reshard(const ShardedTensor& x, const tpu::Sharding& sharding);

// --- element-wise ---
ShardedTensor relu(const ShardedTensor& x);
ShardedTensor unary(const ShardedTensor& x, Tensor (*op)(const Tensor&), const std::string& name);
ShardedTensor add(const ShardedTensor& a, const ShardedTensor& b);
ShardedTensor add(const ShardedTensor& a, const Tensor& b);
ShardedTensor subtract(const ShardedTensor& a, const ShardedTensor& b);
ShardedTensor multiply(const ShardedTensor& a, const ShardedTensor& b);
ShardedTensor multiply(const ShardedTensor& a, const Tensor& b);
// Any broadcasting binary op (strata::add, strata::maximum, ...) under `name`.
ShardedTensor binary(const ShardedTensor& a, const ShardedTensor& b,
                     Tensor (*op)(const Tensor&, const Tensor&), const std::string& name);
ShardedTensor binary(const ShardedTensor& a, const Tensor& b,
                     Tensor (*op)(const Tensor&, const Tensor&), const std::string& name);

// Any computation on replicated values: every logical device runs fn on its
// own copy of the inputs (what TF does with loss inputs annotated by
// experimental_replicate_to_logical_devices), giving a replicated result.
// Inputs that are not replicated are gathered and replicated first (counted
// as a fallback of `name`).
ShardedTensor apply_replicated(const std::vector<ShardedTensor>& inputs,
                               const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                               const std::string& name);

// --- linear algebra and reductions ---
ShardedTensor matmul(const ShardedTensor& a, const Tensor& b);
ShardedTensor reduce_sum(const ShardedTensor& x, const ReduceOptions& options = {});
ShardedTensor reduce_mean(const ShardedTensor& x, const ReduceOptions& options = {});
ShardedTensor reshape(const ShardedTensor& x, const std::vector<int64_t>& shape);

// --- spatially partitioned convolution and pooling (NHWC) ---
ShardedTensor conv2d(const ShardedTensor& x, const Tensor& filters,
                     const nn::Conv2DOptions& options = {});
// The gradients of conv2d for an upstream gradient `dy` laid out as conv2d's
// result, computed shard-wise in parallel without a tape (the explicit
// backward pass of model-parallel training loops and benchmarks): each device
// backpropagates through its own window, the window gradients go back to the
// tiles they came from (the reverse halo exchange), and the filter gradients
// are summed (the all-reduce). Layouts without a rule take the fallback
// (counted as "conv2d_gradients").
struct Conv2DGradients {
  ShardedTensor input;
  Tensor filters;
};
Conv2DGradients conv2d_gradients(const ShardedTensor& x, const Tensor& filters,
                                 const ShardedTensor& dy, const nn::Conv2DOptions& options = {});
ShardedTensor max_pool2d(const ShardedTensor& x, const std::vector<int64_t>& ksize,
                         const std::vector<int64_t>& strides, const std::string& padding = "VALID");
ShardedTensor avg_pool2d(const ShardedTensor& x, const std::vector<int64_t>& ksize,
                         const std::vector<int64_t>& strides, const std::string& padding = "VALID");

// How often `op` took the gather-run-reshard fallback in this process
// (thread-safe counters), and a reset for tests.
int64_t fallback_count(const std::string& op);
void reset_fallback_counts();

}  // namespace strata::distribute::sharded
