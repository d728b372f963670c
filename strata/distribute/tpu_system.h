#pragma once
// Connecting to and initialising the (local) TPU system, as
// tf.config.experimental_connect_to_cluster and
// tf.tpu.experimental.initialize_tpu_system / shutdown_tpu_system.
//
//   namespace cr = strata::distribute::cluster_resolver;
//   namespace tpu = strata::tpu::experimental;
//   cr::TPUClusterResolver resolver("");                          // the local system
//   strata::config::experimental_connect_to_cluster(resolver);
//   tpu::Topology topology = tpu::initialize_tpu_system(resolver); // mesh of local devices
//   strata::config::list_logical_devices("TPU");                 // TPU:0 .. TPU:n-1
//   strata::distribute::TPUStrategy strategy(resolver);          // needs an initialised system
//   tpu::shutdown_tpu_system(resolver);
//
// Strata's TPU system is the mesh of local logical CPU devices described in
// strata/tpu/local_topology.h (shape from STRATA_TPU_TOPOLOGY, else from the
// devices). The functions without a resolver address it as TF's resolver ""
// does on a host with local TPUs. A resolver must name the local system
// (TPUClusterResolver "local", or "" without a TF_CONFIG pod): multi-host pods
// and remote clusters are UnimplementedError.
//
// While the system is initialised its cores are devices "TPU:0" .. "TPU:<n-1>"
// (strata::set_backed_devices), TPU ordinal k running on the local device
// CPU:k that backs it: config::list_logical_devices("TPU") lists them and
// strata::device("/TPU:0") places ops on core 0, as in TensorFlow's TPU guide.
// shutdown_tpu_system removes them.
//
// Global state: whether the system is initialised, and its Topology, is
// process-wide state (as TF's eager context) guarded by a mutex; every
// function here is thread-safe.

#include <optional>

#include "strata/cluster/cluster_resolver.h"
#include "strata/cluster/tpu_cluster_resolver.h"
#include "strata/tpu/topology.h"

namespace strata::config {

// tf.config.experimental_connect_to_cluster for the local system: records that
// the program is connected to the local cluster (nothing else to do: the
// local devices are already visible). Idempotent.
void experimental_connect_to_cluster();
// tf.config.experimental_connect_to_cluster(cluster_spec_or_resolver): the
// local system when `resolver` names it (a local TPUClusterResolver, or any
// resolver whose cluster has no jobs). A cluster with jobs would mean remote
// eager execution on its tasks, which Strata does not have:
// UnimplementedError naming the cluster.
void experimental_connect_to_cluster(
    const distribute::cluster_resolver::ClusterResolver& cluster_spec_or_resolver);
// Whether experimental_connect_to_cluster was called (shutdown_tpu_system
// does not undo it).
bool is_connected_to_cluster();

}  // namespace strata::config

namespace strata::tpu::experimental {

// tf.tpu.experimental.initialize_tpu_system for the local system: builds the
// topology with local_topology_from_environment() and records it. Calling it
// again while initialised re-initialises (re-reads the environment and the
// devices), writing TensorFlow's warning to stderr ("TPU system ... has already
// been initialized. Reinitializing the TPU can cause previously created
// variables on TPU to be lost."), as TF does. InvalidArgumentError from
// local_topology (bad STRATA_TPU_TOPOLOGY, too few devices) is reported as
// TF's NotFoundError "TPUs not found in the cluster. Failed in
// initialization: <cause>"; the system then stays uninitialised.
Topology initialize_tpu_system();
// initialize_tpu_system(cluster_resolver): as above for a resolver of the
// local system; UnimplementedError for a multi-host pod
// (`TPUClusterResolver("10.0.0.1:8470,...")`).
Topology initialize_tpu_system(
    const distribute::cluster_resolver::TPUClusterResolver& cluster_resolver);

// tf.tpu.experimental.shutdown_tpu_system for the local system: forgets the
// topology. A no-op when the system is not initialised. Strategies built
// before keep their devices, but their run() raises FailedPreconditionError.
void shutdown_tpu_system();
// shutdown_tpu_system(cluster_resolver): the same checks as
// initialize_tpu_system(cluster_resolver).
void shutdown_tpu_system(const distribute::cluster_resolver::TPUClusterResolver& cluster_resolver);

// Whether initialize_tpu_system succeeded and shutdown_tpu_system was not
// called since.
bool is_tpu_system_initialized();

// The topology of the initialised system; std::nullopt when not initialised.
std::optional<Topology> initialized_topology();

}  // namespace strata::tpu::experimental
