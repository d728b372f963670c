#pragma once
// tf.distribute.TPUStrategy over Strata's local TPU system (a mesh of local
// logical CPU devices; see tpu_system.h and strata/tpu/local_topology.h).
//
//   namespace tpu = strata::tpu::experimental;
//   cr::TPUClusterResolver resolver("");
//   strata::config::experimental_connect_to_cluster(resolver);
//   tpu::Topology topology = tpu::initialize_tpu_system(resolver);
//   sd::TPUStrategy all(resolver);                           // one replica per core
//   auto da = tpu::DeviceAssignment::build(topology, {.computation_shape = {1, 1, 1, 2},
//                                                     .num_replicas = 4});
//   sd::TPUStrategy tpu(resolver, da);                       // 4 replicas x 2 logical devices
//   tpu.cluster_resolver();                                  // &resolver
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
// The resolver: TPUStrategy(resolver, ...) keeps the caller's resolver
// (borrowed: the caller keeps it alive for the strategy's lifetime, as the
// seed's program does) or shares a std::shared_ptr; cluster_resolver()
// returns that object. Without one, the strategy owns a
// TPUClusterResolver("local"), as TF makes TPUClusterResolver("") when given
// None. Not yet: multi-host pods (a non-local resolver or a topology with
// more than one task is UnimplementedError), and TF's rule
// that run() in eager mode needs a tf.function (Strata has no functions;
// spec §2.5): any callable is accepted.
//
// Thread-safety: as Strategy (driven by one thread at a time); the
// logical-device methods are called from replica threads concurrently.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/base/mutex.h"
#include "strata/cluster/tpu_cluster_resolver.h"
#include "strata/core/device.h"
#include "strata/core/tensor.h"
#include "strata/distribute/replicated_strategy.h"
#include "strata/tpu/device_assignment.h"
#include "strata/tpu/sharded/sharded_ops.h"
#include "strata/tpu/topology.h"

namespace strata::distribute {

class TPUStrategy;

// The scope experimental_logical_device returns (TF's context manager). While
// it lives: inside a replica of the strategy, ops of this thread run on the
// replica's logical device k; in cross-replica context (the strategy's
// scope), variables the strategy creates put each replica's copy on that
// replica's logical device k. Destroy scopes in reverse order of creation, on
// the thread that made them.
class LogicalDeviceScope {
 public:
  LogicalDeviceScope(const TPUStrategy& strategy, int logical_device_id);
  ~LogicalDeviceScope();
  LogicalDeviceScope(const LogicalDeviceScope&) = delete;
  LogicalDeviceScope& operator=(const LogicalDeviceScope&) = delete;

 private:
  const TPUStrategy* strategy_;
  std::optional<DeviceScope> device_;  // in a replica context
  bool pushed_ = false;                // in cross-replica context
};

// strategy.extended of a TPUStrategy (TF's TPUExtended).
class TPUExtended final : public DeviceListExtended {
 public:
  TPUExtended(TPUStrategy& owner, std::vector<const Device*> devices);
  // XLA compiles for fixed shapes (TF: true on TPU).
  bool experimental_require_static_shapes() const override { return true; }
  // tf.distribute.TPUStrategy.extended.experimental_logical_device(k): places
  // variables and ops on logical device k (see LogicalDeviceScope).
  // InvalidArgumentError (TF's ValueError) for k outside [0, logical devices
  // per replica): "`logical_device_id` not in range (was 2, but there are
  // only 2 logical devices per replica).".
  [[nodiscard]] LogicalDeviceScope experimental_logical_device(int logical_device_id) const;

 private:
  const TPUStrategy* tpu_;
};

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
  // TPUStrategy(tpu_cluster_resolver, experimental_device_assignment,
  // experimental_spmd_xla_partitioning): the seed's
  // `TPUStrategy(resolver, device_assignment)`. The resolver is borrowed (a
  // reference or `&resolver`) or shared; it must name the local system
  // (UnimplementedError for a pod). Otherwise as above.
  explicit TPUStrategy(
      cluster_resolver::TPUClusterResolver& tpu_cluster_resolver,
      std::optional<tpu::experimental::DeviceAssignment> device_assignment = std::nullopt,
      bool experimental_spmd_xla_partitioning = false);
  explicit TPUStrategy(
      cluster_resolver::TPUClusterResolver* tpu_cluster_resolver,
      std::optional<tpu::experimental::DeviceAssignment> device_assignment = std::nullopt,
      bool experimental_spmd_xla_partitioning = false);
  explicit TPUStrategy(
      const std::shared_ptr<cluster_resolver::TPUClusterResolver>& tpu_cluster_resolver,
      std::optional<tpu::experimental::DeviceAssignment> device_assignment = std::nullopt,
      bool experimental_spmd_xla_partitioning = false);
  // A temporary resolver would not outlive the strategy.
  TPUStrategy(cluster_resolver::TPUClusterResolver&& tpu_cluster_resolver,
              std::optional<tpu::experimental::DeviceAssignment> device_assignment = std::nullopt,
              bool experimental_spmd_xla_partitioning = false) = delete;

  std::string name() const override { return "TPUStrategy"; }
  // The resolver given to the constructor (the very object), or the
  // strategy's own local one.
  const cluster_resolver::ClusterResolver* cluster_resolver() const override {
    return resolver_.get();
  }
  // strategy.extended, with the TPU-only methods.
  TPUExtended& extended() const noexcept {
    return static_cast<TPUExtended&>(ReplicatedStrategy::extended());
  }

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
  // Logical device k of each replica inside experimental_logical_device(k).
  const Device& variable_device(int local) const override;

 private:
  friend class LogicalDeviceScope;
  struct Placement;
  TPUStrategy(cluster_resolver::ClusterResolverRef resolver, Placement placement, bool spmd);
  static Placement place(const cluster_resolver::TPUClusterResolver& resolver,
                         std::optional<tpu::experimental::DeviceAssignment> device_assignment);
  int calling_replica(const char* method) const;
  void push_logical_device(int logical_device_id) const;
  void pop_logical_device() const;

  cluster_resolver::ClusterResolverRef resolver_;
  tpu::experimental::DeviceAssignment assignment_;
  std::vector<std::vector<const Device*>> logical_devices_;  // [local replica][logical core]
  bool spmd_;
  // experimental_logical_device scopes entered in cross-replica context.
  mutable Mutex logical_device_mu_;
  mutable std::vector<int> logical_device_stack_ STRATA_GUARDED_BY(logical_device_mu_);
};

}  // namespace strata::distribute

namespace strata::tpu::sharded {

// `annotated` (see sharded::shard_annotated) over the logical devices of the
// calling replica of `strategy`. FailedPreconditionError outside a replica
// context of `strategy`.
ShardedTensor shard(const distribute::TPUStrategy& strategy, const Tensor& annotated);

}  // namespace strata::tpu::sharded
