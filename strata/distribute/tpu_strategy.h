#pragma once
// tf.distribute.TPUStrategy over Strata's local TPU system (a mesh of local
// logical CPU devices; see tpu_system.h and strata/tpu/local_topology.h).
//
//   namespace tpu = strata::tpu::experimental;
//   tpu::Topology topology = tpu::initialize_tpu_system();
//   sd::TPUStrategy all;                                     // one replica per core
//   auto da = tpu::DeviceAssignment::build(topology, {.computation_shape = {1, 1, 1, 2},
//                                                     .num_replicas = 4});
//   sd::TPUStrategy tpu(da);                                 // 4 replicas x 2 logical devices
//   tpu.run([&](Tensor x) {
//     x = tpu.experimental_split_to_logical_devices(x, {1, 2});   // annotate
//     return x * 2.f;
//   }, dist_x);
//
// Devices: replica r's logical device k is the local device backing the core
// at device_assignment.coordinates(r, k) ("CPU:<tpu ordinal>", see
// tpu::backing_device_at_coordinates). Each replica runs on its own long-lived
// thread (ReplicatedStrategy) bound to its logical device 0, so by default
// every op of the replica runs there, as in TF. Without an assignment every
// core is a replica of one logical device (DeviceAssignment::default_assignment).
//
// Model parallelism: the logical-device annotations validate as TensorFlow
// does and return the tensor carrying its tpu::Sharding (tpu::sharding_of);
// experimental_assign_to_logical_device also places the value on that
// logical device (a recorded move, so gradients flow). Sharded execution is
// strata/tpu/sharded/sharded_ops.h: the ordinary ops (and so the Keras
// layers) applied to an annotated Tensor inside a replica run shard-wise on
// the replica's logical devices in parallel (the constructor installs the
// op-API dispatcher); sharded::shard(strategy, t) and the sharded:: ops are
// the explicit form.
//
// Not yet: the resolver-taking constructor (arrives with the cluster layer's
// TPUClusterResolver; today the local system is implied), multi-host pods
// (a topology with more than one task is UnimplementedError), and TF's rule
// that run() in eager mode needs a tf.function (Strata has no functions;
// spec §2.5): any callable is accepted.
//
// Thread-safety: as Strategy (driven by one thread at a time); the
// logical-device methods are called from replica threads concurrently.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/distribute/replicated_strategy.h"
#include "strata/tpu/device_assignment.h"
#include "strata/tpu/sharded/sharded_ops.h"
#include "strata/tpu/topology.h"

namespace strata::distribute {

class TPUStrategy : public ReplicatedStrategy {
 public:
  // TPUStrategy(experimental_device_assignment=, experimental_spmd_xla_partitioning=)
  // on the local system. FailedPreconditionError unless
  // tpu::experimental::initialize_tpu_system() was called (TF fails there too
  // without an initialised system). InvalidArgumentError if the assignment's
  // topology is not the initialised system's; UnimplementedError for a
  // multi-task topology; NotFoundError if a core has no backing device.
  explicit TPUStrategy(
      std::optional<tpu::experimental::DeviceAssignment> device_assignment = std::nullopt,
      bool experimental_spmd_xla_partitioning = false);

  std::string name() const override { return "TPUStrategy"; }

  const tpu::experimental::DeviceAssignment& device_assignment() const noexcept {
    return assignment_;
  }
  int num_logical_devices_per_replica() const noexcept {
    return assignment_.num_cores_per_replica();
  }
  // The logical devices of local replica `local_replica`, by logical core.
  // InvalidArgumentError if the index is out of range.
  const std::vector<const Device*>& logical_devices(int local_replica) const;

  // experimental_assign_to_logical_device: `t` placed on logical device
  // `logical_device_id` of the calling replica, carrying
  // Sharding::maximal(logical_device_id). InvalidArgumentError (TF's
  // ValueError) for an id outside [0, logical devices per replica) and in SPMD
  // mode ("Cannot assign a tensor to a logical device in SPMD mode...").
  Tensor experimental_assign_to_logical_device(const Tensor& t, int logical_device_id) const;
  // experimental_replicate_to_logical_devices: `t` carrying Sharding::replicated.
  Tensor experimental_replicate_to_logical_devices(const Tensor& t) const;
  // experimental_split_to_logical_devices: `t` carrying the tiled sharding;
  // TF's checks (InvalidArgumentError): rank, divisibility, product equal to
  // the logical devices per replica (tpu::Sharding::split_to_logical_devices).
  Tensor experimental_split_to_logical_devices(const Tensor& t,
                                               std::vector<int64_t> partition_dimensions) const;
  // All three: FailedPreconditionError unless called inside a replica context
  // of this strategy (inside this->run()).

 protected:
  // Adds the check that the TPU system is still initialised.
  void run_on_replicas(const std::function<void(int)>& body) override;

 private:
  struct Placement;
  TPUStrategy(Placement placement, bool spmd);
  static Placement place(std::optional<tpu::experimental::DeviceAssignment> device_assignment);
  int calling_replica(const char* method) const;

  tpu::experimental::DeviceAssignment assignment_;
  std::vector<std::vector<const Device*>> logical_devices_;  // [local replica][logical core]
  bool spmd_;
};

}  // namespace strata::distribute

namespace strata::tpu::sharded {

// `annotated` (see sharded::shard_annotated) over the logical devices of the
// calling replica of `strategy`. FailedPreconditionError outside a replica
// context of `strategy`.
ShardedTensor shard(const distribute::TPUStrategy& strategy, const Tensor& annotated);

}  // namespace strata::tpu::sharded
