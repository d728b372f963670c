#include "tools/strata/topology_command.h"

#include <sstream>

#include "strata/base/errors.h"
#include "strata/core/device.h"
#include "strata/tpu/device_assignment.h"
#include "strata/tpu/grid.h"
#include "strata/tpu/local_topology.h"

namespace strata::tools {

namespace tpu = strata::tpu::experimental;

std::string run_topology(const TopologyOptions& options) {
  // Without --devices, a given mesh describes itself (as many devices as it has
  // cores); otherwise the mesh comes from this machine's logical devices.
  int devices = options.devices;
  if (devices == 0 && !options.tpu_topology.empty()) {
    devices = 1;
    for (int d : tpu::parse_mesh_shape(options.tpu_topology)) devices *= d;
  }
  if (devices == 0) devices = static_cast<int>(local_devices().size());
  tpu::Topology topology = tpu::local_topology(options.tpu_topology, devices);
  std::ostringstream os;
  os << "topology (task:TPU ordinal at each coordinate)\n"
     << tpu::render_topology(topology) << "\n";
  if (options.computation_shape.empty() && options.num_replicas == 0) {
    os << "default device assignment (every core a replica)\n"
       << tpu::render_device_assignment(tpu::DeviceAssignment::default_assignment(topology));
    return os.str();
  }
  tpu::DeviceAssignmentOptions da_options{.computation_shape = options.computation_shape,
                                          .computation_stride = options.computation_stride};
  if (options.num_replicas > 0) {
    da_options.num_replicas = options.num_replicas;
  } else {
    // As many replicas as the mesh holds blocks of the computation shape.
    int cores_per_replica = 1;
    for (int c : options.computation_shape) cores_per_replica *= c;
    da_options.num_replicas = std::max(
        1, topology.num_tasks() * topology.num_tpus_per_task() / std::max(1, cores_per_replica));
  }
  os << "device assignment (replica:logical core at each coordinate)\n"
     << tpu::render_device_assignment(tpu::DeviceAssignment::build(topology, da_options));
  return os.str();
}

}  // namespace strata::tools
