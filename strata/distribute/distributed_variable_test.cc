#include "strata/distribute/distributed_variable.h"

#include <gtest/gtest.h>

#include <atomic>
#include <sstream>

#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/core/tensor.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/operators.h"
#include "strata/ops/random_ops.h"
#include "strata/testing/logical_devices.h"

namespace strata::distribute {
namespace {

class DistributedVariableTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(4); }
};

std::vector<float> component_values(const Variable& v) {
  std::vector<float> out;
  for (const Variable& c : distributed_components(v)) out.push_back(c.value().item<float>());
  return out;
}

Variable make_in_scope(Strategy& strategy, const Tensor& init, VariableOptions options = {}) {
  auto scope = strategy.scope();
  return Variable(init, std::move(options));
}

Tensor replica_id_as_float() {
  return constant(static_cast<float>(get_replica_context()->replica_id_in_sync_group()));
}

// TensorFlow:
//   with strategy.scope():
//     v = tf.Variable(1.)
//   strategy.experimental_local_results(v)
//   # (<tf.Variable 'Variable:0' ... numpy=1.0>, <tf.Variable 'Variable/replica_1:0' ...
//   numpy=1.0>)
TEST_F(DistributedVariableTest, LocalResultsOfAMirroredVariableAreItsPerReplicaCopies) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  Variable v = make_in_scope(strategy, constant(1.f), {.name = "v"});
  const std::vector<Variable> copies = strategy.experimental_local_results(v);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].name(), "v");
  EXPECT_EQ(copies[1].name(), "v/replica_1");
  EXPECT_EQ(copies[0].device(), find_device("CPU:0").name());
  EXPECT_EQ(copies[1].device(), find_device("CPU:1").name());
  EXPECT_FALSE(is_distributed_variable(copies[1]));
  // Writing one copy shows in that replica's reads only.
  copies[1].assign(constant(5.f));
  auto reads = strategy.run([&] { return v.value(); });
  EXPECT_EQ(reads.values()[0].item<float>(), 1.f);
  EXPECT_EQ(reads.values()[1].item<float>(), 5.f);
  // A plain variable is its own only local result.
  Variable plain(constant(2.f));
  const std::vector<Variable> one = strategy.experimental_local_results(plain);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0].is_same(plain));
}

TEST_F(DistributedVariableTest, SeedPageReprInsideAndOutsideTheScope) {
  MirroredStrategy strategy({"CPU:0"});
  Variable mirrored = make_in_scope(strategy, constant(1.f));
  EXPECT_TRUE(is_mirrored_variable(mirrored));
  std::ostringstream os;
  os << mirrored;
  EXPECT_EQ(
      os.str(),
      "MirroredVariable:{\n  0: <tf.Variable 'Variable:0' shape=() dtype=float32, numpy=1.0>\n}");
  Variable regular(constant(1.f));
  EXPECT_FALSE(is_distributed_variable(regular));
  EXPECT_EQ(regular.to_string(), "<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=1.0>");
}

TEST_F(DistributedVariableTest, ComponentsLiveOnEachDeviceAndStartFromReplicaZero) {
  MirroredStrategy strategy({"CPU:0", "CPU:1", "CPU:2"});
  // A random initial value: every copy must equal replica 0's.
  Variable v = make_in_scope(strategy, random::uniform({4}, {.seed = 3}), {.name = "w"});
  const std::vector<Variable> parts = distributed_components(v);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].name(), "w");
  EXPECT_EQ(parts[2].name(), "w/replica_2");
  EXPECT_EQ(v.name(), "w");
  EXPECT_EQ(v.synchronization(), VariableSynchronization::ON_WRITE);
  EXPECT_TRUE(v.trainable());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(parts[i].device(), strategy.local_device(i).name());
    EXPECT_EQ(parts[i].value().to_vector<float>(), parts[0].value().to_vector<float>());
  }
  // Each replica reads its own component.
  PerReplica<std::string> devices = strategy.run([&] { return std::string(v.device()); });
  EXPECT_EQ(devices.values()[1], strategy.local_device(1).name());
}

