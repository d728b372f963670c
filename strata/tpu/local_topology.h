#pragma once
// The local TPU system: a mesh of local devices.
//
// Strata has no TPUs; its "TPU system" is the host's local (logical CPU)
// devices arranged as a TPU mesh [x, y, z, cores_per_chip]. Each task (a
// worker process of a multi-host pod) contributes num_tpus_per_task devices,
// and the core with TPU ordinal k on task t runs on that task's local device
// k ("CPU:k"). docs/tpu.md describes the model with examples.
//
//   namespace tpu = strata::tpu::experimental;
//   tpu::local_topology("", 8).mesh_shape();          // {2, 2, 1, 2}: TPU v3-8's mesh
//   tpu::local_topology("1x2x2x2", 8).mesh_shape();   // from STRATA_TPU_TOPOLOGY
//   tpu::local_topology("", 8, 4).mesh_shape();       // {4, 4, 1, 2}: 4 hosts of 2x2 chips
//   tpu::local_topology("2x2x1x2", 4);                // InvalidArgumentError: needs 8, got 4
//   auto core = tpu::backing_device_at_coordinates(topo, {1, 0, 0, 1});   // {task 0, device 3}
//
// The mesh shape (Strata's rule):
//  * STRATA_TPU_TOPOLOGY="XxYxZxC" (C = cores per chip) when set: the whole
//    system's shape; each of the num_tasks tasks gets X*Y*Z*C / num_tasks
//    cores, backed by its first that many local devices.
//  * Otherwise from the N local devices of each task: chips of C = 2 cores when
//    N is even (as TPU v2/v3), else C = 1; a task's N / C chips form a flat
//    bx x by block (by = the largest divisor <= sqrt(N / C), bx = N / C / by), and
//    the tasks' blocks form a tx x ty grid the same way (ty = the largest
//    divisor of num_tasks <= sqrt(num_tasks)): mesh [tx*bx, ty*by, 1, C].
//    1 -> 1x1x1x1, 2 -> 1x1x1x2, 3 -> 3x1x1x1, 4 -> 2x1x1x2, 8 -> 2x2x1x2,
//    16 -> 4x2x1x2, 32 -> 4x4x1x2.
// Splitting the mesh among tasks (both cases), as real pods attach each host
// to a block of neighbouring chips: the host block is a (bx, by, bz) box of
// whole chips that tiles the mesh, the flattest (smallest bz), then the most
// square (smallest bx + by), then the widest in x; blocks are numbered x
// fastest, then y, then z; inside its block a task numbers its cores core
// fastest, then x, then y, then z. With one task on [2, 2, 1, 2] that gives
// TPU:0..7 at (0,0,0,0) (0,0,0,1) (1,0,0,0) (1,0,0,1) (0,1,0,0) ...
//
// Pure functions of their arguments; thread-safe.

#include <string_view>
#include <vector>

#include "strata/tpu/topology.h"

namespace strata::tpu::experimental {

// The environment variable holding the mesh shape.
inline constexpr std::string_view kTpuTopologyEnv = "STRATA_TPU_TOPOLOGY";

// Parses "XxYxZxC" into {X, Y, Z, C}. InvalidArgumentError quoting the value
// unless it is exactly four positive decimal integers joined by 'x'.
std::vector<int> parse_mesh_shape(std::string_view spec);

// The mesh shape Strata derives from num_local_devices per task (rule above).
// InvalidArgumentError if either count is < 1.
std::vector<int> default_mesh_shape(int num_local_devices, int num_tasks = 1);

// The local TPU system's topology: the mesh from `spec` (the value of
// STRATA_TPU_TOPOLOGY; empty = unset) or from the devices, split among
// num_tasks tasks. InvalidArgumentError for a malformed spec, a mesh whose
// cores do not split into num_tasks equal blocks of whole chips, and when a
// task has fewer local devices than the mesh needs (naming both numbers).
Topology local_topology(std::string_view spec, int num_local_devices, int num_tasks = 1);

// local_topology(getenv(STRATA_TPU_TOPOLOGY), number of local logical CPU
// devices, num_tasks). Initialises the runtime's devices if needed.
Topology local_topology_from_environment(int num_tasks = 1);

// Which local device of which task runs the core at `c`: the core's task, and
// the index of the task's logical CPU device ("CPU:<device_index>"), which is
// the core's TPU ordinal. InvalidArgumentError outside the mesh, NotFoundError
// where no device sits.
struct BackingDevice {
  int task = 0;
  int device_index = 0;
  bool operator==(const BackingDevice&) const = default;
};
BackingDevice backing_device_at_coordinates(const Topology& topology, const Coordinates& c);

}  // namespace strata::tpu::experimental
