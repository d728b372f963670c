#include "strata/distribute/strategy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>

#include "strata/base/denormal.h"
#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/core/tensor.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/testing/logical_devices.h"

namespace strata::distribute {
namespace {

// Four logical CPU devices for every test of this binary (each ctest case is
// its own process; the fixture resets the runtime for a full-binary run too).
class StrategyTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(4); }
};

TEST_F(StrategyTest, OutsideEveryScopeTheDefaultStrategyIsCurrent) {
  EXPECT_FALSE(has_strategy());
  EXPECT_FALSE(in_cross_replica_context());
  ASSERT_NE(get_replica_context(), nullptr);
  EXPECT_EQ(get_replica_context()->replica_id_in_sync_group(), 0);
  EXPECT_TRUE(get_strategy().is_default());
  EXPECT_EQ(get_strategy().num_replicas_in_sync(), 1);
  EXPECT_THROW(get_strategy().extended().worker_devices(), FailedPreconditionError);
}

TEST_F(StrategyTest, ScopeEntersCrossReplicaContextAndNestsForTheSameStrategy) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  {
    auto scope = strategy.scope();
    EXPECT_EQ(&get_strategy(), &strategy);
    EXPECT_TRUE(has_strategy());
    EXPECT_TRUE(in_cross_replica_context());
    EXPECT_EQ(get_replica_context(), nullptr);
    {
      auto again = strategy.scope();
      EXPECT_EQ(&get_strategy(), &strategy);
    }
    EXPECT_TRUE(in_cross_replica_context());
  }
  EXPECT_FALSE(has_strategy());
}

TEST_F(StrategyTest, MixingStrategiesScopesIsAnError) {
  MirroredStrategy a({"CPU:0", "CPU:1"});
  OneDeviceStrategy b("CPU:2");
  auto scope = a.scope();
  try {
    auto inner = b.scope();
    FAIL();
  } catch (const FailedPreconditionError& e) {
    EXPECT_NE(std::string(e.what()).find("Mixing different tf.distribute.Strategy objects"),
              std::string::npos);
  }
  EXPECT_THROW({ auto d = default_strategy().scope(); }, FailedPreconditionError);
  EXPECT_EQ(&get_strategy(), &a);
}

TEST_F(StrategyTest, RunExecutesOncePerReplicaOnLongLivedThreadsBoundToDevices) {
  MirroredStrategy strategy({"CPU:0", "CPU:1", "CPU:2"});
  auto first = strategy.run([] { return std::this_thread::get_id(); });
  auto second = strategy.run([] { return std::this_thread::get_id(); });
  std::set<std::thread::id> ids(first.values().begin(), first.values().end());
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);
  EXPECT_EQ(first.values(), second.values());  // the same threads every step

  auto devices = strategy.run([] { return current_device().index(); });
  EXPECT_EQ(devices.values(), (std::vector<int>{0, 1, 2}));
  auto [replica_ids, counts] = strategy.run([] {
    ReplicaContext* rc = get_replica_context();
    EXPECT_FALSE(in_cross_replica_context());
    return std::pair(rc->replica_id_in_sync_group(), rc->num_replicas_in_sync());
  });
  EXPECT_EQ(replica_ids.values(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(counts.values(), (std::vector<int>{3, 3, 3}));
}

// TensorFlow:
//   def step_fn(x):
//     return x * 2., x + 1.
//   loss, acc = strategy.run(step_fn, args=(per_replica_x,))   # 2 replicas, x = 1., 2.
//   loss  # PerReplica:{0: 2., 1: 4.}
//   acc   # PerReplica:{0: 2., 1: 3.}
TEST_F(StrategyTest, RunRegroupsAReturnedTupleIntoATupleOfPerReplica) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  PerReplica<Tensor> x({constant(1.f), constant(2.f)});
  auto step_fn = [](const Tensor& v) { return std::tuple{v * 2.f, v + 1.f}; };
  auto [loss, acc] = strategy.run(step_fn, x);
  static_assert(std::is_same_v<decltype(loss), PerReplica<Tensor>>);
  EXPECT_EQ(loss.values()[0].item<float>(), 2.f);
  EXPECT_EQ(loss.values()[1].item<float>(), 4.f);
  EXPECT_EQ(acc.values()[0].item<float>(), 2.f);
  EXPECT_EQ(acc.values()[1].item<float>(), 3.f);
  EXPECT_EQ(strategy.reduce(ReduceOp::SUM, loss, std::nullopt).item<float>(), 6.f);
  // Nested tuples regroup recursively, as TF's nest does: ((1, 2), 3) per replica.
  auto nested = strategy.run([] {
    const int id = get_replica_context()->replica_id_in_sync_group();
    return std::tuple{std::pair{id, 10 * id}, id + 100};
  });
  EXPECT_EQ(std::get<0>(nested).first.values(), (std::vector<int>{0, 1}));
  EXPECT_EQ(std::get<0>(nested).second.values(), (std::vector<int>{0, 10}));
  EXPECT_EQ(std::get<1>(nested).values(), (std::vector<int>{100, 101}));
}