TEST_F(DistributedVariableTest, MirroredReplicaUpdatesFollowTheAggregation) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  Variable none = make_in_scope(strategy, constant(0.f), {.name = "none"});
  Variable sum = make_in_scope(strategy, constant(0.f), {.aggregation = VariableAggregation::SUM});
  Variable mean =
      make_in_scope(strategy, constant(0.f), {.aggregation = VariableAggregation::MEAN});
  Variable first = make_in_scope(strategy, constant(0.f),
                                 {.aggregation = VariableAggregation::ONLY_FIRST_REPLICA});
  strategy.run([&] {
    const Tensor id_plus_one = replica_id_as_float() + 1.f;  // 1 on replica 0, 2 on replica 1
    none.assign_add(id_plus_one);                            // local only: copies diverge
    sum.assign_add(id_plus_one);                             // 1 + 2 = 3 added to both
    mean.assign_add(id_plus_one);                            // 1.5 added to both
    first.assign(id_plus_one + 9.f);                         // replica 0's value: 10
  });
  EXPECT_EQ(component_values(none), (std::vector<float>{1, 2}));
  EXPECT_EQ(component_values(sum), (std::vector<float>{3, 3}));
  EXPECT_EQ(component_values(mean), (std::vector<float>{1.5f, 1.5f}));
  EXPECT_EQ(component_values(first), (std::vector<float>{10, 10}));
  // In cross-replica context the value goes to every copy.
  {
    auto scope = strategy.scope();
    none.assign(constant(7.f));
  }
  EXPECT_EQ(component_values(none), (std::vector<float>{7, 7}));
  EXPECT_EQ(none.value().item<float>(), 7.f);
}

TEST_F(DistributedVariableTest, MirroredUpdateInPlaceWritesLikeAssign) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  Variable none = make_in_scope(strategy, constant(1.f), {.name = "none"});
  Variable first = make_in_scope(strategy, constant(1.f),
                                 {.aggregation = VariableAggregation::ONLY_FIRST_REPLICA});
  strategy.run([&] {
    const float add = static_cast<float>(get_replica_context()->replica_id_in_sync_group()) + 1;
    // NONE: each replica rewrites its own copy in place.
    none.update_in_place([&](void* data) { *static_cast<float*>(data) += add; });
    // Other aggregations: the rewritten value goes through assign (replica 0's wins).
    first.update_in_place([&](void* data) { *static_cast<float*>(data) += 10 * add; });
  });
  EXPECT_EQ(component_values(none), (std::vector<float>{2, 3}));
  EXPECT_EQ(component_values(first), (std::vector<float>{11, 11}));
  // Cross-replica context: every copy gets the value rewritten from the one read.
  {
    auto scope = strategy.scope();
    none.update_in_place([](void* data) { *static_cast<float*>(data) *= 4; });
  }
  EXPECT_EQ(component_values(none), (std::vector<float>{8, 8}));
}

TEST_F(DistributedVariableTest, IdenticalValueFromEveryReplica) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  Variable sum = make_in_scope(strategy, constant(0.f), {.aggregation = VariableAggregation::SUM});
  Variable mean =
      make_in_scope(strategy, constant(0.f), {.aggregation = VariableAggregation::MEAN});
  const Tensor captured = constant(4.f);
  strategy.run([&] { mean.assign_add(captured); });
  EXPECT_EQ(component_values(mean), (std::vector<float>{4, 4}));
  try {
    strategy.run([&] { sum.assign_add(captured); });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be reduced"), std::string::npos) << e.what();
  }
  EXPECT_EQ(component_values(sum), (std::vector<float>{0, 0}));
}

