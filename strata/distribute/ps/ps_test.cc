// ParameterServerStrategy + ClusterCoordinator over gRPC on loopback: every
// ps and worker task is a real strata::distribute::Server (its own gRPC server
// on its own 127.0.0.1 port) running on this process's threads; the test
// thread is the chief. Killing a task is Server::stop(): its port closes and
// its in-flight calls are cancelled, as a dead process's would be. The
// process-level version (SIGKILL) is examples/parameter_server_training.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/cluster/cluster_resolver.h"
#include "strata/cluster/cluster_spec.h"
#include "strata/core/tensor.h"
#include "strata/core/variable.h"
#include "strata/data/dataset.h"
#include "strata/distribute/input_context.h"
#include "strata/distribute/partitioners.h"
#include "strata/distribute/ps/cluster_coordinator.h"
#include "strata/distribute/ps/function_registry.h"
#include "strata/distribute/ps/internal/rpc.h"
#include "strata/distribute/ps/local_cluster.h"
#include "strata/distribute/ps/parameter_server_strategy.h"
#include "strata/distribute/ps/ps_variable.h"
#include "strata/distribute/ps/server.h"
#include "strata/distribute/sharded_variable.h"
#include "strata/distribute/strategy.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/ops/random_ops.h"

// gRPC, protobuf and abseil come from Debian uninstrumented: their locks and
// completion-queue hand-offs are invisible to ThreadSanitizer, so a buffer
// they pass between their threads would be reported as a race. Under TSan the
// interceptors ignore calls from uninstrumented modules (TSAN_OPTIONS still
// adds to or overrides this).
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_options() { return "ignore_noninstrumented_modules=1"; }
#endif

namespace sd = strata::distribute;
namespace cr = strata::distribute::cluster_resolver;
namespace sps = strata::distribute::ps;
using strata::Tensor;
using strata::Variable;
using namespace std::chrono_literals;

namespace {

constexpr int64_t kExamples = 256;
constexpr int64_t kBatch = 32;

// y = x . [1, -2, 0.5] + 0.3 exactly: a linear model can reach loss 0.
strata::data::Dataset linear_data(const sd::InputContext& ctx) {
  Tensor x = strata::random::uniform({kExamples, 3}, {.minval = -1, .maxval = 1, .seed = 7});
  Tensor w = strata::constant(std::vector<float>{1.f, -2.f, 0.5f}, {3, 1});
  Tensor y = strata::matmul(x, w) + strata::constant(0.3f);
  return strata::data::Dataset::from_tensor_slices({x, y})
      .shard(ctx.num_input_pipelines(), ctx.input_pipeline_id())
      .repeat()
      .batch(kBatch);
}
STRATA_REGISTER_DATASET_FUNCTION(linear_data, linear_data);

// One SGD step: reads w and b from their ps, applies the update there.
std::vector<Tensor> linear_step(const sps::FunctionArgs& args) {
  const Variable& w = args.variable(0);
  const Variable& b = args.variable(1);
  strata::data::Element batch = args.iterator(2).get_next();
  const Tensor& lr = args.tensor(3);
  strata::GradientTape tape;
  Tensor loss = strata::reduce_mean(
      strata::square(strata::matmul(batch[0], w.value()) + b.value() - batch[1]));
  std::vector<Tensor> g = tape.gradient(loss, std::vector<Variable>{w, b});
  w.assign_sub(g[0] * lr);
  b.assign_sub(g[1] * lr);
  return {loss};
}
STRATA_REGISTER_FUNCTION(linear_step, linear_step);

// The loss of (w, b) over the whole data set, on the worker.
std::vector<Tensor> linear_loss(const sps::FunctionArgs& args) {
  strata::data::Element all = linear_data(sd::InputContext())
                                  .take(kExamples / kBatch)
                                  .unbatch()
                                  .batch(kExamples)
                                  .iter()
                                  .get_next();
  return {strata::reduce_mean(strata::square(strata::matmul(all[0], args.variable(0).value()) +
                                             args.variable(1).value() - all[1]))};
}
STRATA_REGISTER_FUNCTION(linear_loss, linear_loss);

std::vector<Tensor> add_one(const sps::FunctionArgs& args) {
  args.variable(0).assign_add(strata::constant(1.f));
  return {strata::constant(static_cast<int64_t>(sps::current_worker_index()))};
}
STRATA_REGISTER_FUNCTION(add_one, add_one);

std::vector<Tensor> fail_invalid(const sps::FunctionArgs&) {
  throw strata::InvalidArgumentError("fail_invalid: bad step");
}
STRATA_REGISTER_FUNCTION(fail_invalid, fail_invalid);

std::vector<Tensor> sleep_20ms(const sps::FunctionArgs&) {
  std::this_thread::sleep_for(20ms);
  return {};
}
STRATA_REGISTER_FUNCTION(sleep_20ms, sleep_20ms);

// Reads its variable three times inside a read cache; returns the RPC count.
std::vector<Tensor> cached_reads(const sps::FunctionArgs& args) {
  sps::CacheVariableReads cache;
  Tensor sum = args.variable(0).value() + args.variable(0).value() + args.variable(0).value();
  return {sum, strata::constant(cache.remote_reads())};
}
STRATA_REGISTER_FUNCTION(cached_reads, cached_reads);

// Partitioned variables on a worker: the full tensor through the handle and
// the shard count through FunctionArgs::sharded_variable.
std::vector<Tensor> sharded_value(const sps::FunctionArgs& args) {
  return {args.variable(0).value(), strata::constant(args.sharded_variable(0).num_shards())};
}
STRATA_REGISTER_FUNCTION(sharded_value, sharded_value);

std::vector<Tensor> sharded_lookup(const sps::FunctionArgs& args) {
  return {sd::embedding_lookup(args.sharded_variable(0), args.tensor(1))};
}
STRATA_REGISTER_FUNCTION(sharded_lookup, sharded_lookup);

// One SGD step on loss = sum(lookup(ids) * 1): the gradient of every shard an
// id falls in is applied on that shard's ps; shards no id reads get none.
std::vector<Tensor> sharded_sgd_step(const sps::FunctionArgs& args) {
  const sd::ShardedVariable table = args.sharded_variable(0);
  strata::GradientTape tape;
  Tensor loss = strata::reduce_sum(sd::embedding_lookup(table, args.tensor(1)));
  std::vector<Tensor> g = tape.gradient(loss, table.variables());
  int64_t updated = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!g[i].defined()) continue;
    table.variables()[i].assign_sub(g[i] * args.tensor(2));
    ++updated;
  }
  return {loss, strata::constant(updated)};
}
STRATA_REGISTER_FUNCTION(sharded_sgd_step, sharded_sgd_step);