// TensorFlow regroups a namedtuple (an attrs class) field by field:
//   StepResult = collections.namedtuple("StepResult", ["loss", "accuracy"])
//   def step_fn(x):
//     return StepResult(x * 2., x + 1.)
//   loss, accuracy = strategy.run(step_fn, args=(per_replica_x,))   # x = 1., 2.
//   loss      # PerReplica:{0: 2., 1: 4.}
//   accuracy  # PerReplica:{0: 2., 1: 3.}
struct StepResult {
  Tensor loss;
  Tensor accuracy;
};
struct NestedResult {
  StepResult step;
  int replica;
};
TEST_F(StrategyTest, RunRegroupsAReturnedStructIntoATupleOfPerReplicaFields) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  PerReplica<Tensor> x({constant(1.f), constant(2.f)});
  auto step_fn = [](const Tensor& v) { return StepResult{v * 2.f, v + 1.f}; };
  auto [loss, accuracy] = strategy.run(step_fn, x);
  static_assert(std::is_same_v<decltype(loss), PerReplica<Tensor>>);
  EXPECT_EQ(loss.values()[1].item<float>(), 4.f);
  EXPECT_EQ(accuracy.values()[0].item<float>(), 2.f);
  EXPECT_EQ(accuracy.values()[1].item<float>(), 3.f);
  // A struct holding a struct regroups recursively.
  auto [step, replica] = strategy.run(
      [&](const Tensor& v) {
        return NestedResult{{v, v * 3.f}, get_replica_context()->replica_id_in_sync_group()};
      },
      x);
  EXPECT_EQ(std::get<1>(step).values()[1].item<float>(), 6.f);
  EXPECT_EQ(replica.values(), (std::vector<int>{0, 1}));
  // Types that are not aggregates (Tensor, std::string, std::vector) stay whole.
  auto names = strategy.run([] { return std::string("replica"); });
  static_assert(std::is_same_v<decltype(names), PerReplica<std::string>>);
}

// TensorFlow (one replica: run returns plain values, not PerReplica):
//   strategy = tf.distribute.OneDeviceStrategy("CPU:0")
//   loss, acc = strategy.run(lambda: (tf.constant(3.), tf.constant(4.)))
//   loss  # <tf.Tensor: 3.0>
TEST_F(StrategyTest, RunWithOneReplicaGivesThePlainValue) {
  OneDeviceStrategy one("CPU:0");
  auto [loss, acc] = one.run([] { return std::tuple{constant(3.f), constant(4.f)}; });
  const Tensor plain_loss = loss;
  EXPECT_EQ(plain_loss.item<float>(), 3.f);
  EXPECT_EQ(static_cast<const Tensor&>(acc).item<float>(), 4.f);
  Tensor value = default_strategy().run([] { return constant(5.f); });
  EXPECT_EQ(value.item<float>(), 5.f);
  const int id = one.run([] { return get_replica_context()->replica_id_in_sync_group(); });
  EXPECT_EQ(id, 0);
  // With two replicas there is no single plain value.
  MirroredStrategy two({"CPU:0", "CPU:1"});
  auto r = two.run([] { return constant(1.f); });
  EXPECT_THROW({ [[maybe_unused]] const Tensor& t = r; }, InvalidArgumentError);
}

