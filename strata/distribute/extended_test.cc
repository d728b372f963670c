// StrategyExtended: update, reduce_to, batch_reduce_to, colocate_vars_with,
// variable_created_in_scope, value_container, experimental_require_static_shapes;
// ReplicaContext::devices is in gather_test.cc.
#include <gtest/gtest.h>

#include <cstdlib>

#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/distribute/tpu_strategy.h"
#include "strata/distribute/tpu_system.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/testing/logical_devices.h"

namespace strata::distribute {
namespace {

class ExtendedTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(2); }
};

const std::string kCpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";
const std::string kCpu1 = "/job:localhost/replica:0/task:0/device:CPU:1";

// TensorFlow:
//   with strategy.scope():
//     v = tf.Variable(5.)
//   strategy.extended.update(v, lambda var, x: var.assign_add(x), args=(1.,))
//   strategy.experimental_local_results(v)     # (6., 6.): both copies updated
//   strategy.extended.update(v, lambda var, x: var.assign_add(x),
//                            args=(per_replica_10_20,))   # 16., 26.: each copy its component
TEST_F(ExtendedTest, UpdateRunsTheFunctionOnEveryComponentUnderItsDevice) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  Variable v;
  {
    auto scope = strategy.scope();
    v = Variable(constant(5.f));
  }
  auto devices = strategy.extended().update(
      v,
      [](const Variable& var, const Tensor& x) {
        var.assign_add(x);
        return current_device().name();
      },
      constant(1.f));
  EXPECT_EQ(devices.values(), (std::vector<std::string>{kCpu0, kCpu1}));
  const std::vector<Variable> copies = distributed_components(v);
  EXPECT_EQ(copies[0].value().item<float>(), 6.f);
  EXPECT_EQ(copies[1].value().item<float>(), 6.f);
  PerReplica<Tensor> x({constant(10.f), constant(20.f)});
  strategy.extended().update(
      v, [](const Variable& var, const Tensor& d) { var.assign_add(d); }, x);
  EXPECT_EQ(copies[0].value().item<float>(), 16.f);
  EXPECT_EQ(copies[1].value().item<float>(), 26.f);
  // A plain variable has one component: the result reads as the plain value.
  Variable plain(constant(1.f));
  const float before = default_strategy().extended().update(
      plain, [](const Variable& var) { return var.value().item<float>(); });
  EXPECT_EQ(before, 1.f);
  EXPECT_THROW(strategy.run([&] { strategy.extended().update(v, [](const Variable&) {}); }),
               FailedPreconditionError);
  OneDeviceStrategy other("CPU:0");
  EXPECT_THROW(other.extended().update(v, [](const Variable&) {}), InvalidArgumentError);
}

// TensorFlow:
//   r = strategy.run(lambda: tf.constant(1.) + tf.cast(replica_id, tf.float32))   # 1., 2.
//   strategy.extended.reduce_to(tf.distribute.ReduceOp.SUM, r, destinations=v)
//       # Mirrored:{0: 3., 1: 3.} on v's two devices
//   strategy.extended.reduce_to("MEAN", r, "CPU:1")   # 1.5 on CPU:1
//   strategy.extended.batch_reduce_to(SUM, [(r, v), (r, "CPU:0")])   # [Mirrored 3., 3.]
TEST_F(ExtendedTest, ReduceToReducesAcrossReplicasOntoTheDestinations) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  Variable v;
  {
    auto scope = strategy.scope();
    v = Variable(constant(0.f));
  }
  auto r = strategy.run([] {
    return constant(1.f + static_cast<float>(get_replica_context()->replica_id_in_sync_group()));
  });
  Mirrored<Tensor> total = strategy.extended().reduce_to(ReduceOp::SUM, r, v);
  ASSERT_EQ(total.num_components(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(total.values()[i].item<float>(), 3.f);
    EXPECT_EQ(total.values()[i].placement().index(), i);
  }
  const Tensor mean = strategy.extended().reduce_to(ReduceOp::MEAN, r, "CPU:1");
  EXPECT_EQ(mean.item<float>(), 1.5f);
  EXPECT_EQ(mean.placement().index(), 1);
  // A Mirrored value: MEAN is the value itself, SUM adds its identical copies.
  Mirrored<Tensor> m({constant(4.f), constant(4.f)});
  EXPECT_EQ(static_cast<const Tensor&>(strategy.extended().reduce_to(ReduceOp::MEAN, m, "CPU:0"))
                .item<float>(),
            4.f);
  EXPECT_EQ(static_cast<const Tensor&>(strategy.extended().reduce_to(ReduceOp::SUM, m, "CPU:0"))
                .item<float>(),
            8.f);
  auto batch = strategy.extended().batch_reduce_to(ReduceOp::SUM, {{r, v}, {r, "CPU:0"}});
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].num_components(), 2);
  EXPECT_EQ(batch[1].num_components(), 1);
  EXPECT_EQ(batch[1].values()[0].item<float>(), 3.f);
  EXPECT_THROW(strategy.extended().reduce_to(ReduceOp::SUM, r, "CPU:7"), NotFoundError);
}