// Each worker's own input pipeline: its element and its index.
strata::data::Dataset numbers(const sd::InputContext& ctx) {
  return strata::data::Dataset::range(0, 1000)
      .shard(ctx.num_input_pipelines(), ctx.input_pipeline_id())
      .batch(1);
}
STRATA_REGISTER_DATASET_FUNCTION(numbers, numbers);

std::vector<Tensor> next_number(const sps::FunctionArgs& args) {
  return {strata::reshape(args.iterator(0).get_next()[0], {}),
          strata::constant(static_cast<int64_t>(sps::current_worker_index()))};
}
STRATA_REGISTER_FUNCTION(next_number, next_number);

// The next element of the per-worker iterator, as one scalar.
std::vector<Tensor> next_value(const sps::FunctionArgs& args) {
  return {strata::reshape(args.iterator(0).get_next()[0], {})};
}
STRATA_REGISTER_FUNCTION(next_value, next_value);

// The worker's own value of a PerWorkerValues argument, and the worker's index.
std::vector<Tensor> own_value(const sps::FunctionArgs& args) {
  return {args.tensor(0), strata::constant(static_cast<int64_t>(sps::current_worker_index()))};
}
STRATA_REGISTER_FUNCTION(own_value, own_value);

// Asks for argument 0 as a variable (wrong kind when given a tensor).
std::vector<Tensor> wants_variable(const sps::FunctionArgs& args) {
  args.variable(0);
  return {};
}
STRATA_REGISTER_FUNCTION(wants_variable, wants_variable);

std::vector<Tensor> sleep_300ms(const sps::FunctionArgs&) {
  std::this_thread::sleep_for(300ms);
  return {};
}
STRATA_REGISTER_FUNCTION(sleep_300ms, sleep_300ms);

// A closure that, the first time it runs on worker 1, stays there until the
// test releases it (so the test can kill worker 1 with the closure in flight).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool held = false;      // a closure is waiting on worker 1
  bool released = false;  // let it go
  bool used = false;
} gate;

std::vector<Tensor> hold_on_worker_1(const sps::FunctionArgs& args) {
  if (sps::current_worker_index() == 1) {
    std::unique_lock lock(gate.mu);
    if (!gate.used) {
      gate.used = true;
      gate.held = true;
      gate.cv.notify_all();
      gate.cv.wait_for(lock, 20s, [] { return gate.released; });
    }
  }
  return linear_step(args);
}
STRATA_REGISTER_FUNCTION(hold_on_worker_1, hold_on_worker_1);

// TF's closure pattern: `strategy.run(replica_fn, args=...)` inside a
// scheduled function, with the strategy the closure sees,
// tf.distribute.get_strategy(). Returns what replica_fn saw: its replica id,
// the replica count, whether it ran in a replica context of that strategy,
// the worker index, and whether a nested strategy.run raised
// FailedPreconditionError (TF: run needs the cross-replica context); then what
// the closure saw outside replica_fn: the strategy's name is
// ParameterServerStrategy, it is current (has_strategy) in cross-replica
// context, and its one replica.
std::vector<Tensor> replica_context_in_run(const sps::FunctionArgs&) {
  sd::Strategy& strategy = sd::get_strategy();
  auto replica_fn = [&] {
    sd::ReplicaContext* ctx = sd::get_replica_context();
    if (ctx == nullptr) return std::vector<int64_t>{-1};
    bool nested_refused = false;
    try {
      strategy.run([] { return 0; });
    } catch (const strata::FailedPreconditionError&) {
      nested_refused = true;
    }
    return std::vector<int64_t>{ctx->replica_id_in_sync_group(), ctx->num_replicas_in_sync(),
                                &ctx->strategy() == &strategy && &sd::get_strategy() == &strategy,
                                sps::current_worker_index(), nested_refused};
  };
  std::vector<int64_t> seen = strategy.run(replica_fn);
  seen.push_back(strategy.name() == "ParameterServerStrategy");
  seen.push_back(sd::has_strategy() && sd::in_cross_replica_context());
  seen.push_back(strategy.num_replicas_in_sync());
  return {strata::constant(seen, {static_cast<int64_t>(seen.size())})};
}
STRATA_REGISTER_FUNCTION(replica_context_in_run, replica_context_in_run);

// TF's step_fn: losses = strategy.run(replica_fn, args=(x,)), then
// strategy.reduce(SUM/MEAN, losses, axis=...) of the one replica's result.
std::vector<Tensor> reduce_in_closure(const sps::FunctionArgs& args) {
  sd::Strategy& strategy = sd::get_strategy();
  auto replica_fn = [](const Tensor& x) { return x * strata::constant(2.f); };
  auto losses = strategy.run(replica_fn, args.tensor(0));
  return {strategy.reduce(sd::ReduceOp::SUM, losses, std::nullopt),
          strategy.reduce(sd::ReduceOp::MEAN, losses, std::nullopt),
          strategy.reduce(sd::ReduceOp::SUM, losses, 0),
          strategy.reduce(sd::ReduceOp::MEAN, losses, 1),
          strategy.reduce("SUM", losses, {0, 1}),
          strategy.reduce(sd::ReduceOp::MEAN, args.tensor(0), 0)};
}
STRATA_REGISTER_FUNCTION(reduce_in_closure, reduce_in_closure);

// The chief's own ParameterServerStrategy object, where a closure can reach
// it (the same process): its run works in the closure as the worker's does.
sd::ParameterServerStrategy* chief_strategy = nullptr;
std::vector<Tensor> run_with_chief_object(const sps::FunctionArgs&) {
  Tensor replicas = chief_strategy->run([&] {
    sd::ReplicaContext* ctx = sd::get_replica_context();
    const bool ours = ctx != nullptr && &ctx->strategy() == chief_strategy;
    return strata::constant(static_cast<int64_t>(ours ? ctx->num_replicas_in_sync() : -1));
  });
  return {replicas};
}
STRATA_REGISTER_FUNCTION(run_with_chief_object, run_with_chief_object);

std::shared_ptr<cr::SimpleClusterResolver> task_resolver(const std::string& type, int index,
                                                         const std::string& address) {
  return sps::single_task_resolver(type, index, address);
}

// chief + `workers` workers + `ps` ps on loopback (ports picked by the servers).
struct LocalCluster : sps::LocalCluster {
  LocalCluster(int workers, int ps)
      : sps::LocalCluster(workers, ps, {.shutdown_grace = 100ms, .rpc_timeout = 10s}) {}
};