TEST_F(DistributedVariableTest, SyncOnReadAggregatesOnCrossReplicaRead) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  const VariableOptions on_read_sum{.synchronization = VariableSynchronization::ON_READ,
                                    .aggregation = VariableAggregation::SUM};
  Variable total = make_in_scope(strategy, constant(0.f), on_read_sum);
  EXPECT_TRUE(is_sync_on_read_variable(total));
  EXPECT_FALSE(total.trainable());  // ON_READ variables are not trainable by default
  PerReplica<float> local = strategy.run([&] {
    total.assign_add(replica_id_as_float() + 1.f);
    return total.value().item<float>();  // replica context: the local copy
  });
  EXPECT_EQ(local.values(), (std::vector<float>{1, 2}));
  EXPECT_EQ(total.value().item<float>(), 3.f);
  {
    auto scope = strategy.scope();
    total.assign(constant(8.f));  // SUM: 8 / 2 in each copy
    EXPECT_EQ(component_values(total), (std::vector<float>{4, 4}));
    EXPECT_EQ(total.value().item<float>(), 8.f);
    EXPECT_THROW(total.assign_add(constant(1.f)), InvalidArgumentError);
  }
  Variable mean = make_in_scope(strategy, constant(2.f),
                                {.synchronization = VariableSynchronization::ON_READ,
                                 .aggregation = VariableAggregation::MEAN});
  strategy.run([&] { mean.assign_add(replica_id_as_float()); });  // copies 2 and 3
  EXPECT_FLOAT_EQ(mean.value().item<float>(), 2.5f);
  Variable first = make_in_scope(strategy, constant(5.f),
                                 {.synchronization = VariableSynchronization::ON_READ,
                                  .aggregation = VariableAggregation::ONLY_FIRST_REPLICA});
  strategy.run([&] { first.assign(replica_id_as_float()); });
  EXPECT_EQ(first.value().item<float>(), 0.f);
  Variable none =
      make_in_scope(strategy, constant(5.f), {.synchronization = VariableSynchronization::ON_READ});
  EXPECT_THROW(none.value(), InvalidArgumentError);
}

TEST_F(DistributedVariableTest, InvalidCombinationsAreRejected) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  try {
    make_in_scope(strategy, constant(1.f),
                  {.name = "v", .synchronization = VariableSynchronization::NONE});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("`NONE` variable synchronization"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(": v"), std::string::npos);
  }
  EXPECT_THROW(
      make_in_scope(strategy, constant(int64_t{1}), {.aggregation = VariableAggregation::MEAN}),
      InvalidArgumentError);
  // MEAN update of an integer variable in replica context.
  Variable counter =
      make_in_scope(strategy, constant(int64_t{0}), {.aggregation = VariableAggregation::SUM});
  strategy.run([&] { counter.assign_add(constant(int64_t{1}) + constant(int64_t{0})); });
  EXPECT_EQ(counter.value().item<int64_t>(), 2);
  // Using a variable under another strategy's scope.
  OneDeviceStrategy other("CPU:3");
  auto scope = other.scope();
  EXPECT_THROW(counter.value(), FailedPreconditionError);
}

TEST_F(DistributedVariableTest, VariableCreatedInsideRunIsCreatedOnce) {
  MirroredStrategy strategy({"CPU:0", "CPU:1", "CPU:2"});
  PerReplica<Variable> made = strategy.run([&] {
    return Variable(random::uniform({2}), {.name = "lazy"});  // different draws per replica
  });
  const std::vector<Variable>& handles = made.values();
  EXPECT_TRUE(is_mirrored_variable(handles[0]));
  EXPECT_TRUE(handles[0].is_same(handles[1]) && handles[0].is_same(handles[2]));
  const std::vector<Variable> parts = distributed_components(handles[0]);
  EXPECT_EQ(parts[1].value().to_vector<float>(), parts[0].value().to_vector<float>());
  EXPECT_EQ(parts[2].value().to_vector<float>(), parts[0].value().to_vector<float>());
}

TEST_F(DistributedVariableTest, OneDeviceAndDefaultStrategiesMakePlainVariables) {
  OneDeviceStrategy one("CPU:2");
  Variable v = make_in_scope(one, constant(1.f));
  EXPECT_FALSE(is_distributed_variable(v));
  EXPECT_EQ(v.device(), find_device("CPU:2").name());
  EXPECT_EQ(distributed_components(v).size(), 1u);
}

