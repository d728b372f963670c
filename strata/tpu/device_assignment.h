#pragma once
// DeviceAssignment: which mesh core runs each logical core of each replica, as
// tf.tpu.experimental.DeviceAssignment.
//
// A computation replica spans num_cores_per_replica logical cores (the
// "logical devices" of model parallelism); core_assignment()[r][k] holds the
// coordinates {x, y, z, core} of the physical core that logical core k of
// replica r runs on.
//
//   namespace tpu = strata::tpu::experimental;
//   tpu::Topology topo = tpu::local_topology("2x2x1x2", 8);          // 4 chips, 2 cores each
//   auto da = tpu::DeviceAssignment::build(topo, {.computation_shape = {1, 1, 1, 2},
//                                                 .num_replicas = 4});
//   da.num_replicas();              // 4
//   da.num_cores_per_replica();     // 2: both cores of one chip
//   da.coordinates(2, 1);           // {1, 1, 0, 1}
//   da.tpu_device(2, 1, "worker");  // "/job:worker/task:0/device:TPU:7"
//   da.lookup_replicas(0, 0);       // {0, 1, 2, 3}
//
// build() is TensorFlow's device_assignment() placement algorithm, step for
// step (docs/tpu.md explains it): replica blocks of computation_shape cores,
// spaced by computation_stride, are tiled over the mesh — as a 3-D ring of
// whole-chip blocks when every block uses all cores of its chips, the mesh is
// full and there is no stride, otherwise in mixed-radix order with the core
// dimension first — and degraded slices (missing devices) are filled in task
// order. Its errors are TensorFlow's ValueErrors, as InvalidArgumentError.
//
// Immutable after construction: thread-safe.

#include <string>
#include <string_view>
#include <vector>

#include "strata/tpu/topology.h"

namespace strata::tpu::experimental {

// tpu.device_assignment.DeviceOrderMode.
enum class DeviceOrderMode : int {
  AUTO = 0,  // rings where TF's 3-D tiling applies, else meshes
  RING = 1,  // force the 3-D ring tiling (InvalidArgumentError where it does not apply)
  MESH = 2,  // never the ring tiling
};

// The arguments of DeviceAssignment.build. Defaults equal TensorFlow's: an
// empty computation_shape / computation_stride means None (all ones).
struct DeviceAssignmentOptions {
  std::vector<int> computation_shape = {};   // cores of one replica in x, y, z, core
  std::vector<int> computation_stride = {};  // spacing of those cores in the mesh
  int num_replicas = 1;
  DeviceOrderMode device_order_mode = DeviceOrderMode::AUTO;
};

class DeviceAssignment {
 public:
  // DeviceAssignment(topology, core_assignment): core_assignment is indexed
  // [replica][logical core][axis]. InvalidArgumentError if it is empty or
  // ragged, its minor dimension is not the topology's mesh rank (TF's
  // ValueErrors), or (Strata's checks, where TF would fail later) a
  // coordinate lies outside the mesh, names a missing device, or two logical
  // cores share one physical core.
  DeviceAssignment(Topology topology,
                   const std::vector<std::vector<std::vector<int>>>& core_assignment);

  // DeviceAssignment.build(topology, computation_shape, computation_stride,
  // num_replicas) with TensorFlow's algorithm and ValueErrors:
  //   "computation_shape must have shape [4]; got [3]", "... must be positive",
  //   "computation footprint [1, 2, 2, 2] does not fit in TPU topology shape [2, 2, 1, 2]",
  //   "requested 9 replicas but only 8 replicas with shape ... fit in a TPU mesh of shape ...",
  //   RING ordering where the 3-D tiling does not apply, and on degraded slices
  //   a stride or more cores than devices. num_replicas < 1 is also an
  //   InvalidArgumentError (TF builds an empty assignment for 0).
  static DeviceAssignment build(const Topology& topology,
                                const DeviceAssignmentOptions& options = {});

  // The assignment TPUStrategy uses when given none: every core is a replica
  // of one logical core, replicas in device order (task by task, TPU ordinal
  // by ordinal). Note this differs from build(topology, {.num_replicas = all
  // cores}), which orders replicas by TF's placement algorithm.
  static DeviceAssignment default_assignment(const Topology& topology);

  const Topology& topology() const noexcept { return topology_; }
  int num_replicas() const noexcept { return static_cast<int>(core_assignment_.size()); }
  int num_cores_per_replica() const noexcept { return num_cores_per_replica_; }
  // [replica][logical core] -> coordinates.
  const std::vector<std::vector<Coordinates>>& core_assignment() const noexcept {
    return core_assignment_;
  }

  // The coordinates of logical core `logical_core` of `replica`.
  // InvalidArgumentError if either index is out of range (here and below).
  Coordinates coordinates(int replica, int logical_core) const;
  // The replicas, sorted, whose `logical_core` lives on task `task_id`.
  // InvalidArgumentError (TF: "Can not find any replica in task: ...") if none.
  std::vector<int> lookup_replicas(int task_id, int logical_core) const;
  // The TPU ordinal (within its task) of the core running (replica, logical_core).
  int tpu_ordinal(int replica = 0, int logical_core = 0) const;
  // "/job:<job>/task:<t>/device:CPU:0": the host of that core (no job part if empty).
  std::string host_device(int replica = 0, int logical_core = 0, std::string_view job = {}) const;
  // "/job:<job>/task:<t>/device:TPU:<ordinal>".
  std::string tpu_device(int replica = 0, int logical_core = 0, std::string_view job = {}) const;

 private:
  // Coordinates already checked against the mesh; checks presence and uniqueness.
  struct Checked {};
  DeviceAssignment(Checked, Topology topology,
                   std::vector<std::vector<Coordinates>> core_assignment);
  void check_indices(int replica, int logical_core, std::string_view who) const;

  Topology topology_;
  std::vector<std::vector<Coordinates>> core_assignment_;
  int num_cores_per_replica_ = 0;
};

// The ring orders of TF's placement algorithm, exposed for tests and for
// `strata topology`. open_ring_2d(X, Y, z): an X by Y plane at height z in ring
// order, without chip (0, 0). ring_3d(X, Y, Z): the whole X by Y by Z box in
// ring order, starting at (0, 0, 0); odd dimensions > 1 fall back to x-fastest
// row-major order (TF logs "Odd dimension" there). Each entry is {x, y, z}.
std::vector<std::array<int, 3>> open_ring_2d(int x_size, int y_size, int z_coord);
std::vector<std::array<int, 3>> ring_3d(int x_size, int y_size, int z_size);

}  // namespace strata::tpu::experimental