Tensor value_on_ps(const sd::Server& ps, const std::string& name) {
  for (const auto& v : ps.variables())
    if (v.name == name) return v.value;
  ADD_FAILURE() << "no variable '" << name << "' on " << ps.target();
  return {};
}

struct LinearModel {
  Variable w, b;
  explicit LinearModel(sd::ParameterServerStrategy& strategy) {
    auto scope = strategy.scope();
    w = Variable(strata::zeros({3, 1}), {.name = "w"});
    b = Variable(strata::zeros({}), {.name = "b"});
  }
};

float full_loss(sd::ClusterCoordinator& coordinator, const LinearModel& m) {
  return coordinator.schedule("linear_loss", {m.w, m.b}).fetch().at(0).item<float>();
}

TEST(ParameterServerStrategyTest, ALinearModelTrainsOnTwoWorkersAndTwoPs) {
  LocalCluster cluster(2, 2);
  sd::ParameterServerStrategy strategy(cluster.chief);
  EXPECT_EQ(strategy.num_replicas_in_sync(), 1);
  LinearModel m(strategy);
  // Round-robin by creation order: w on ps 0, b on ps 1.
  EXPECT_EQ(m.w.device(), "/job:ps/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(m.b.device(), "/job:ps/replica:0/task:1/device:CPU:0");
  EXPECT_TRUE(sps::is_ps_variable(m.w));
  ASSERT_EQ(cluster.ps_servers[0]->variables().size(), 1u);
  ASSERT_EQ(cluster.ps_servers[1]->variables().size(), 1u);

  sd::ClusterCoordinator coordinator(strategy);
  auto iterator = coordinator.create_per_worker_dataset("linear_data").iter();
  const float initial = full_loss(coordinator, m);
  std::vector<sd::RemoteValue<>> losses;
  losses.reserve(300);
  for (int step = 0; step < 300; ++step)
    losses.push_back(
        coordinator.schedule("linear_step", {m.w, m.b, iterator, strata::constant(0.2f)}));
  coordinator.join();
  EXPECT_TRUE(coordinator.done());
  for (const auto& l : losses) ASSERT_TRUE(l.is_ready());
  const float final_loss = full_loss(coordinator, m);
  EXPECT_GT(initial, 0.5f);
  EXPECT_LT(final_loss, 1e-3f) << "initial loss " << initial;
  // Both workers took closures; the ps tasks hold the trained values.
  EXPECT_GT(cluster.worker_servers[0]->closures_run(), 0);
  EXPECT_GT(cluster.worker_servers[1]->closures_run(), 0);
  std::vector<float> w = value_on_ps(*cluster.ps_servers[0], "w").to_vector<float>();
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NEAR(w[0], 1.f, 0.05f);
  EXPECT_NEAR(w[1], -2.f, 0.05f);
  EXPECT_NEAR(w[2], 0.5f, 0.05f);
  EXPECT_NEAR(value_on_ps(*cluster.ps_servers[1], "b").item<float>(), 0.3f, 0.05f);
  EXPECT_EQ(m.w.value().to_vector<float>(), w);  // the chief reads the ps's value
}

// TensorFlow:
//   with strategy.scope():
//     w = tf.Variable(...)                          # ps 0 (round robin)
//     with strategy.extended.colocate_vars_with(w):
//       slot = tf.Variable(...)                     # ps 0, with w
//     b = tf.Variable(...)                          # ps 1: the colocated one took no turn
TEST(ParameterServerStrategyTest, ColocateVarsWithPlacesNewVariablesOnTheSamePs) {
  LocalCluster cluster(1, 2);
  sd::ParameterServerStrategy strategy(cluster.chief);
  Variable w, slot, b;
  {
    auto scope = strategy.scope();
    w = Variable(strata::zeros({2}), {.name = "w"});
    {
      auto colocated = strategy.extended().colocate_vars_with(w);
      slot = Variable(strata::zeros({2}), {.name = "w/slot"});
    }
    b = Variable(strata::zeros({}), {.name = "b"});
  }
  EXPECT_EQ(w.device(), "/job:ps/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(slot.device(), "/job:ps/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(b.device(), "/job:ps/replica:0/task:1/device:CPU:0");
  EXPECT_TRUE(strategy.extended().variable_created_in_scope(slot));
}

TEST(ParameterServerStrategyTest, UpdatesFromBothWorkersAreAllAppliedOnThePs) {
  LocalCluster cluster(2, 1);
  sd::ParameterServerStrategy strategy(cluster.chief);
  Variable counter;
  {
    auto scope = strategy.scope();
    counter = Variable(strata::constant(0.f), {.name = "counter"});
  }
  sd::ClusterCoordinator coordinator(strategy);
  std::vector<sd::RemoteValue<>> ran_on;
  ran_on.reserve(100);
  for (int i = 0; i < 100; ++i) ran_on.push_back(coordinator.schedule("add_one", {counter}));
  coordinator.join();
  EXPECT_EQ(value_on_ps(*cluster.ps_servers[0], "counter").item<float>(), 100.f);
  for (const auto& r : ran_on) {
    const int64_t w = r.fetch().at(0).item<int64_t>();
    EXPECT_TRUE(w == 0 || w == 1) << w;
  }
}

TEST(ParameterServerStrategyTest, ReadsInsideCacheVariableReadsGoToThePsOnce) {
  LocalCluster cluster(1, 1);
  sd::ParameterServerStrategy strategy(cluster.chief);
  Variable v;
  {
    auto scope = strategy.scope();
    v = Variable(strata::constant(2.f));
  }
  sd::ClusterCoordinator coordinator(strategy);
  std::vector<Tensor> out = coordinator.schedule("cached_reads", {v}).fetch();
  EXPECT_EQ(out.at(0).item<float>(), 6.f);
  EXPECT_EQ(out.at(1).item<int64_t>(), 1);
  // On the chief too; an update through the cache refreshes it.
  sps::CacheVariableReads cache;
  EXPECT_EQ(v.value().item<float>(), 2.f);
  v.assign_add(strata::constant(1.f));
  EXPECT_EQ(v.value().item<float>(), 3.f);
  EXPECT_EQ(cache.remote_reads(), 1);
}

TEST(ParameterServerStrategyTest, AClosureOnAKilledWorkerIsRetriedOnAnother) {
  LocalCluster cluster(2, 2);
  sd::ParameterServerStrategy strategy(cluster.chief);
  LinearModel m(strategy);
  sd::ClusterCoordinator coordinator(strategy, {.ping_interval = 50ms});
  auto iterator = coordinator.create_per_worker_dataset("linear_data").iter();
  std::vector<sd::RemoteValue<>> losses;
  losses.reserve(300);
  for (int step = 0; step < 300; ++step)
    losses.push_back(
        coordinator.schedule("hold_on_worker_1", {m.w, m.b, iterator, strata::constant(0.2f)}));
  {
    std::unique_lock lock(gate.mu);
    ASSERT_TRUE(gate.cv.wait_for(lock, 30s, [] { return gate.held; }));
  }
  // Kill worker 1 with the held closure in flight: its call is cancelled at
  // the shutdown grace and the coordinator re-queues the closure.
  std::jthread killer([&] { cluster.worker_servers[1]->stop(); });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (coordinator.worker_failures() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  {
    std::lock_guard lock(gate.mu);
    gate.released = true;
    gate.cv.notify_all();
  }
  killer.join();
  EXPECT_GE(coordinator.worker_failures(), 1);
  coordinator.join();
  for (const auto& l : losses) EXPECT_EQ(l.fetch().size(), 1u);  // every step has a result
  EXPECT_LT(full_loss(coordinator, m), 1e-3f);
}

TEST(ParameterServerStrategyTest, AKilledPsRaisesUnavailableOnTheChiefPromptly) {
  LocalCluster cluster(2, 2);
  sd::ParameterServerStrategy strategy(cluster.chief);
  LinearModel m(strategy);
  sd::ClusterCoordinator coordinator(strategy);
  auto iterator = coordinator.create_per_worker_dataset("linear_data").iter();
  for (int step = 0; step < 20; ++step)
    coordinator.schedule("linear_step", {m.w, m.b, iterator, strata::constant(0.2f)});
  coordinator.join();
  cluster.ps_servers[1]->stop();  // holds b
  const auto start = std::chrono::steady_clock::now();
  // The error surfaces at the next schedule() or at join(), whichever comes first.
  std::vector<sd::RemoteValue<>> later;
  try {
    for (int step = 0; step < 50; ++step)
      later.push_back(
          coordinator.schedule("linear_step", {m.w, m.b, iterator, strata::constant(0.2f)}));
    coordinator.join();
    FAIL() << "schedule() or join() should raise UnavailableError";
  } catch (const strata::UnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find(cluster.ps_servers[1]->target()), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  int cancelled = 0;
  for (const auto& r : later) {
    try {
      r.fetch();
    } catch (const strata::CancelledError&) {
      ++cancelled;
    } catch (const strata::UnavailableError&) {
    }
  }
  if (later.size() == 50) {  // raised by join: the rest were cancelled
    EXPECT_GT(cancelled, 0);
  }
  // The chief's own reads of b fail the same way.
  EXPECT_THROW(m.b.value(), strata::UnavailableError);
}

TEST(ParameterServerStrategyTest, TheFirstClosureErrorIsRaisedOnceAndCancelsPendingClosures) {
  LocalCluster cluster(2, 1);
  sd::ParameterServerStrategy strategy(cluster.chief);
  sd::ClusterCoordinator coordinator(strategy);
  sd::RemoteValue<> bad = coordinator.schedule("fail_invalid");
  // The error surfaces at the next schedule() or at join(), whichever comes first.
  std::vector<sd::RemoteValue<>> pending;
  try {
    for (int i = 0; i < 100; ++i) pending.push_back(coordinator.schedule("sleep_20ms"));
    coordinator.join();
    FAIL() << "schedule() or join() should raise InvalidArgumentError";
  } catch (const strata::InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("fail_invalid: bad step"), std::string::npos) << e.what();
  }
  EXPECT_THROW(bad.fetch(), strata::InvalidArgumentError);
  int cancelled = 0;
  for (const auto& r : pending) {
    try {
      r.fetch();
    } catch (const strata::CancelledError&) {
      ++cancelled;
    }
  }
  // At most one sleep_20ms per worker was running when the error arrived.
  if (pending.size() > 10) {
    EXPECT_GE(cancelled, static_cast<int>(pending.size()) - 4);
  }
  coordinator.join();
  // Raised once: the coordinator goes on.
  EXPECT_TRUE(coordinator.done());
  EXPECT_EQ(coordinator.schedule("sleep_20ms").fetch().size(), 0u);
}

TEST(ParameterServerStrategyTest, SchedulingAnUnregisteredFunctionIsNotFoundAtOnce) {
  LocalCluster cluster(1, 1);
  sd::ParameterServerStrategy strategy(cluster.chief);
  sd::ClusterCoordinator coordinator(strategy);
  EXPECT_THROW(coordinator.schedule("no_such_function"), strata::NotFoundError);
  EXPECT_THROW(coordinator.create_per_worker_dataset("no_such_dataset"), strata::NotFoundError);
  Variable local(strata::constant(1.f));
  EXPECT_THROW(coordinator.schedule("add_one", {local}), strata::InvalidArgumentError);
  EXPECT_TRUE(coordinator.done());
}

TEST(ParameterServerStrategyTest, ValidatesTheClusterAsTensorFlow) {
  auto make = [](const strata::train::ClusterSpec& spec, const std::string& type) {
    return std::make_shared<cr::SimpleClusterResolver>(
        spec, cr::SimpleClusterResolverOptions{.task_type = type, .task_id = 0});
  };
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const strata::InvalidArgumentError& e) {
      return std::string(e.what());
    }
    return std::string("<no InvalidArgumentError>");
  };
  EXPECT_NE(message([&] {
              sd::ParameterServerStrategy s(
                  std::make_shared<cr::SimpleClusterResolver>(strata::train::ClusterSpec()));
            }).find("Cluster spec must be non-empty"),
            std::string::npos);
  EXPECT_EQ(
      message([&] {
        sd::ParameterServerStrategy s(make({{"chief", {"a:1"}}, {"worker", {"b:1"}}}, "chief"));
      }),
      "There must be at least one ps.");
  EXPECT_EQ(message([&] {
              sd::ParameterServerStrategy s(make({{"chief", {"a:1"}}, {"ps", {"b:1"}}}, "chief"));
            }),
            "There must be at least one worker.");
  EXPECT_NE(message([&] {
              sd::ParameterServerStrategy s(make({{"worker", {"a:1"}}, {"ps", {"b:1"}}}, "worker"));
            }).find("There must be a chief"),
            std::string::npos);
  EXPECT_NE(message([&] {
              sd::ParameterServerStrategy s(
                  make({{"chief", {"a:1"}}, {"worker", {"b:1"}}, {"ps", {"c:1"}}}, "worker"));
            }).find("expected to be created on the chief"),
            std::string::npos);
  EXPECT_NE(message([&] {
              sd::ParameterServerStrategy s(
                  make({{"chief", {"a:1"}}, {"worker", {"b:1"}}, {"bogus", {"c:1"}}}, "chief"));
            }).find("bogus"),
            std::string::npos);
  EXPECT_THROW(sd::Server(*task_resolver("chief", 0, "127.0.0.1:0")), strata::InvalidArgumentError);
  EXPECT_THROW(sd::ParameterServerStrategy(nullptr), strata::InvalidArgumentError);
}

TEST(ParameterServerStrategyTest, APartitionedVariableIsShardedRoundRobinOnThePsTasks) {
  LocalCluster cluster(2, 2);
  sd::ParameterServerStrategy strategy(cluster.chief,
                                       {.variable_partitioner = sd::FixedShardsPartitioner(5)});
  const Tensor table =
      strata::cast(strata::reshape(strata::range(0, 26), {13, 2}), strata::DType::float32);
  Variable emb, bias;
  {
    auto scope = strategy.scope();
    emb = Variable(table, {.name = "emb"});
    bias = Variable(strata::constant(0.f), {.name = "bias"});  // rank 0: never partitioned
  }
  ASSERT_TRUE(sd::is_sharded_variable(emb));
  const sd::ShardedVariable sharded = *sd::ShardedVariable::from_variable(emb);
  EXPECT_EQ(sharded.shard_rows(), (std::vector<int64_t>{3, 3, 3, 2, 2}));
  EXPECT_EQ(emb.shape(), strata::TensorShape({13, 2}));
  // Each shard is one creation of the round-robin: ps 0,1,0,1,0; then bias on ps 1.
  const std::vector<std::string> devices = {"/job:ps/replica:0/task:0/device:CPU:0",
                                            "/job:ps/replica:0/task:1/device:CPU:0"};
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(sps::is_ps_variable(sharded.variables()[i]));
    EXPECT_EQ(sharded.variables()[i].device(), devices[i % 2]) << i;
  }
  EXPECT_EQ(bias.device(), devices[1]);
  // The ps tasks' own view: the div layout's row blocks, each where it was placed.
  const std::vector<std::pair<int64_t, int64_t>> rows = {{0, 3}, {3, 6}, {6, 9}, {9, 11}, {11, 13}};
  std::map<std::string, Tensor> on_ps[2];
  for (int k = 0; k < 2; ++k)
    for (const auto& v : cluster.ps_servers[k]->variables()) on_ps[k][v.name] = v.value;
  ASSERT_EQ(on_ps[0].size(), 3u);  // part_0, part_2, part_4
  ASSERT_EQ(on_ps[1].size(), 3u);  // part_1, part_3, bias
  for (int64_t i = 0; i < 5; ++i) {
    const std::string name = "emb/part_" + std::to_string(i);
    ASSERT_TRUE(on_ps[i % 2].contains(name)) << name;
    EXPECT_FALSE(on_ps[(i + 1) % 2].contains(name)) << name;
    const Tensor& shard = on_ps[i % 2][name];
    const auto [begin, end] = rows[i];
    EXPECT_EQ(shard.shape(), strata::TensorShape({end - begin, 2})) << name;
    std::vector<float> expected;
    for (int64_t r = begin; r < end; ++r) expected.insert(expected.end(), {2.f * r, 2.f * r + 1});
    EXPECT_EQ(shard.to_vector<float>(), expected) << name;
  }
  // The chief reads the full tensor.
  EXPECT_EQ(emb.value().to_vector<float>(), table.to_vector<float>());

  sd::ClusterCoordinator coordinator(strategy);
  // A worker sees the full tensor and the shards.
  std::vector<Tensor> full = coordinator.schedule("sharded_value", {emb}).fetch();
  EXPECT_EQ(full.at(0).shape(), strata::TensorShape({13, 2}));
  EXPECT_EQ(full.at(0).to_vector<float>(), table.to_vector<float>());
  EXPECT_EQ(full.at(1).item<int64_t>(), 5);

  // Embedding lookup per shard: ids 12 and 0 live in shards 4 and 0, both on
  // ps 0; ps 1's shards are never read.
  auto reads = [&](int k) {
    std::map<std::string, int64_t> out;
    for (const auto& v : cluster.ps_servers[k]->variables()) out[v.name] = v.reads;
    return out;
  };
  const auto reads0 = reads(0), reads1 = reads(1);
  Tensor looked_up =
      coordinator.schedule("sharded_lookup", {emb, strata::constant<int64_t>({12, 0, 12})})
          .fetch()
          .at(0);
  EXPECT_EQ(looked_up.shape(), strata::TensorShape({3, 2}));
  EXPECT_EQ(looked_up.to_vector<float>(), (std::vector<float>{24, 25, 0, 1, 24, 25}));
  EXPECT_EQ(reads(1), reads1);
  EXPECT_EQ(reads(0).at("emb/part_0"), reads0.at("emb/part_0") + 1);
  EXPECT_EQ(reads(0).at("emb/part_4"), reads0.at("emb/part_4") + 1);
  EXPECT_EQ(reads(0).at("emb/part_2"), reads0.at("emb/part_2"));

  // Gradients per shard, applied on the shards' ps: ids 4 (shard 1, ps 1)
  // and 10 (shard 3, ps 1) twice; every looked-up row drops by lr per use.
  std::vector<Tensor> step =
      coordinator
          .schedule("sharded_sgd_step",
                    {emb, strata::constant<int64_t>({4, 10, 10}), strata::constant(0.5f)})
          .fetch();
  EXPECT_EQ(step.at(1).item<int64_t>(), 2);  // two shards got a gradient
  std::vector<float> expected = table.to_vector<float>();
  for (int64_t row : {4, 10, 10})
    for (int c = 0; c < 2; ++c) expected[row * 2 + c] -= 0.5f;
  EXPECT_EQ(emb.value().to_vector<float>(), expected);
  std::map<std::string, int64_t> updates[2];
  for (int k = 0; k < 2; ++k)
    for (const auto& v : cluster.ps_servers[k]->variables()) updates[k][v.name] = v.updates;
  EXPECT_EQ(updates[1].at("emb/part_1"), 1);
  EXPECT_EQ(updates[1].at("emb/part_3"), 1);
  EXPECT_EQ(updates[0].at("emb/part_0") + updates[0].at("emb/part_2") + updates[0].at("emb/part_4"),
            0);
  // The chief's own full-shape update is split per shard.
  emb.assign_add(strata::ones_like(table));
  for (float& x : expected) x += 1.f;
  EXPECT_EQ(emb.value().to_vector<float>(), expected);
  // A non-sharded argument where a sharded one is expected names the argument.
  EXPECT_THROW(
      coordinator.schedule("sharded_lookup", {bias, strata::constant<int64_t>({0})}).fetch(),
      strata::InvalidArgumentError);
}