TEST_F(DistributedVariableTest, AllReduceSumsAndAveragesLists) {
  MirroredStrategy strategy({"CPU:0", "CPU:1", "CPU:2"});
  PerReplica<std::vector<Tensor>> r = strategy.run([] {
    ReplicaContext& ctx = *get_replica_context();
    const Tensor id = replica_id_as_float();
    return ctx.all_reduce(ReduceOp::SUM,
                          std::vector<Tensor>{id, constant({1.f, 2.f}) * (id + 1.f)});
  });
  for (const auto& values : r.values()) {
    EXPECT_EQ(values[0].item<float>(), 3.f);
    EXPECT_EQ(values[1].to_vector<float>(), (std::vector<float>{6, 12}));
  }
  PerReplica<Tensor> m = strategy.run(
      [] { return get_replica_context()->all_reduce(ReduceOp::MEAN, replica_id_as_float()); });
  for (const Tensor& t : m.values()) EXPECT_EQ(t.item<float>(), 1.f);
}

TEST_F(DistributedVariableTest, AFailedReplicaDoesNotHangTheOthersInAllReduce) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  try {
    strategy.run([] {
      ReplicaContext& ctx = *get_replica_context();
      if (ctx.replica_id_in_sync_group() == 1) throw InvalidArgumentError("boom in replica 1");
      ctx.all_reduce(ReduceOp::SUM, constant(1.f));
    });
    FAIL() << "expected the replica's error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("boom in replica 1"), std::string::npos) << e.what();
  }
  // The strategy is usable afterwards.
  PerReplica<Tensor> r =
      strategy.run([] { return get_replica_context()->all_reduce(ReduceOp::SUM, constant(2.f)); });
  EXPECT_EQ(r.values()[0].item<float>(), 4.f);
}

}  // namespace
}  // namespace strata::distribute

namespace strata::distribute {
namespace {

TEST_F(DistributedVariableTest, AllReduceInPacksGivesTheSameResult) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"}, CommunicationOptions{.bytes_per_pack = 12});
  PerReplica<std::vector<Tensor>> r = strategy.run([] {
    const Tensor id = replica_id_as_float() + 1.f;
    // 4-byte, 16-byte, 8-byte and 4-byte tensors: packs {a}, {b}, {c, d} under 12 bytes.
    return get_replica_context()->all_reduce(
        ReduceOp::MEAN, std::vector<Tensor>{id, constant({1.f, 2.f, 3.f, 4.f}) * id,
                                            constant({5.f, 6.f}) * id, cast(id, DType::float32)});
  });
  for (const auto& v : r.values()) {
    ASSERT_EQ(v.size(), 4u);
    EXPECT_EQ(v[0].item<float>(), 1.5f);
    EXPECT_EQ(v[1].to_vector<float>(), (std::vector<float>{1.5f, 3.f, 4.5f, 6.f}));
    EXPECT_EQ(v[2].to_vector<float>(), (std::vector<float>{7.5f, 9.f}));
    EXPECT_EQ(v[3].item<float>(), 1.5f);
  }
  EXPECT_THROW(MirroredStrategy({"CPU:0"}, CommunicationOptions{.bytes_per_pack = -1}),
               InvalidArgumentError);
  EXPECT_THROW(
      MirroredStrategy({"CPU:0"},
                       CommunicationOptions{.implementation = CommunicationImplementation::NCCL}),
      UnimplementedError);
}

TEST_F(DistributedVariableTest, MismatchedAllReducesFailOnEveryReplica) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  try {
    strategy.run([] {
      const int id = get_replica_context()->replica_id_in_sync_group();
      get_replica_context()->all_reduce(ReduceOp::SUM, zeros({id + 2}));
    });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mismatch"), std::string::npos) << e.what();
  }
}

TEST_F(DistributedVariableTest, ReplicasSeeTheReplicaCountInComputeAverageLoss) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  PerReplica<Tensor> r = strategy.run([] {
    // 2 local examples x 2 replicas: the global batch is 4.
    return nn::compute_average_loss(constant({1.f, 3.f}));
  });
  EXPECT_EQ(r.values()[0].item<float>(), 1.f);
}

}  // namespace
}  // namespace strata::distribute
