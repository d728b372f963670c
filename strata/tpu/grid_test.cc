#include "strata/tpu/grid.h"

#include <string>

#include <gtest/gtest.h>

#include "strata/tpu/local_topology.h"
#include "strata/tpu/tpu.h"  // the entry header compiles on its own

namespace strata::tpu::experimental {
namespace {

TEST(Grid, RendersTheSeedsFourReplicasOneBlockPerCorePlane) {
  auto da = DeviceAssignment::build(local_topology("", 8),
                                    {.computation_shape = {1, 1, 1, 2}, .num_replicas = 4});
  EXPECT_EQ(render_device_assignment(da),
            "mesh [2, 2, 1, 2]: 4 replicas x 2 logical cores\n"
            "z=0 core=0\n"
            "     x=0    x=1\n"
            "y=0  r0:c0  r1:c0\n"
            "y=1  r3:c0  r2:c0\n"
            "\n"
            "z=0 core=1\n"
            "     x=0    x=1\n"
            "y=0  r0:c1  r1:c1\n"
            "y=1  r3:c1  r2:c1\n");
}

TEST(Grid, MarksUnusedCoresWithADotAndMissingDevicesWithAnX) {
  // 2x1x2x1: chip (1, 0, 1) missing; one replica on (0, 0, 0).
  Topology t({2, 1, 2, 1}, {{{0, 0, 0, 0}, {1, 0, 0, 0}, {0, 0, 1, 0}}});
  auto da = DeviceAssignment(t, {{{0, 0, 0, 0}}});
  EXPECT_EQ(render_device_assignment(da),
            "mesh [2, 1, 2, 1]: 1 replica x 1 logical core\n"
            "z=0 core=0\n"
            "     x=0    x=1\n"
            "y=0  r0:c0  .\n"
            "\n"
            "z=1 core=0\n"
            "     x=0    x=1\n"
            "y=0  .      X\n");
}

TEST(Grid, RendersATopologyWithTaskAndOrdinalCells) {
  EXPECT_EQ(render_topology(local_topology("", 2, 2)),
            "mesh [2, 1, 1, 2]: 2 tasks x 2 TPU devices\n"
            "z=0 core=0\n"
            "     x=0    x=1\n"
            "y=0  t0:d0  t1:d0\n"
            "\n"
            "z=0 core=1\n"
            "     x=0    x=1\n"
            "y=0  t0:d1  t1:d1\n");
}

}  // namespace
}  // namespace strata::tpu::experimental