TEST_F(StrategyTest, RunUnwrapsPerReplicaArgumentsAndPassesOthersAsIs) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  PerReplica<int> x({10, 20});
  auto r = strategy.run([](int a, int b) { return a + b; }, x, 5);
  EXPECT_EQ(strategy.experimental_local_results(r), (std::vector<int>{15, 25}));
  std::atomic<int> calls{0};
  strategy.run([&] { calls++; });
  EXPECT_EQ(calls.load(), 2);
  auto t =
      strategy.run([](int v) { return v * 2; }, std::tuple{PerReplica<int>({1, 2})}, RunOptions{});
  EXPECT_EQ(t.values(), (std::vector<int>{2, 4}));
  EXPECT_EQ(strategy.experimental_local_results(7), (std::vector<int>{7}));
}

TEST_F(StrategyTest, FailureInOneReplicaIsRethrownNamingTheReplica) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  try {
    strategy.run([] {
      if (get_replica_context()->replica_id_in_sync_group() == 1) {
        throw InvalidArgumentError("bad batch shape [3]");
      }
    });
    FAIL();
  } catch (const InvalidArgumentError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("replica 1"), std::string::npos) << m;
    EXPECT_NE(m.find("device:CPU:1"), std::string::npos) << m;
    EXPECT_NE(m.find("bad batch shape [3]"), std::string::npos) << m;
  }
  // The root cause wins over errors it caused in other replicas.
  try {
    strategy.run([] {
      if (get_replica_context()->replica_id_in_sync_group() == 0) throw AbortedError("peer failed");
      throw DataLossError("corrupt record at 12");
    });
    FAIL();
  } catch (const DataLossError& e) {
    EXPECT_NE(std::string(e.what()).find("replica 1"), std::string::npos);
  }
  // The strategy still works afterwards.
  EXPECT_EQ(strategy.run([] { return 1; }).num_components(), 2);
}

TEST_F(StrategyTest, RunFromAReplicaContextRequiresCrossReplicaContext) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  EXPECT_THROW(strategy.run([&] { strategy.run([] {}); }), FailedPreconditionError);
}

TEST_F(StrategyTest, DefaultAndOneDeviceStrategiesRunOnTheCallingThread) {
  auto r = default_strategy().run([] { return std::this_thread::get_id(); });
  EXPECT_EQ(r.values()[0], std::this_thread::get_id());
  OneDeviceStrategy one("CPU:3");
  auto d = one.run([] { return current_device().index(); });
  EXPECT_EQ(d.values(), (std::vector<int>{3}));
  EXPECT_EQ(one.extended().worker_devices(),
            (std::vector<std::string>{"/job:localhost/replica:0/task:0/device:CPU:3"}));
}

// TensorFlow runs its kernels with denormals flushed to zero (its CPU thread
// pools and tsl::port::ScopedFlushDenormal around every kernel); Strata flushes
// on the replica threads and on the caller while run executes.
TEST_F(StrategyTest, RunFlushesDenormalsOnTheReplicasAndTheCallerAndRestoresTheCaller) {
  if (!denormal_flushing_supported()) GTEST_SKIP() << "no flush-to-zero control here";
  // 2^-126 * 0.5 = 2^-127, a denormal float unless flushed; volatile keeps the
  // compiler from folding it.
  auto halve_smallest_normal = [] {
    volatile float smallest = 0x1p-126f;
    volatile float half = 0.5f;
    return smallest * half;
  };
  ASSERT_EQ(get_denormal_state(), DenormalState{});  // the test's thread starts in IEEE mode
  EXPECT_EQ(halve_smallest_normal(), 0x1p-127f);
  MirroredStrategy mirrored({"CPU:0", "CPU:1"});
  auto on_replicas = mirrored.run(halve_smallest_normal);
  EXPECT_EQ(on_replicas.values(), (std::vector<float>{0.0f, 0.0f}));
  auto on_caller = default_strategy().run(halve_smallest_normal);  // runs on this thread
  EXPECT_EQ(on_caller.values(), (std::vector<float>{0.0f}));
  EXPECT_EQ(get_denormal_state(), DenormalState{});  // restored when run returned
  EXPECT_EQ(halve_smallest_normal(), 0x1p-127f);
}