// TensorFlow:
//   with strategy.scope():
//     v = tf.Variable(1.)
//     with strategy.extended.colocate_vars_with(v):
//       w = tf.Variable(2.)            # on v's devices
//   strategy.extended.variable_created_in_scope(v)     # True
//   strategy.extended.variable_created_in_scope(outside)   # False
//   strategy.extended.colocate_vars_with(outside)      # ValueError
TEST_F(ExtendedTest, ColocateVarsWithAndVariableCreatedInScope) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  Variable outside(constant(0.f));
  Variable v, w;
  {
    auto scope = strategy.scope();
    v = Variable(constant(1.f));
    {
      auto colocated = strategy.extended().colocate_vars_with(v);
      w = Variable(constant(2.f));
    }
    EXPECT_THROW({ auto bad = strategy.extended().colocate_vars_with(outside); },
                 InvalidArgumentError);
  }
  std::vector<std::string> v_devices, w_devices;
  for (const Variable& c : distributed_components(v)) v_devices.push_back(c.device());
  for (const Variable& c : distributed_components(w)) w_devices.push_back(c.device());
  EXPECT_EQ(w_devices, v_devices);
  EXPECT_TRUE(strategy.extended().variable_created_in_scope(v));
  EXPECT_FALSE(strategy.extended().variable_created_in_scope(outside));
  EXPECT_TRUE(default_strategy().extended().variable_created_in_scope(outside));
  EXPECT_FALSE(default_strategy().extended().variable_created_in_scope(v));
  // A one-device strategy's variables are plain variables, remembered all the same.
  OneDeviceStrategy one("CPU:1");
  Variable p;
  {
    auto scope = one.scope();
    p = Variable(constant(3.f));
  }
  EXPECT_TRUE(one.extended().variable_created_in_scope(p));
  EXPECT_FALSE(strategy.extended().variable_created_in_scope(p));
  EXPECT_FALSE(default_strategy().extended().variable_created_in_scope(p));
  EXPECT_FALSE(one.extended().variable_created_in_scope(outside));
}

// TensorFlow:
//   mirrored_var.values[1]                                   # a component
//   strategy.extended.value_container(mirrored_var.values[1]) is mirrored_var   # True
//   strategy.extended.value_container(plain) is plain        # True
TEST_F(ExtendedTest, ValueContainerOfAComponentIsItsDistributedVariable) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  Variable v;
  {
    auto scope = strategy.scope();
    v = Variable(constant(1.f));
  }
  const Variable component = distributed_components(v)[1];
  EXPECT_TRUE(strategy.extended().value_container(component).is_same(v));
  EXPECT_TRUE(strategy.extended().value_container(v).is_same(v));
  Variable plain(constant(2.f));
  EXPECT_TRUE(strategy.extended().value_container(plain).is_same(plain));
}

// TensorFlow: strategy.extended.experimental_require_static_shapes   # True only for TPUStrategy
TEST_F(ExtendedTest, OnlyTPUStrategyRequiresStaticShapes) {
  // The local TPU system of eight logical CPU devices (tpu_strategy_test.cc).
  ::unsetenv("STRATA_TPU_TOPOLOGY");
  strata::testing::use_logical_cpus(8);
  MirroredStrategy mirrored({"CPU:0", "CPU:1"});
  EXPECT_FALSE(mirrored.extended().experimental_require_static_shapes());
  EXPECT_FALSE(default_strategy().extended().experimental_require_static_shapes());
  strata::tpu::experimental::initialize_tpu_system();
  {
    TPUStrategy tpu;
    EXPECT_TRUE(tpu.extended().experimental_require_static_shapes());
  }
  strata::tpu::experimental::shutdown_tpu_system();
}

}  // namespace
}  // namespace strata::distribute
