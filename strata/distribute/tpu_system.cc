#include "strata/distribute/tpu_system.h"

#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/logging.h"
#include "strata/base/mutex.h"
#include "strata/base/str_cat.h"
#include "strata/core/device.h"
#include "strata/tpu/local_topology.h"

namespace strata {
namespace {

// The process-wide TPU system state (documented in tpu_system.h).
struct TpuSystemState {
  Mutex mu;
  bool connected STRATA_GUARDED_BY(mu) = false;
  std::optional<tpu::experimental::Topology> topology STRATA_GUARDED_BY(mu);
};

TpuSystemState& state() {
  static TpuSystemState* s = new TpuSystemState();  // never destroyed: usable at exit
  return *s;
}

namespace cr = distribute::cluster_resolver;

// The resolver-taking functions address the local system only.
void check_local(const cr::TPUClusterResolver& resolver, const char* who) {
  STRATA_CHECK(UNIMPLEMENTED, resolver.is_local(), who,
               ": multi-host TPU pods are not supported yet; expected a resolver of the local "
               "system (TPUClusterResolver(\"\") or (\"local\")), got tpu '",
               resolver.tpu(), "' with cluster ", resolver.cluster_spec().to_json());
}

// The system's cores as devices TPU:k, backed by CPU:k (tpu/local_topology.h).
void show_cores_as_devices(const tpu::experimental::Topology& topology) {
  std::vector<const Device*> backing;
  backing.reserve(static_cast<size_t>(topology.num_tpus_per_task()));
  for (int k = 0; k < topology.num_tpus_per_task(); ++k) {
    backing.push_back(&find_device(str_cat("CPU:", k)));
  }
  set_backed_devices("TPU", backing);
}

}  // namespace

namespace config {

void experimental_connect_to_cluster() {
  TpuSystemState& s = state();
  MutexLock lock(s.mu);
  s.connected = true;
}

void experimental_connect_to_cluster(const cr::ClusterResolver& cluster_spec_or_resolver) {
  if (const auto* tpu = dynamic_cast<const cr::TPUClusterResolver*>(&cluster_spec_or_resolver)) {
    check_local(*tpu, "experimental_connect_to_cluster");
  } else {
    const train::ClusterSpec spec = cluster_spec_or_resolver.cluster_spec();
    STRATA_CHECK(UNIMPLEMENTED, spec.jobs().empty(),
                 "experimental_connect_to_cluster: remote eager execution on a cluster is not "
                 "supported; expected a resolver of the local system, got cluster ",
                 spec.to_json());
  }
  experimental_connect_to_cluster();
}

bool is_connected_to_cluster() {
  TpuSystemState& s = state();
  MutexLock lock(s.mu);
  return s.connected;
}

}  // namespace config

namespace tpu::experimental {

Topology initialize_tpu_system() {
  TpuSystemState& s = state();
  MutexLock lock(s.mu);
  if (s.topology.has_value()) {
    STRATA_LOG(WARNING,
               "TPU system local has already been initialized. Reinitializing the TPU can cause "
               "previously created variables on TPU to be lost.");
    s.topology.reset();
  }
  try {
    Topology topology = local_topology_from_environment();
    show_cores_as_devices(topology);
    s.topology = topology;
    return topology;
  } catch (const InvalidArgumentError& e) {
    throw NotFoundError(std::string("TPUs not found in the cluster. Failed in initialization: ") +
                        e.what());
  }
}

Topology initialize_tpu_system(const cr::TPUClusterResolver& cluster_resolver) {
  check_local(cluster_resolver, "initialize_tpu_system");
  return initialize_tpu_system();
}

void shutdown_tpu_system() {
  TpuSystemState& s = state();
  MutexLock lock(s.mu);
  if (s.topology.has_value()) set_backed_devices("TPU", {});
  s.topology.reset();
}

void shutdown_tpu_system(const cr::TPUClusterResolver& cluster_resolver) {
  check_local(cluster_resolver, "shutdown_tpu_system");
  shutdown_tpu_system();
}

bool is_tpu_system_initialized() {
  TpuSystemState& s = state();
  MutexLock lock(s.mu);
  return s.topology.has_value();
}

std::optional<Topology> initialized_topology() {
  TpuSystemState& s = state();
  MutexLock lock(s.mu);
  return s.topology;
}

}  // namespace tpu::experimental
}  // namespace strata
