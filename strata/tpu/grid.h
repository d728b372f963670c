#pragma once
// Text grids of a mesh, for `strata topology` and for reading tests.
//
//   namespace tpu = strata::tpu::experimental;
//   auto da = tpu::DeviceAssignment::build(tpu::local_topology("", 8),
//                                          {.computation_shape = {1, 1, 1, 2}, .num_replicas = 4});
//   std::cout << tpu::render_device_assignment(da);
//
// prints one block per (z, core) plane, z slowest, each a table with a column
// per x and a row per y:
//
//   mesh [2, 2, 1, 2]: 4 replicas x 2 logical cores
//   z=0 core=0
//          x=0    x=1
//   y=0    r0:c0  r1:c0
//   y=1    r3:c0  r2:c0
//
//   z=0 core=1
//          x=0    x=1
//   y=0    r0:c1  r1:c1
//   y=1    r3:c1  r2:c1
//
// A cell is "r<replica>:c<logical core>" for an assigned core, "." for a core
// no replica uses, "X" where the slice has no device. render_topology prints
// the same layout with "t<task>:d<TPU ordinal>" cells. Columns are left-aligned
// and padded to the widest cell plus two spaces; blocks are separated by an
// empty line; the text ends with a newline.

#include <string>

#include "strata/tpu/device_assignment.h"
#include "strata/tpu/topology.h"

namespace strata::tpu::experimental {

std::string render_device_assignment(const DeviceAssignment& assignment);
std::string render_topology(const Topology& topology);

}  // namespace strata::tpu::experimental