TEST(ParameterServerStrategyTest, PartitionersDecideTheShardCount) {
  LocalCluster cluster(1, 2);
  // MinSize: 16 rows of 4 floats = 256 bytes, >= 64 bytes a shard, at most 3 shards.
  sd::ParameterServerStrategy by_min(cluster.chief,
                                     {.variable_partitioner = sd::MinSizePartitioner(64, 3)});
  Variable a;
  {
    auto scope = by_min.scope();
    a = Variable(strata::zeros({16, 4}), {.name = "a"});
  }
  EXPECT_EQ(sd::ShardedVariable::from_variable(a)->shard_rows(), (std::vector<int64_t>{6, 5, 5}));
  // MaxSize: 48 bytes a shard = 3 rows of 4 floats -> 6 shards for 16 rows.
  sd::ParameterServerStrategy by_max(cluster.chief,
                                     {.variable_partitioner = sd::MaxSizePartitioner(48)});
  Variable b, c;
  {
    auto scope = by_max.scope();
    b = Variable(strata::zeros({16, 4}), {.name = "b"});
    c = Variable(strata::zeros({2, 4}), {.name = "c"});  // one shard: a plain ps variable
  }
  EXPECT_EQ(sd::ShardedVariable::from_variable(b)->shard_rows(),
            (std::vector<int64_t>{3, 3, 3, 3, 2, 2}));
  EXPECT_FALSE(sd::is_sharded_variable(c));
  EXPECT_TRUE(sps::is_ps_variable(c));
  // Fixed shards are capped at the rows.
  sd::ParameterServerStrategy fixed(cluster.chief,
                                    {.variable_partitioner = sd::FixedShardsPartitioner(5)});
  Variable d;
  {
    auto scope = fixed.scope();
    d = Variable(strata::zeros({3, 1}), {.name = "d"});
  }
  EXPECT_EQ(sd::ShardedVariable::from_variable(d)->shard_rows(), (std::vector<int64_t>{1, 1, 1}));
}

