#pragma once
// Connecting to and initialising the (local) TPU system, as
// tf.config.experimental_connect_to_cluster and
// tf.tpu.experimental.initialize_tpu_system / shutdown_tpu_system.
//
//   strata::config::experimental_connect_to_cluster();             // the local system
//   namespace tpu = strata::tpu::experimental;
//   tpu::Topology topology = tpu::initialize_tpu_system();        // mesh of local devices
//   strata::distribute::TPUStrategy strategy;                     // needs an initialised system
//   tpu::shutdown_tpu_system();
//
// Strata's TPU system is the mesh of local logical CPU devices described in
// strata/tpu/local_topology.h (shape from STRATA_TPU_TOPOLOGY, else from the
// devices). These functions currently address the local system only (TF's
// resolver "" / "local"): the resolver-taking overloads of the API
// (`initialize_tpu_system(resolver)`) are added with the cluster layer's
// TPUClusterResolver; multi-host pods are not supported yet.
//
// Global state: whether the system is initialised, and its Topology, is
// process-wide state (as TF's eager context) guarded by a mutex; every
// function here is thread-safe.

#include <optional>

#include "strata/tpu/topology.h"

namespace strata::config {

// tf.config.experimental_connect_to_cluster for the local system: records that
// the program is connected to the local cluster (nothing else to do: the
// local devices are already visible). Idempotent.
void experimental_connect_to_cluster();
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

// tf.tpu.experimental.shutdown_tpu_system for the local system: forgets the
// topology. A no-op when the system is not initialised. Strategies built
// before keep their devices, but their run() raises FailedPreconditionError.
void shutdown_tpu_system();

// Whether initialize_tpu_system succeeded and shutdown_tpu_system was not
// called since.
bool is_tpu_system_initialized();

// The topology of the initialised system; std::nullopt when not initialised.
std::optional<Topology> initialized_topology();

}  // namespace strata::tpu::experimental
