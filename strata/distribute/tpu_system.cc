#include "strata/distribute/tpu_system.h"

#include <mutex>
#include <string>

#include "strata/base/errors.h"
#include "strata/base/logging.h"
#include "strata/tpu/local_topology.h"

namespace strata {
namespace {

// The process-wide TPU system state (documented in tpu_system.h).
struct TpuSystemState {
  std::mutex mu;
  bool connected = false;
  std::optional<tpu::experimental::Topology> topology;
};

TpuSystemState& state() {
  static TpuSystemState* s = new TpuSystemState();  // never destroyed: usable at exit
  return *s;
}

}  // namespace

namespace config {

void experimental_connect_to_cluster() {
  std::lock_guard<std::mutex> lock(state().mu);
  state().connected = true;
}

bool is_connected_to_cluster() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().connected;
}

}  // namespace config

namespace tpu::experimental {

Topology initialize_tpu_system() {
  std::lock_guard<std::mutex> lock(state().mu);
  if (state().topology.has_value()) {
    STRATA_LOG(WARNING,
               "TPU system local has already been initialized. Reinitializing the TPU can cause "
               "previously created variables on TPU to be lost.");
    state().topology.reset();
  }
  try {
    Topology topology = local_topology_from_environment();
    state().topology = topology;
    return topology;
  } catch (const InvalidArgumentError& e) {
    throw NotFoundError(std::string("TPUs not found in the cluster. Failed in initialization: ") +
                        e.what());
  }
}

void shutdown_tpu_system() {
  std::lock_guard<std::mutex> lock(state().mu);
  state().topology.reset();
}

bool is_tpu_system_initialized() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().topology.has_value();
}

std::optional<Topology> initialized_topology() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().topology;
}

}  // namespace tpu::experimental
}  // namespace strata