TEST(ParameterServerStrategyTest, EachWorkerIteratesItsOwnPipelineThroughRemoteValues) {
  LocalCluster cluster(2, 1);
  sd::ParameterServerStrategy strategy(cluster.chief);
  sd::ClusterCoordinator coordinator(strategy);
  auto per_worker = coordinator.create_per_worker_dataset("numbers");
  auto iterator = per_worker.iter();
  std::vector<sd::RemoteValue<>> values;
  values.reserve(40);
  for (int i = 0; i < 40; ++i) values.push_back(coordinator.schedule("next_number", {iterator}));
  coordinator.join();
  std::map<int64_t, std::vector<int64_t>> seen;  // worker -> its elements, in order
  for (const auto& v : values) {
    ASSERT_TRUE(v.is_ready());
    std::vector<Tensor> r = coordinator.fetch(v);
    seen[r.at(1).item<int64_t>()].push_back(r.at(0).item<int64_t>());
  }
  // InputContext(2, w): worker w's pipeline is shard w, iterated from its start, once.
  for (const auto& [w, elements] : seen) {
    for (size_t k = 0; k < elements.size(); ++k)
      EXPECT_EQ(elements[k], static_cast<int64_t>(2 * k) + w) << "worker " << w;
  }
  EXPECT_EQ(seen[0].size() + seen[1].size(), 40u);
  // A second iter() starts every pipeline again.
  auto again = per_worker.iter();
  EXPECT_NE(again.id(), iterator.id());
  std::vector<Tensor> first = coordinator.schedule("next_number", {again}).fetch();
  EXPECT_EQ(first.at(0).item<int64_t>(), first.at(1).item<int64_t>());
  // fetch of several values; a RemoteValue that is not ready times out.
  EXPECT_EQ(coordinator.fetch(std::vector<sd::RemoteValue<>>{values[0], values[1]}).size(), 2u);
  sd::RemoteValue<> slow = coordinator.schedule("sleep_300ms");
  EXPECT_FALSE(slow.is_ready());
  EXPECT_THROW(slow.fetch(10ms), strata::DeadlineExceededError);
  EXPECT_EQ(slow.fetch().size(), 0u);
  EXPECT_TRUE(slow.is_ready());
  EXPECT_THROW(sd::RemoteValue<>().fetch(), strata::FailedPreconditionError);
  EXPECT_FALSE(sd::RemoteValue<>().is_ready());
}