TEST_F(StrategyTest, ValuesFromFunctionGivesEachReplicaItsContext) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  auto ids = strategy.experimental_distribute_values_from_function(
      [](const ValueContext& ctx) { return ctx.replica_id_in_sync_group(); });
  EXPECT_EQ(strategy.experimental_local_results(ids), (std::vector<int>{0, 1}));
  auto n = strategy.experimental_distribute_values_from_function(
      [](const ValueContext& ctx) { return ctx.num_replicas_in_sync(); });
  EXPECT_EQ(n.values(), (std::vector<int>{2, 2}));
  const std::vector<float> arr{3.f, 2.f, 1.f};
  auto picked = strategy.experimental_distribute_values_from_function(
      [&](const ValueContext& ctx) { return constant(arr[ctx.replica_id_in_sync_group()]); });
  EXPECT_EQ(picked.values()[0].item<float>(), 3.f);
  EXPECT_EQ(picked.values()[1].item<float>(), 2.f);
  EXPECT_EQ(picked.values()[1].placement().index(), 1);
  auto one = default_strategy().experimental_distribute_values_from_function(
      [](const ValueContext& ctx) { return ctx.num_replicas_in_sync(); });
  EXPECT_EQ(one.values(), (std::vector<int>{1}));
}

TEST_F(StrategyTest, InvalidDeviceListsAreRejected) {
  EXPECT_THROW(MirroredStrategy(std::vector<std::string>{}), InvalidArgumentError);
  EXPECT_THROW(MirroredStrategy({"CPU:0", "CPU:0"}), InvalidArgumentError);
  EXPECT_THROW(MirroredStrategy({"CPU:9"}), NotFoundError);
  MirroredStrategy all;
  EXPECT_EQ(all.num_replicas_in_sync(), 4);
}

TEST(ReduceOpTest, ParsesCaseInsensitively) {
  EXPECT_EQ(reduce_op_from_string("sum"), ReduceOp::SUM);
  EXPECT_EQ(reduce_op_from_string("Mean"), ReduceOp::MEAN);
  EXPECT_THROW(reduce_op_from_string("max"), InvalidArgumentError);
}

}  // namespace
}  // namespace strata::distribute

namespace strata::distribute {
namespace {

TEST_F(StrategyTest, MergeCallRunsOnceInCrossReplicaContextWithGatheredArguments) {
  MirroredStrategy strategy({"CPU:0", "CPU:1", "CPU:2"});
  std::atomic<int> merges{0};
  auto r = strategy.run([&] {
    ReplicaContext* ctx = get_replica_context();
    const int id = ctx->replica_id_in_sync_group();
    return ctx->merge_call(
        [&](Strategy& s, const PerReplica<int>& ids) {
          merges++;
          EXPECT_TRUE(in_cross_replica_context());
          EXPECT_EQ(&s, &strategy);
          int sum = 0;
          for (int v : ids.values()) sum += v;
          return sum;
        },
        id * 10);
  });
  EXPECT_EQ(merges.load(), 1);
  EXPECT_EQ(r.values(), (std::vector<int>{30, 30, 30}));
  // A PerReplica result gives each replica its own component.
  auto own = strategy.run([] {
    return get_replica_context()->merge_call(
        [](Strategy&, const PerReplica<int>& v) {
          std::vector<int> doubled;
          for (int x : v.values()) doubled.push_back(2 * x);
          return PerReplica<int>(doubled);
        },
        get_replica_context()->replica_id_in_sync_group());
  });
  EXPECT_EQ(own.values(), (std::vector<int>{0, 2, 4}));
}

TEST_F(StrategyTest, DifferentMergeCallCountsRaiseInsteadOfHanging) {
  MirroredStrategy strategy({"CPU:0", "CPU:1"});
  try {
    strategy.run([] {
      ReplicaContext* ctx = get_replica_context();
      if (ctx->replica_id_in_sync_group() == 0) ctx->merge_call([](Strategy&) {});
    });
    FAIL();
  } catch (const FailedPreconditionError& e) {
    EXPECT_NE(std::string(e.what()).find("different number of replica_context().merge_call()"),
              std::string::npos)
        << e.what();
  }
  // A failure in another replica wakes a replica waiting in merge_call.
  EXPECT_THROW(strategy.run([] {
    ReplicaContext* ctx = get_replica_context();
    if (ctx->replica_id_in_sync_group() == 1) throw UnavailableError("input worker gone");
    ctx->merge_call([](Strategy&) {});
  }),
               UnavailableError);
  // Default strategy: merge_call runs directly.
  auto one = default_strategy().run([] {
    return get_replica_context()->merge_call(
        [](Strategy&, const PerReplica<int>& v) { return v.values()[0] + 1; }, 41);
  });
  EXPECT_EQ(one.values(), (std::vector<int>{42}));
}

}  // namespace
}  // namespace strata::distribute
