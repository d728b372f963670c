// Strategy::gather, ReplicaContext::all_gather, and the gradients of
// all_reduce and all_gather under a GradientTape.
#include <gtest/gtest.h>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/testing/logical_devices.h"

namespace strata::distribute {
namespace {

class GatherTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(2); }
};

int replica_id() { return get_replica_context()->replica_id_in_sync_group(); }

// TensorFlow:
//   strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
//   v = strategy.experimental_distribute_values_from_function(
//       lambda ctx: tf.constant([[1.], [2.]]) + 10. * ctx.replica_id_in_sync_group)
//   strategy.gather(v, axis=0)   # [[1.], [2.], [11.], [12.]]
//   strategy.gather(v, axis=1)   # [[1., 11.], [2., 12.]]
TEST_F(GatherTest, StrategyGatherConcatenatesTheReplicasValuesAlongTheAxis) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  auto v = strategy.experimental_distribute_values_from_function([](const ValueContext& ctx) {
    return constant({1.f, 2.f}, {2, 1}) + 10.f * static_cast<float>(ctx.replica_id_in_sync_group());
  });
  Tensor rows = strategy.gather(v, /*axis=*/0);
  EXPECT_EQ(rows.shape(), (TensorShape{4, 1}));
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{1, 2, 11, 12}));
  Tensor cols = strategy.gather(v, /*axis=*/1);
  EXPECT_EQ(cols.shape(), (TensorShape{2, 2}));
  EXPECT_EQ(cols.to_vector<float>(), (std::vector<float>{1, 11, 2, 12}));
  // Unequal batches (the partial last batch): [0 1 2] and [3] gather to [0 1 2 3].
  PerReplica<Tensor> uneven({constant({0.f, 1.f, 2.f}), constant({3.f})});
  EXPECT_EQ(strategy.gather(uneven, 0).to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_THROW(strategy.gather(uneven, 1), InvalidArgumentError);
  PerReplica<Tensor> scalars({constant(1.f), constant(2.f)});
  EXPECT_THROW(strategy.gather(scalars, 0), InvalidArgumentError);
  // A plain tensor: itself with one replica, an error with two (TF's ValueError).
  EXPECT_EQ(default_strategy().gather(constant({5.f}), 0).to_vector<float>(),
            (std::vector<float>{5}));
  EXPECT_THROW(strategy.gather(constant({5.f}), 0), InvalidArgumentError);
  EXPECT_THROW(strategy.run([&] { strategy.gather(v, 0); }), FailedPreconditionError);
}

// TensorFlow:
//   def step_fn():
//     ctx = tf.distribute.get_replica_context()
//     x = tf.constant([1., 2.]) if ctx.replica_id_in_sync_group == 0 else tf.constant([3.])
//     return ctx.all_gather(x, axis=0)
//   strategy.run(step_fn)   # PerReplica:{0: [1. 2. 3.], 1: [1. 2. 3.]}
TEST_F(GatherTest, AllGatherGivesEveryReplicaTheConcatenationOnItsDevice) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  auto r = strategy.run([] {
    ReplicaContext& ctx = *get_replica_context();
    const Tensor x = replica_id() == 0 ? constant({1.f, 2.f}) : constant({3.f});
    return ctx.all_gather(x, /*axis=*/0);
  });
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r.values()[i].to_vector<float>(), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(r.values()[i].placement().index(), i);
  }
  // ReplicaContext.devices: the replica's own device.
  auto devices = strategy.run([] { return get_replica_context()->devices(); });
  EXPECT_EQ(devices.values()[1],
            (std::vector<std::string>{"/job:localhost/replica:0/task:0/device:CPU:1"}));
  EXPECT_THROW(strategy.run([] { get_replica_context()->all_gather(constant(1.f), 0); }),
               InvalidArgumentError);
}

// TensorFlow (replica r: x_r = r + 1, c_r = r + 1):
//   with tf.GradientTape() as tape:
//     tape.watch(x)
//     y = ctx.all_reduce("SUM", x * x)          # 1 + 4 = 5 on both replicas
//     loss = c * y
//   tape.gradient(loss, x)
// The gradient of the all-reduce is the all-reduce of the upstream gradients c_0 + c_1 = 3,
// so dx_r = 3 * 2 x_r: 6 and 12 (the derivative of the sum of the losses, 3 (x_0^2 + x_1^2)).
// With MEAN, y = 2.5 and dx_r = mean(c) * 2 x_r = 1.5 * 2 x_r: 3 and 6.
TEST_F(GatherTest, AllReduceIsDifferentiableWithTheAllReduceAsItsGradient) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  for (const auto& [op, y_expected, g0, g1] :
       {std::tuple{"SUM", 5.f, 6.f, 12.f}, std::tuple{"MEAN", 2.5f, 3.f, 6.f}}) {
    auto [y, dx] = strategy.run([op = std::string(op)] {
      const float r = static_cast<float>(replica_id());
      const Tensor x = constant(r + 1.f);
      const Tensor c = constant(r + 1.f);
      GradientTape tape;
      tape.watch(x);
      const Tensor reduced = get_replica_context()->all_reduce(op, x * x);
      const Tensor loss = c * reduced;
      return std::pair{reduced, tape.gradient(loss, x)};
    });
    EXPECT_EQ(y.values()[0].item<float>(), y_expected) << op;
    EXPECT_EQ(dx.values()[0].item<float>(), g0) << op;
    EXPECT_EQ(dx.values()[1].item<float>(), g1) << op;
  }
}

// TensorFlow (replica 0: x = [1., 2.], w = [1., 1., 1.]; replica 1: x = [3.], w = [10., 20., 30.]):
//   with tf.GradientTape() as tape:
//     tape.watch(x)
//     y = ctx.all_gather(x, axis=0)             # [1. 2. 3.]
//     loss = tf.reduce_sum(w * y)
//   tape.gradient(loss, x)
// The all-reduced upstream gradient is w_0 + w_1 = [11, 21, 31]; replica 0 takes rows [0, 2)
// = [11, 21], replica 1 row [2, 3) = [31].
TEST_F(GatherTest, AllGatherIsDifferentiableWithTheSlicedAllReduceAsItsGradient) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  auto dx = strategy.run([] {
    const bool first = replica_id() == 0;
    const Tensor x = first ? constant({1.f, 2.f}) : constant({3.f});
    const Tensor w = first ? constant({1.f, 1.f, 1.f}) : constant({10.f, 20.f, 30.f});
    GradientTape tape;
    tape.watch(x);
    const Tensor y = get_replica_context()->all_gather(x, 0);
    const Tensor loss = reduce_sum(w * y);
    return tape.gradient(loss, x);
  });
  EXPECT_EQ(dx.values()[0].to_vector<float>(), (std::vector<float>{11, 21}));
  EXPECT_EQ(dx.values()[1].to_vector<float>(), (std::vector<float>{31}));
  // One replica: the gradient of all_gather and all_reduce is the upstream gradient itself.
  OneDeviceStrategy one("CPU:0");
  Tensor g = one.run([] {
    const Tensor x = constant({1.f, 2.f});
    GradientTape tape;
    tape.watch(x);
    const Tensor y =
        get_replica_context()->all_gather(get_replica_context()->all_reduce(ReduceOp::SUM, x), 0);
    return tape.gradient(reduce_sum(y * constant({3.f, 4.f})), x);
  });
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{3, 4}));
}

}  // namespace
}  // namespace strata::distribute
