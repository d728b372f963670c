#pragma once
// Sharded execution over a replica's logical devices (TPUStrategy model
// parallelism): a ShardedTensor holds one shard per logical device, laid out
// by a tpu::Sharding, and the ops below run shard-wise, in parallel, each
// shard on its own logical device.
//
//   namespace sh = strata::tpu::sharded;
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
// thread records them, also those that run on the devices' pool threads
// (buffered per shard and replayed into the caller's recorders in
// logical-device order once every shard has run: deterministic), and tape.gradient goes back
// through the same shard-wise computations.
//
// The normal op API: inside a replica of a TPUStrategy, the ordinary ops
// (strata::add, matmul, reduce_*, reshape, nn::conv2d, max_pool2d, softmax,
// the cross-entropy primitive, ... and so the Keras layers and losses built
// from them) dispatch on their inputs' shardings by the same rules:
//
//   strategy.run([&](Tensor images) {
//     Tensor x = strategy.experimental_split_to_logical_devices(images, {1, 2, 2, 1});
//     Tensor y = (*conv_layer)(x);         // 4 shards, halo exchange; sharding_of(y) tiled
//     return (*model)(x);                  // the whole model, gathers counted per op
//   }, dist_images);
//
// Mechanism: a dispatch hook in the op layer (strata/ops/dispatch.h). Ops
// whose inputs carry a TensorExtension hand the call (kind, inputs, attrs and
// the op itself as a callable) to the dispatcher TPUStrategy installs. It
// acts only inside a replica of a TPUStrategy: it turns each annotated input
// into its shards (an annotation: cut now, with recorded slices; an earlier
// dispatched result: the shards it carries) and applies the rule of the op
// kind; replicated inputs run on every logical device, maximal(k) inputs on
// device k (assign_to_logical_device: ops run on k). The result is a Tensor
// holding the full value (assembled on logical device 0 with recorded
// concats; the one copy the eager API needs, as the full value must be
// readable) that carries its shards, so the next op runs on them without
// re-splitting. Kinds without a rule take the fallback (the full values run
// once on logical device 0, the result re-sharded to the first sharded
// input's layout), counted in fallback_count(<op name>) ("reshape",
// "transpose", ...). Outside a TPUStrategy replica annotated tensors run as
// plain tensors. Gradients: the tape records the shard-level ops (slices of
// the annotated input, per-shard kernels, the assembling concats), so
// gradients with respect to variables and to annotated inputs go back
// through the same rules; a gradient with respect to an intermediate
// dispatched result (not an input of the step) is not supported (its
// consumers used its shards, so it is unconnected).
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

namespace strata::tpu::sharded {

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
// `devices`, a replica's logical devices: the shards it carries, else cut by
// its annotation (an unannotated tensor is maximal on logical device 0, TF's
// default). TPUStrategy's shard(strategy, t) (tpu_strategy.h) passes the
// calling replica's devices.
ShardedTensor shard_annotated(const Tensor& annotated, const std::vector<const Device*>& devices);
// The full tensor, assembled with recorded concats on `device` (nullptr:
// logical device 0, or the holder of a MAXIMAL sharding).
Tensor unshard(const ShardedTensor& x, const Device* device = nullptr);
// `x` laid out by another sharding (unshard + shard when they differ).
ShardedTensor reshard(const ShardedTensor& x, const tpu::Sharding& sharding);

// --- element-wise ---
ShardedTensor relu(const ShardedTensor& x);
using UnaryFn = std::function<Tensor(const Tensor&)>;
using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;
ShardedTensor unary(const ShardedTensor& x, const UnaryFn& op, const std::string& name);
ShardedTensor add(const ShardedTensor& a, const ShardedTensor& b);
ShardedTensor add(const ShardedTensor& a, const Tensor& b);
ShardedTensor subtract(const ShardedTensor& a, const ShardedTensor& b);
ShardedTensor multiply(const ShardedTensor& a, const ShardedTensor& b);
ShardedTensor multiply(const ShardedTensor& a, const Tensor& b);
// Any broadcasting binary op (strata::add, strata::maximum, ...) under `name`.
ShardedTensor binary(const ShardedTensor& a, const ShardedTensor& b, const BinaryFn& op,
                     const std::string& name);
ShardedTensor binary(const ShardedTensor& a, const Tensor& b, const BinaryFn& op,
                     const std::string& name);

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
// Max / min / prod combine the local results with maximum / minimum / multiply.
ShardedTensor reduce_max(const ShardedTensor& x, const ReduceOptions& options = {});
ShardedTensor reduce_min(const ShardedTensor& x, const ReduceOptions& options = {});
ShardedTensor reduce_prod(const ShardedTensor& x, const ReduceOptions& options = {});
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

// --- the normal op API on sharded values ---
// The full value of `x` (assembled with recorded concats on logical device 0;
// a replicated or maximal x's shard itself) carrying x: tpu::sharding_of
// gives x's sharding and carried_shards(result) gives x back, so ops of the
// normal API applied to it inside a replica of a TPUStrategy run on the
// shards by the rules above (see the header comment).
Tensor as_tensor(const ShardedTensor& x);
// The shards a tensor carries (an as_tensor or dispatched op result), else nullptr.
const ShardedTensor* carried_shards(const Tensor& t);
// The logical devices of the replica running on this thread, or nullptr where
// sharded ops do not apply (outside a replica of a strategy with logical
// devices). Must be thread-safe; it runs on every dispatched op.
using LogicalDevicesOfCurrentReplica = const std::vector<const Device*>* (*)();
// Installs the op-API dispatcher (strata/ops/dispatch.h) for the process,
// asking `logical_devices` which devices the shards of the calling replica
// live on. Idempotent for the same function; another function is
// FailedPreconditionError. TPUStrategy's constructor calls it.
void install_op_dispatcher(LogicalDevicesOfCurrentReplica logical_devices);

// How often `op` took the gather-run-reshard fallback in this process
// (thread-safe counters), and a reset for tests.
int64_t fallback_count(const std::string& op);
void reset_fallback_counts();

}  // namespace strata::tpu::sharded
