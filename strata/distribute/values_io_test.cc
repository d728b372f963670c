#include "strata/distribute/values_io.h"

#include <gtest/gtest.h>

#include <sstream>

#include "strata/core/tensor.h"

namespace strata::distribute {
namespace {

TEST(ValuesIoTest, PerReplicaAndMirroredPrintAsTensorFlow) {
  // print(strategy.run(lambda: tf.cast(tf.distribute.get_replica_context()
  //                                    .replica_id_in_sync_group, tf.float32) + 1.))
  // PerReplica:{
  //   0: tf.Tensor(1.0, shape=(), dtype=float32),
  //   1: tf.Tensor(2.0, shape=(), dtype=float32)
  // }
  PerReplica<Tensor> per_replica({constant(1.f), constant(2.f)});
  std::ostringstream out;
  out << per_replica;
  EXPECT_EQ(out.str(),
            "PerReplica:{\n"
            "  0: tf.Tensor(1.0, shape=(), dtype=float32),\n"
            "  1: tf.Tensor(2.0, shape=(), dtype=float32)\n"
            "}");
  // A component that is an array prints its NumPy lines inside, as TF's %s does.
  Mirrored<Tensor> mirrored({constant({0.1f + 0.2f, 1.f}, {2})});
  std::ostringstream m;
  m << mirrored;
  EXPECT_EQ(m.str(), "Mirrored:{\n  0: tf.Tensor([0.3 1. ], shape=(2,), dtype=float32)\n}");
}

}  // namespace
}  // namespace strata::distribute
