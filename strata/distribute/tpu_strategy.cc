#include "strata/distribute/tpu_strategy.h"

#include <memory>
#include <utility>

#include "strata/base/errors.h"
#include "strata/core/device.h"
#include "strata/distribute/tpu_system.h"
#include "strata/ops/recorder.h"
#include "strata/tpu/local_topology.h"
#include "strata/tpu/sharded/sharded_ops.h"
#include "strata/tpu/sharding.h"

namespace strata::distribute {

namespace tpu = strata::tpu::experimental;

struct TPUStrategy::Placement {
  tpu::DeviceAssignment assignment;
  std::vector<std::vector<const Device*>> logical_devices;
  std::vector<const Device*> replica_devices;  // logical device 0 of each replica
};

namespace {

// The sharded-op dispatcher's view of the calling thread: the logical devices
// of its replica when that replica belongs to a TPUStrategy.
const std::vector<const Device*>* logical_devices_of_current_replica() {
  ReplicaContext* ctx = get_replica_context();
  if (ctx == nullptr) return nullptr;
  const auto* strategy = dynamic_cast<const TPUStrategy*>(&ctx->strategy());
  if (strategy == nullptr) return nullptr;
  return &strategy->logical_devices(ctx->local_replica_id());
}

constexpr const char* kNotInitialized =
    "TPUStrategy: the TPU system has not been initialized; call "
    "tpu::experimental::initialize_tpu_system() before creating or running a TPUStrategy";

}  // namespace

TPUExtended::TPUExtended(TPUStrategy& owner, std::vector<const Device*> devices)
    : DeviceListExtended(owner, std::move(devices)), tpu_(&owner) {}

LogicalDeviceScope TPUExtended::experimental_logical_device(int logical_device_id) const {
  return LogicalDeviceScope(*tpu_, logical_device_id);
}

LogicalDeviceScope::LogicalDeviceScope(const TPUStrategy& strategy, int logical_device_id)
    : strategy_(&strategy) {
  const int n = strategy.num_logical_devices_per_replica();
  STRATA_CHECK_ARG(logical_device_id >= 0 && logical_device_id < n,
                   "`logical_device_id` not in range (was ", logical_device_id,
                   ", but there are only ", n, " logical devices per replica).");
  ReplicaContext* ctx = get_replica_context();
  if (ctx != nullptr && &ctx->strategy() == &strategy) {
    device_.emplace(
        *strategy.logical_devices(ctx->local_replica_id())[static_cast<size_t>(logical_device_id)]);
  } else {
    strategy.push_logical_device(logical_device_id);
    pushed_ = true;
  }
}

LogicalDeviceScope::~LogicalDeviceScope() {
  if (pushed_) strategy_->pop_logical_device();
}

TPUStrategy::TPUStrategy(std::optional<tpu::DeviceAssignment> device_assignment,
                         bool experimental_spmd_xla_partitioning)
    : TPUStrategy(std::make_shared<cluster_resolver::TPUClusterResolver>("local"),
                  std::move(device_assignment), experimental_spmd_xla_partitioning) {}

TPUStrategy::TPUStrategy(cluster_resolver::TPUClusterResolver& tpu_cluster_resolver,
                         std::optional<tpu::DeviceAssignment> device_assignment,
                         bool experimental_spmd_xla_partitioning)
    : TPUStrategy(&tpu_cluster_resolver, std::move(device_assignment),
                  experimental_spmd_xla_partitioning) {}

TPUStrategy::TPUStrategy(cluster_resolver::TPUClusterResolver* tpu_cluster_resolver,
                         std::optional<tpu::DeviceAssignment> device_assignment,
                         bool experimental_spmd_xla_partitioning)
    : TPUStrategy(cluster_resolver::ClusterResolverRef(tpu_cluster_resolver),
                  place(*tpu_cluster_resolver, std::move(device_assignment)),
                  experimental_spmd_xla_partitioning) {}

TPUStrategy::TPUStrategy(
    const std::shared_ptr<cluster_resolver::TPUClusterResolver>& tpu_cluster_resolver,
    std::optional<tpu::DeviceAssignment> device_assignment, bool experimental_spmd_xla_partitioning)
    : TPUStrategy(cluster_resolver::ClusterResolverRef(tpu_cluster_resolver),
                  place(*tpu_cluster_resolver, std::move(device_assignment)),
                  experimental_spmd_xla_partitioning) {}

TPUStrategy::TPUStrategy(cluster_resolver::ClusterResolverRef resolver, Placement placement,
                         bool spmd)
    : ReplicatedStrategy(placement.replica_devices, 0, placement.assignment.num_replicas()),
      resolver_(std::move(resolver)),
      assignment_(std::move(placement.assignment)),
      logical_devices_(std::move(placement.logical_devices)),
      spmd_(spmd) {
  set_extended(std::make_unique<TPUExtended>(*this, devices()));
  // Ops on annotated tensors inside this strategy's replicas run sharded.
  strata::tpu::sharded::install_op_dispatcher(&logical_devices_of_current_replica);
}

TPUStrategy::Placement TPUStrategy::place(const cluster_resolver::TPUClusterResolver& resolver,
                                          std::optional<tpu::DeviceAssignment> device_assignment) {
  STRATA_CHECK(UNIMPLEMENTED, resolver.is_local(),
               "TPUStrategy: multi-host TPU pods are not supported yet; expected a resolver of "
               "the local system (TPUClusterResolver(\"\") or (\"local\")), got tpu '",
               resolver.tpu(), "'");
  std::optional<tpu::Topology> topology = tpu::initialized_topology();
  STRATA_CHECK(FAILED_PRECONDITION, topology.has_value(), kNotInitialized);
  if (!device_assignment.has_value()) {
    device_assignment = tpu::DeviceAssignment::default_assignment(*topology);
  }
  STRATA_CHECK_ARG(device_assignment->topology() == *topology,
                   "TPUStrategy: expected a device assignment over the initialized TPU system's "
                   "topology (mesh shape ",
                   topology->mesh_shape(), "), got one over mesh shape ",
                   device_assignment->topology().mesh_shape());
  STRATA_CHECK(UNIMPLEMENTED, topology->num_tasks() == 1,
               "TPUStrategy: multi-host TPU pods are not supported yet; expected a topology of "
               "one task, got ",
               topology->num_tasks(), " tasks");
  TPUStrategy::Placement p{*device_assignment, {}, {}};
  for (int r = 0; r < p.assignment.num_replicas(); ++r) {
    std::vector<const Device*> cores;
    for (int k = 0; k < p.assignment.num_cores_per_replica(); ++k) {
      tpu::BackingDevice b =
          tpu::backing_device_at_coordinates(*topology, p.assignment.coordinates(r, k));
      cores.push_back(&find_device("CPU:" + std::to_string(b.device_index)));
    }
    p.replica_devices.push_back(cores.front());
    p.logical_devices.push_back(std::move(cores));
  }
  return p;
}

const std::vector<const Device*>& TPUStrategy::logical_devices(int local_replica) const {
  STRATA_CHECK_ARG(local_replica >= 0 && local_replica < num_local_replicas(),
                   "TPUStrategy.logical_devices: expected a local replica in [0, ",
                   num_local_replicas(), "), got ", local_replica);
  return logical_devices_[static_cast<size_t>(local_replica)];
}

void TPUStrategy::push_logical_device(int logical_device_id) const {
  MutexLock lock(logical_device_mu_);
  logical_device_stack_.push_back(logical_device_id);
}

void TPUStrategy::pop_logical_device() const {
  MutexLock lock(logical_device_mu_);
  STRATA_INTERNAL_CHECK(!logical_device_stack_.empty(), "logical device scopes out of order");
  logical_device_stack_.pop_back();
}

const Device& TPUStrategy::variable_device(int local) const {
  MutexLock lock(logical_device_mu_);
  if (logical_device_stack_.empty()) return local_device(local);
  return *logical_devices(local)[static_cast<size_t>(logical_device_stack_.back())];
}

void TPUStrategy::run_on_replicas(const std::function<void(int)>& body) {
  STRATA_CHECK(FAILED_PRECONDITION, tpu::is_tpu_system_initialized(), kNotInitialized);
  ReplicatedStrategy::run_on_replicas(body);
}

int TPUStrategy::calling_replica(const char* method) const {
  ReplicaContext* ctx = get_replica_context();
  STRATA_CHECK(
      FAILED_PRECONDITION, ctx != nullptr && &ctx->strategy() == this, "TPUStrategy.", method,
      ": expected to be called in a replica context of this TPUStrategy (inside "
      "strategy.run(fn)), got ",
      ctx == nullptr ? "a cross-replica context" : "the replica context of another strategy");
  return ctx->local_replica_id();
}

Tensor TPUStrategy::experimental_assign_to_logical_device(const Tensor& t,
                                                          int logical_device_id) const {
  int local = calling_replica("experimental_assign_to_logical_device");
  STRATA_CHECK_ARG(
      !spmd_,
      "Cannot assign a tensor to a logical device in SPMD mode. To disable SPMD, "
      "Please construct the TPUStrategy with `experimental_spmd_xla_partitioning=False`");
  tpu::Sharding sharding =
      tpu::Sharding::maximal(logical_device_id, num_logical_devices_per_replica());
  const Device& device =
      *logical_devices_[static_cast<size_t>(local)][static_cast<size_t>(logical_device_id)];
  // Moving the value is TF's annotation op (an identity): recorded, so that a
  // tape's gradients flow back through the assignment.
  Tensor placed = t.on_device(device);
  if (placed.id() != t.id()) record_op(OpKind::Identity, {t}, {placed});
  return tpu::with_sharding(placed, sharding);
}

Tensor TPUStrategy::experimental_replicate_to_logical_devices(const Tensor& t) const {
  calling_replica("experimental_replicate_to_logical_devices");
  return tpu::with_sharding(t, tpu::Sharding::replicated(num_logical_devices_per_replica()));
}

Tensor TPUStrategy::experimental_split_to_logical_devices(
    const Tensor& t, std::vector<int64_t> partition_dimensions) const {
  calling_replica("experimental_split_to_logical_devices");
  return tpu::with_sharding(
      t, tpu::Sharding::split_to_logical_devices(t.shape(), std::move(partition_dimensions),
                                                 num_logical_devices_per_replica()));
}

}  // namespace strata::distribute

namespace strata::tpu::sharded {

ShardedTensor shard(const distribute::TPUStrategy& strategy, const Tensor& annotated) {
  distribute::ReplicaContext* ctx = distribute::get_replica_context();
  STRATA_CHECK(
      FAILED_PRECONDITION, ctx != nullptr && &ctx->strategy() == &strategy,
      "sharded::shard: expected to be called in a replica context of this TPUStrategy (inside "
      "strategy.run(fn))");
  return shard_annotated(annotated, strategy.logical_devices(ctx->local_replica_id()));
}

}  // namespace strata::tpu::sharded