// From TensorFlow's "Parameter server training" guide:
//   per_worker_dataset = coordinator.create_per_worker_dataset(per_worker_dataset_fn)
//   per_worker_iterator = iter(per_worker_dataset)
//   loss = coordinator.schedule(step_fn, args=(per_worker_iterator,))
//   print("Final loss is %f" % loss.fetch())
// and RemoteValue.get(), tf.distribute.experimental.coordinator.PerWorkerValues.
TEST(ParameterServerStrategyTest, RemoteValueOfATensorAndPerWorkerValuesReadAsTensorFlow) {
  LocalCluster cluster(2, 1);
  sd::ParameterServerStrategy strategy(cluster.chief);
  sd::ClusterCoordinator coordinator(strategy);
  sd::PerWorkerDataset per_worker_dataset = coordinator.create_per_worker_dataset("numbers");
  sd::PerWorkerIterator per_worker_iterator = per_worker_dataset.iter();
  sd::RemoteValue<Tensor> loss = coordinator.schedule("next_value", {per_worker_iterator});
  coordinator.join();
  // The first element of either worker's shard of range(1000): 0 or 1.
  const int64_t first = loss.fetch().item<int64_t>();
  EXPECT_TRUE(first == 0 || first == 1) << first;
  EXPECT_EQ(loss.get().item<int64_t>(), first);
  EXPECT_EQ(coordinator.fetch(loss).item<int64_t>(), first);

  // A function of two results seen as one tensor names the count.
  sd::RemoteValue<Tensor> two = coordinator.schedule("next_number", {per_worker_iterator});
  try {
    two.fetch();
    ADD_FAILURE() << "expected InvalidArgumentError";
  } catch (const strata::InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("one tensor, got 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sd::RemoteValue<>(two).fetch().size(), 2u);

  // Each worker's closure gets its own value of a PerWorkerValues.
  sd::PerWorkerValues per_worker({strata::constant(int64_t{10}), strata::constant(int64_t{20})});
  std::vector<sd::RemoteValue<>> results;
  results.reserve(20);
  for (int i = 0; i < 20; ++i) results.push_back(coordinator.schedule("own_value", {per_worker}));
  coordinator.join();
  for (const auto& r : results) {
    std::vector<Tensor> got = r.fetch();
    EXPECT_EQ(got.at(0).item<int64_t>(), got.at(1).item<int64_t>() == 0 ? 10 : 20);
  }
  // One value per worker, or schedule refuses it.
  EXPECT_THROW(
      coordinator.schedule("own_value", {sd::PerWorkerValues({strata::constant(int64_t{1})})}),
      strata::InvalidArgumentError);
}

TEST(ParameterServerStrategyTest, OptionsAndArgumentsAreValidated) {
  LocalCluster cluster(1, 1);
  EXPECT_THROW(sd::ParameterServerStrategy(cluster.chief, {.rpc_timeout = 0ms}),
               strata::InvalidArgumentError);
  sd::ParameterServerStrategy strategy(cluster.chief);
  EXPECT_THROW(sd::ClusterCoordinator(strategy, {.closure_timeout = 0ms}),
               strata::InvalidArgumentError);
  EXPECT_THROW(sd::ClusterCoordinator(strategy, {.max_attempts = 0}), strata::InvalidArgumentError);
  EXPECT_THROW(sd::ClusterCoordinator(strategy, {.ping_interval = 0ms}),
               strata::InvalidArgumentError);
  EXPECT_THROW(sd::Server(*task_resolver("ps", 0, "127.0.0.1:0"), {.max_rpc_threads = 1}),
               strata::InvalidArgumentError);
  // A variable needs an initial value.
  {
    auto scope = strategy.scope();
    EXPECT_THROW((void)Variable(Tensor{}, {}), strata::InvalidArgumentError);
  }
  sd::ClusterCoordinator coordinator(strategy);
  EXPECT_THROW(coordinator.schedule("add_one", {Tensor()}), strata::InvalidArgumentError);
  // The function asking for the wrong kind of argument: InvalidArgumentError
  // raised on the chief, naming the function and the kinds.
  try {
    coordinator.schedule("wants_variable", {strata::constant(1.f)}).fetch();
    FAIL() << "expected InvalidArgumentError";
  } catch (const strata::InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("wants_variable"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Tensor"), std::string::npos) << e.what();
  }
  EXPECT_THROW(coordinator.join(), strata::InvalidArgumentError);  // raised once
  coordinator.join();
  // The registry refuses an empty or a taken name.
  auto& registry = sps::FunctionRegistry::global();
  EXPECT_THROW(
      registry.add_function("", [](const sps::FunctionArgs&) { return std::vector<Tensor>{}; }),
      strata::InvalidArgumentError);
  EXPECT_THROW(registry.add_function(
                   "add_one", [](const sps::FunctionArgs&) { return std::vector<Tensor>{}; }),
               strata::AlreadyExistsError);
  EXPECT_EQ(registry.find_function("no_such_function"), nullptr);
  EXPECT_THROW(registry.function("no_such_function"), strata::NotFoundError);
}

TEST(ParameterServerStrategyTest, AnInvalidPartitionIsInvalidArgument) {
  LocalCluster cluster(1, 1);
  sd::ParameterServerStrategy strategy(
      cluster.chief, {.variable_partitioner = [](const strata::TensorShape&, strata::DType) {
        return std::vector<int64_t>{1, 2};
      }});
  auto scope = strategy.scope();
  EXPECT_THROW(Variable(strata::zeros({4, 4})), strata::InvalidArgumentError);
  Variable scalar(strata::constant(1.f));  // rank 0: never partitioned
  EXPECT_EQ(scalar.value().item<float>(), 1.f);
}

TEST(ParameterServerStrategyTest, RunOutsideAScheduledFunctionIsFailedPrecondition) {
  LocalCluster cluster(1, 1);
  sd::ParameterServerStrategy strategy(cluster.chief);
  // TF: NotImplementedError without a ClusterCoordinator, a warning (and fn run
  // on the coordinator) with one; Strata refuses both (porting.md).
  EXPECT_THROW(strategy.run([] { return 1; }), strata::FailedPreconditionError);
  {
    auto scope = strategy.scope();
    EXPECT_THROW(strategy.run([] { return 1; }), strata::FailedPreconditionError);
  }
  sd::ClusterCoordinator coordinator(strategy);
  EXPECT_THROW(strategy.run([] { return 1; }), strata::FailedPreconditionError);
  // The worker-side strategy refuses it outside a closure too, and the chief
  // is not in its scope.
  EXPECT_THROW(sps::internal::worker_strategy().run([] { return 1; }),
               strata::FailedPreconditionError);
  EXPECT_FALSE(sd::has_strategy());
  EXPECT_THROW(sps::current_worker_index(), strata::FailedPreconditionError);
}

TEST(ParameterServerStrategyTest, RunInsideAScheduledFunctionRunsOneReplicaOnTheWorker) {
  LocalCluster cluster(2, 1);
  sd::ParameterServerStrategy strategy(cluster.chief);
  sd::ClusterCoordinator coordinator(strategy);
  std::vector<sd::RemoteValue<Tensor>> seen;
  seen.reserve(6);
  for (int i = 0; i < 6; ++i) seen.push_back(coordinator.schedule("replica_context_in_run"));
  coordinator.join();
  std::set<int64_t> workers;
  for (const auto& r : seen) {
    const std::vector<int64_t> v = r.fetch().to_vector<int64_t>();
    ASSERT_EQ(v.size(), 8u);
    EXPECT_EQ(v[0], 0);  // replica_id_in_sync_group
    EXPECT_EQ(v[1], 1);  // num_replicas_in_sync
    EXPECT_EQ(v[2], 1);  // the replica context is the closure's strategy's
    EXPECT_TRUE(v[3] == 0 || v[3] == 1) << v[3];
    workers.insert(v[3]);
    EXPECT_EQ(v[4], 1);  // a nested strategy.run: FailedPreconditionError
    EXPECT_EQ(v[5], 1);  // named ParameterServerStrategy
    EXPECT_EQ(v[6], 1);  // current, in cross-replica context, outside replica_fn
    EXPECT_EQ(v[7], 1);  // strategy.num_replicas_in_sync
  }
  EXPECT_FALSE(workers.empty());

  // The chief's object run from a closure in the same process.
  chief_strategy = &strategy;
  EXPECT_EQ(coordinator.schedule("run_with_chief_object").fetch().at(0).item<int64_t>(), 1);
  chief_strategy = nullptr;
}

TEST(ParameterServerStrategyTest, ReduceOfTheOneReplicaInAScheduledFunction) {
  LocalCluster cluster(1, 1);
  sd::ParameterServerStrategy strategy(cluster.chief);
  sd::ClusterCoordinator coordinator(strategy);
  // x = [[1, 2, 3], [4, 5, 6]]; replica_fn doubles it: [[2, 4, 6], [8, 10, 12]].
  const Tensor x = strata::constant(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const std::vector<Tensor> r = coordinator.schedule("reduce_in_closure", {x}).get();
  ASSERT_EQ(r.size(), 6u);
  const std::vector<float> doubled{2, 4, 6, 8, 10, 12};
  // axis=None with one replica: the value itself, for SUM and MEAN.
  EXPECT_EQ(r[0].shape(), strata::TensorShape({2, 3}));
  EXPECT_EQ(r[0].to_vector<float>(), doubled);
  EXPECT_EQ(r[1].to_vector<float>(), doubled);
  // axis=0: SUM over the rows; axis=1: MEAN over the columns; both axes: the total.
  EXPECT_EQ(r[2].to_vector<float>(), (std::vector<float>{10, 14, 18}));
  EXPECT_EQ(r[3].to_vector<float>(), (std::vector<float>{4, 10}));
  EXPECT_EQ(r[4].item<float>(), 42.f);
  // A non-distributed value: reduced along the axis (MEAN over rows of x).
  EXPECT_EQ(r[5].to_vector<float>(), (std::vector<float>{2.5f, 3.5f, 4.5f}));
}

TEST(ServerTest, AStopRpcEndsJoin) {
  sd::Server server(*task_resolver("worker", 0, "127.0.0.1:0"), {.shutdown_grace = 100ms});
  std::atomic<bool> joined{false};
  std::jthread joiner([&] {
    server.join();
    joined = true;
  });
  sps::internal::TaskClient client(server.target());
  EXPECT_EQ(client.ping(5s).task_type, "worker");
  client.stop(5s);
  joiner.join();
  EXPECT_TRUE(joined);
  EXPECT_THROW(client.ping(2s), strata::UnavailableError);
}

TEST(ServerTest, APsRejectsClosuresAndAWorkerRejectsVariables) {
  sd::Server ps(*task_resolver("ps", 0, "127.0.0.1:0"));
  sd::Server worker(*task_resolver("worker", 0, "127.0.0.1:0"));
  sps::internal::TaskClient to_ps(ps.target()), to_worker(worker.target());
  EXPECT_THROW(to_ps.run_closure("add_one", {}, 5s), strata::FailedPreconditionError);
  EXPECT_THROW(to_worker.create_variable("v", strata::constant(1.f), true,
                                         strata::VariableAggregation::NONE, 5s),
               strata::FailedPreconditionError);
  auto info = to_ps.create_variable("v", strata::constant(1.f), true,
                                    strata::VariableAggregation::NONE, 5s);
  EXPECT_THROW(
      to_ps.update_variable(info.id, sps::internal::UpdateKind::ASSIGN,
                            strata::constant(std::vector<float>{1.f, 2.f}, {2}), false, 5s),
      strata::InvalidArgumentError);
  EXPECT_THROW(to_ps.read_variable(info.id + 7, 5s), strata::NotFoundError);
}

TEST(ServerTest, CallsWithoutTheClusterTokenAreRefusedAndChangeNothing) {
  sd::Server ps(*task_resolver("ps", 0, "127.0.0.1:0"),
                {.shutdown_grace = 100ms, .token = "job-token", .max_message_bytes = 1 << 20});
  // TaskClient takes $STRATA_CLUSTER_TOKEN when it is made.
  ::setenv("STRATA_CLUSTER_TOKEN", "another-token", 1);
  sps::internal::TaskClient wrong(ps.target());
  ::unsetenv("STRATA_CLUSTER_TOKEN");
  sps::internal::TaskClient none(ps.target());
  for (sps::internal::TaskClient* stranger : {&wrong, &none}) {
    try {
      stranger->create_variable("v", strata::constant(1.f), true, strata::VariableAggregation::NONE,
                                5s);
      ADD_FAILURE() << "a call without the token created a variable";
    } catch (const strata::UnauthenticatedError& e) {
      EXPECT_NE(std::string(e.what()).find("cluster token"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("job-token"), std::string::npos) << e.what();
    }
    EXPECT_THROW(stranger->ping(5s), strata::UnauthenticatedError);
    EXPECT_THROW(stranger->stop(5s), strata::UnauthenticatedError);  // the server keeps serving
  }
  ::setenv("STRATA_CLUSTER_TOKEN", "job-token", 1);
  sps::internal::TaskClient member(ps.target());
  ::unsetenv("STRATA_CLUSTER_TOKEN");
  EXPECT_EQ(member.ping(5s).task_type, "ps");
  EXPECT_TRUE(ps.variables().empty());
  // A message over the server's limit is refused; the server goes on.
  EXPECT_THROW(member.create_variable("big", strata::zeros({512, 1024}), true,
                                      strata::VariableAggregation::NONE, 5s),
               strata::ResourceExhaustedError);
  const auto info = member.create_variable("v", strata::constant(2.f), true,
                                           strata::VariableAggregation::NONE, 5s);
  EXPECT_EQ(member.read_variable(info.id, 5s).item<float>(), 2.f);
  ASSERT_EQ(ps.variables().size(), 1u);
  EXPECT_EQ(ps.variables()[0].name, "v");
}

TEST(ServerTest, ListensOnlyAtItsTaskAddress) {
  // 127.0.0.2 is an address of the loopback interface: the same port at
  // 127.0.0.1 (another address of this host) must not answer.
  sd::Server ps(*task_resolver("ps", 0, "127.0.0.2:0"), {.shutdown_grace = 100ms});
  auto accepts = [&](const char* host) {
    strata::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(ps.port()));
    ::inet_pton(AF_INET, host, &addr.sin_addr);
    return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  };
  EXPECT_EQ(ps.target(), "127.0.0.2:" + std::to_string(ps.port()));
  EXPECT_TRUE(accepts("127.0.0.2"));
  EXPECT_FALSE(accepts("127.0.0.1"));
}

TEST(ServerTest, APortThatIsTakenFailsTheServerInsteadOfBeingShared) {
  // Two tasks given one address (ports picked apart can repeat): the second
  // server must not share the first one's port, or the kernel would hand
  // each connection to either task.
  sd::Server worker(*task_resolver("worker", 0, "127.0.0.1:0"), {.shutdown_grace = 100ms});
  try {
    sd::Server ps(*task_resolver("ps", 0, worker.target()), {.shutdown_grace = 100ms});
    ADD_FAILURE() << "a second server listens on " << worker.target();
  } catch (const strata::UnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen on " + worker.target()), std::string::npos)
        << e.what();
  }
  // The first one still answers as itself.
  sps::internal::TaskClient client(worker.target());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(client.ping(5s).task_type, "worker");
}

}  // namespace
