#include "strata/distribute/tpu_system.h"

#include <string>

#include "strata/base/errors.h"
#include "strata/base/logging.h"
#include "strata/base/mutex.h"
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

}  // namespace

namespace config {

void experimental_connect_to_cluster() {
  TpuSystemState& s = state();
  MutexLock lock(s.mu);
  s.connected = true;
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
    s.topology = topology;
    return topology;
  } catch (const InvalidArgumentError& e) {
    throw NotFoundError(std::string("TPUs not found in the cluster. Failed in initialization: ") +
                        e.what());
  }
}

void shutdown_tpu_system() {
  TpuSystemState& s = state();
  MutexLock lock(s.mu);
  s.topology.reset();
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
