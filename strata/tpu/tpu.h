#pragma once
// The tpu layer: Strata's local TPU system. There are no TPUs; the "TPU
// system" is a mesh [x, y, z, cores_per_chip] of local devices (logical CPU
// devices today), described by a Topology, and a DeviceAssignment maps each
// replica's logical cores onto that mesh with TensorFlow's placement
// algorithm; a Sharding lays a tensor out over a replica's logical devices
// (sharding.h). TPUStrategy (distribute layer) runs replica r's logical core k on
// the local device backing da.coordinates(r, k). docs/tpu.md is the guide.
//
//   namespace tpu = strata::tpu::experimental;
//   tpu::Topology topo = tpu::local_topology_from_environment();  // STRATA_TPU_TOPOLOGY or CPUs
//   topo.mesh_shape();                    // e.g. {2, 2, 1, 2} for 8 logical CPU devices
//   auto da = tpu::DeviceAssignment::build(
//       topo, {.computation_shape = {1, 1, 1, 2}, .num_replicas = 4});
//   da.num_cores_per_replica();           // 2 logical devices per replica
//   da.tpu_device(3, 1, "worker");        // "/job:worker/task:0/device:TPU:5"
//   tpu::backing_device_at_coordinates(topo, da.coordinates(3, 1));  // task 0, CPU:5
//   std::cout << tpu::render_device_assignment(da);                  // the mesh as a text grid
//   tpu::Topology again = tpu::Topology::parse(topo.serialized());   // TopologyProto bytes

#include "strata/tpu/device_assignment.h"
#include "strata/tpu/grid.h"
#include "strata/tpu/local_topology.h"
#include "strata/tpu/sharding.h"
#include "strata/tpu/topology.h"
