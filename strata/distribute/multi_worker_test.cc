// MultiWorkerMirroredStrategy with its workers as threads of one process: each
// thread builds its own strategy from a SimpleClusterResolver on loopback, so
// the rendezvous store, Gloo and the hierarchical all-reduce all run for real.
#include "strata/distribute/multi_worker_mirrored_strategy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <future>
#include <thread>
#include <tuple>
#include <type_traits>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/cluster/socket.h"
#include "strata/core/config.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/step_profile.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/testing/logical_devices.h"

namespace strata::distribute {
namespace {

namespace cr = cluster_resolver;

// "127.0.0.1:<port>" for n distinct free ports (picked in one call: ports
// picked in separate calls can repeat).
std::vector<std::string> free_addresses(int n) {
  std::vector<std::string> addresses;
  for (int port : cluster::pick_free_ports(n)) addresses.push_back(str_cat("127.0.0.1:", port));
  return addresses;
}

class MultiWorkerTest : public ::testing::Test {
 public:
  // on_workers for functions outside the fixture, on a fresh two-worker cluster.
  template <typename R>
  static std::vector<R> on_workers_public(
      const std::function<R(MultiWorkerMirroredStrategy&)>& body, CommunicationOptions comm) {
    return on_workers<R>(two_workers(), body, 30, comm);
  }

 protected:
  void SetUp() override { strata::testing::use_logical_cpus(2); }

  static train::ClusterSpec two_workers() {
    return train::ClusterSpec({{"worker", free_addresses(2)}});
  }

  static MultiWorkerMirroredStrategyOptions options_for(const train::ClusterSpec& spec,
                                                        const std::string& type, int id,
                                                        double timeout_seconds = 30,
                                                        CommunicationOptions comm = {}) {
    comm.timeout_seconds = timeout_seconds;
    return {.cluster_resolver = std::make_shared<cr::SimpleClusterResolver>(
                spec, cr::SimpleClusterResolverOptions{.task_type = type, .task_id = id}),
            .communication_options = comm};
  }

  // Runs body(strategy) on one thread per worker and returns each worker's result.
  template <typename R>
  static std::vector<R> on_workers(const train::ClusterSpec& spec,
                                   const std::function<R(MultiWorkerMirroredStrategy&)>& body,
                                   double timeout_seconds = 30, CommunicationOptions comm = {}) {
    std::vector<std::future<R>> futures;
    futures.reserve(2);
    for (int w = 0; w < 2; ++w) {
      futures.push_back(std::async(std::launch::async, [&spec, &body, w, timeout_seconds, comm] {
        MultiWorkerMirroredStrategy strategy(options_for(spec, "worker", w, timeout_seconds, comm));
        return body(strategy);
      }));
    }
    std::vector<R> out;
    out.reserve(futures.size());
    std::string errors;
    for (size_t w = 0; w < futures.size(); ++w) {
      try {
        out.push_back(futures[w].get());
      } catch (const std::exception& e) {
        errors += str_cat("\nworker ", w, ": ", e.what());
      }
    }
    // Every worker's error, not just the first: the root cause may be on either.
    if (!errors.empty()) throw std::runtime_error("a worker failed:" + errors);
    return out;
  }

  // Two workers step through 4 global batches of 8, each step a forward pass
  // and an all-reduce, profiled; worker 1's input map sleeps (slow_input) or
  // its forward pass is throttled (slow_compute). Every worker's report.
  static std::vector<StepProfileReport> profile_two_workers(bool slow_input, bool slow_compute) {
    return on_workers<StepProfileReport>(
        two_workers(), [slow_input, slow_compute](MultiWorkerMirroredStrategy& s) {
          s.enable_step_profile();
          const bool slow = s.extended().task_id() == 1;
          const data::Dataset ds =
              data::Dataset::range(32).map([slow, slow_input](const data::Element& e) {
                if (slow && slow_input) std::this_thread::sleep_for(std::chrono::milliseconds(15));
                return e;
              });
          DistributedIterator it = s.experimental_distribute_dataset(ds.batch(8)).iter();
          auto scope = s.scope();
          while (true) {
            std::optional<PerReplica<data::Element>> batch;
            {
              ScopedStepPhase input(StepPhase::kInput);
              batch = it.get_next_as_optional();
            }
            if (!batch) break;
            s.step_profiler()->count_step();
            s.run(
                [slow, slow_compute](const data::Element& e) {
                  Tensor sum;
                  {
                    ScopedStepPhase forward(StepPhase::kForward);
                    if (slow && slow_compute)
                      std::this_thread::sleep_for(std::chrono::milliseconds(60));
                    sum = reduce_sum(cast(e[0], DType::float32));
                  }
                  ScopedStepPhase apply(StepPhase::kApply);
                  return get_replica_context()->all_reduce(ReduceOp::SUM, sum);
                },
                *batch);
          }
          return gather_step_profile(s);
        });
  }
};

// resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(tf.train.ClusterSpec({}))
// strategy = tf.distribute.MultiWorkerMirroredStrategy(
//     cluster_resolver=resolver, communication_options=options)
// strategy.cluster_resolver is resolver
TEST_F(MultiWorkerTest, ABorrowedResolverIsTheStrategysOwnResolver) {
  cr::SimpleClusterResolver resolver{train::ClusterSpec()};
  CommunicationOptions options{.timeout_seconds = 30};
  MultiWorkerMirroredStrategy mw2(
      {.cluster_resolver = &resolver, .communication_options = options});
  EXPECT_EQ(mw2.cluster_resolver(), &resolver);
  EXPECT_EQ(mw2.num_replicas_in_sync(), 2);  // single-worker mode over the two local devices
  experimental::MultiWorkerMirroredStrategy old_name({.cluster_resolver = &resolver});
  EXPECT_EQ(old_name.cluster_resolver(), &resolver);
  auto shared = std::make_shared<cr::SimpleClusterResolver>(train::ClusterSpec());
  MultiWorkerMirroredStrategy by_shared({.cluster_resolver = shared});
  EXPECT_EQ(by_shared.cluster_resolver(), shared.get());
}

TEST_F(MultiWorkerTest, ReplicasCountEveryWorkerAndAllReduceSpansThem) {
  const auto spec = two_workers();
  auto results = on_workers<std::vector<float>>(spec, [](MultiWorkerMirroredStrategy& s) {
    EXPECT_EQ(s.num_replicas_in_sync(), 4);
    EXPECT_EQ(s.num_local_replicas(), 2);
    EXPECT_EQ(s.num_input_pipelines(), 2);
    EXPECT_EQ(s.cluster_resolver()->task_type(), "worker");
    EXPECT_EQ(s.extended().should_checkpoint(), s.worker_index() == 0);
    auto sums = s.run([] {
      ReplicaContext& ctx = *get_replica_context();
      return ctx
          .all_reduce(ReduceOp::SUM, constant(static_cast<float>(ctx.replica_id_in_sync_group())))
          .item<float>();
    });
    auto ids = s.run([] {
      return constant(static_cast<float>(get_replica_context()->replica_id_in_sync_group()));
    });
    std::vector<float> out = s.experimental_local_results(sums);
    out.push_back(s.reduce(ReduceOp::SUM, ids, std::nullopt).item<float>());
    out.push_back(s.reduce(ReduceOp::MEAN, ids, std::nullopt).item<float>());
    return out;
  });
  for (const auto& r : results) {
    EXPECT_EQ(r, (std::vector<float>{6, 6, 6, 1.5f}));  // 0+1+2+3 on every replica; mean 1.5
  }
}

// Both workers run on this host (threads of one process): by default they
// exchange through shared memory, with CommunicationOptions.shared_memory OFF
// over Gloo; the same sums either way. Workers that chose differently fail at
// the rendezvous naming the other's choice, instead of waiting in different
// rendezvous until the deadline. (tf.distribute has no such option: its
// collectives always go over gRPC between workers.)
TEST_F(MultiWorkerTest, WorkersOfOneHostUseSharedMemoryUnlessItIsOff) {
  for (const SharedMemory choice : {SharedMemory::AUTO, SharedMemory::OFF}) {
    const auto spec = two_workers();
    std::vector<std::future<std::pair<std::string, float>>> futures;
    futures.reserve(2);
    for (int w = 0; w < 2; ++w) {
      futures.push_back(std::async(std::launch::async, [&spec, w, choice] {
        MultiWorkerMirroredStrategyOptions options = options_for(spec, "worker", w);
        options.communication_options.shared_memory = choice;
        MultiWorkerMirroredStrategy strategy(options);
        EXPECT_EQ(strategy.num_hosts(), 1);
        auto sums = strategy.run([] {
          ReplicaContext& ctx = *get_replica_context();
          return ctx.all_reduce(
              ReduceOp::SUM, constant(1.5f * static_cast<float>(ctx.replica_id_in_sync_group())));
        });
        return std::make_pair(strategy.cross_worker_transport(),
                              strategy.experimental_local_results(sums).front().item<float>());
      }));
    }
    for (auto& f : futures) {
      const auto [transport, sum] = f.get();
      EXPECT_EQ(transport, choice == SharedMemory::AUTO ? "shared_memory" : "gloo");
      EXPECT_EQ(sum, 9.f);  // 1.5 * (0 + 1 + 2 + 3)
    }
  }
  const auto spec = two_workers();
  std::vector<std::future<std::string>> futures;
  futures.reserve(2);
  for (int w = 0; w < 2; ++w) {
    futures.push_back(std::async(std::launch::async, [&spec, w] {
      MultiWorkerMirroredStrategyOptions options = options_for(spec, "worker", w, 10);
      options.communication_options.shared_memory = w == 0 ? SharedMemory::AUTO : SharedMemory::OFF;
      try {
        MultiWorkerMirroredStrategy strategy(options);
        return std::string("no error");
      } catch (const Error& e) {
        return str_cat(error_code_name(e.code()), ": ", e.what());
      }
    }));
  }
  // The chief names the difference; the other worker names it too, or, when
  // the chief's store was gone before it read the chief's choice, fails on that.
  const std::string chief = futures[0].get(), other = futures[1].get();
  EXPECT_NE(chief.find("INVALID_ARGUMENT: MultiWorkerMirroredStrategy: /job:worker/task:1 runs "
                       "with communication_options.shared_memory OFF but worker 0 "
                       "(/job:worker/task:0) with AUTO"),
            std::string::npos)
      << chief;
  EXPECT_NE(other, "no error");
}

// TensorFlow (2 workers of 2 replicas each):
//   strategy.reduce("SUM", tf.constant(float(task_id + 1)), axis=None)   # 1 + 2 = 3 everywhere
//   strategy.reduce("MEAN", ..., axis=None)                             # 3 / 2 workers = 1.5
//   worker 0: [1., 2.], worker 1: [3.]
//   strategy.reduce("SUM", x, axis=0)    # 6;  strategy.reduce("MEAN", x, axis=0)   # 6 / 3 = 2
//   strategy.gather(per_replica, axis=0)    # replica r gives [r] (replica 1: [1, 1]): [0 1 1 2 3]
//   ctx.all_gather([r], axis=0)             # [0 1 2 3] on every replica
TEST_F(MultiWorkerTest, PlainValuesReduceAndGatherSpansEveryWorker) {
  const auto spec = two_workers();
  auto results = on_workers<std::vector<float>>(spec, [](MultiWorkerMirroredStrategy& s) {
    const float w = static_cast<float>(s.worker_index());
    std::vector<float> out;
    out.push_back(s.reduce("SUM", constant(w + 1.f), std::nullopt).item<float>());
    out.push_back(s.reduce("MEAN", constant(w + 1.f), std::nullopt).item<float>());
    const Tensor x = w == 0 ? constant({1.f, 2.f}) : constant({3.f});
    out.push_back(s.reduce("SUM", x, 0).item<float>());
    out.push_back(s.reduce("MEAN", x, 0).item<float>());
    auto mine = s.experimental_distribute_values_from_function([](const ValueContext& ctx) {
      const int r = ctx.replica_id_in_sync_group();
      return r == 1 ? constant({1.f, 1.f}) : constant({static_cast<float>(r)});
    });
    for (float v : s.gather(mine, 0).to_vector<float>()) out.push_back(v);
    auto gathered = s.run([] {
      ReplicaContext& ctx = *get_replica_context();
      return ctx.all_gather(constant({static_cast<float>(ctx.replica_id_in_sync_group())}), 0);
    });
    for (const Tensor& g : s.experimental_local_results(gathered))
      for (float v : g.to_vector<float>()) out.push_back(v);
    return out;
  });
  for (const auto& r : results) {
    EXPECT_EQ(r, (std::vector<float>{3, 1.5f, 6, 2, 0, 1, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
  }
}

TEST_F(MultiWorkerTest, VariablesStartFromTheChiefsValue) {
  const auto spec = two_workers();
  auto values = on_workers<std::vector<float>>(spec, [](MultiWorkerMirroredStrategy& s) {
    Variable v;
    {
      auto scope = s.scope();
      v = Variable(constant(10.f + static_cast<float>(s.worker_index())));
    }
    std::vector<float> out;
    for (const Variable& c : distributed_components(v)) out.push_back(c.value().item<float>());
    // A MEAN update in replica context averages over all four replicas.
    Variable m;
    {
      auto scope = s.scope();
      m = Variable(constant(0.f), {.aggregation = VariableAggregation::MEAN});
    }
    s.run([&] {
      m.assign_add(constant(static_cast<float>(get_replica_context()->replica_id_in_sync_group())));
    });
    out.push_back(m.value().item<float>());
    return out;
  });
  for (const auto& v : values) EXPECT_EQ(v, (std::vector<float>{10, 10, 1.5f}));
}

TEST_F(MultiWorkerTest, InputIsShardedAcrossWorkers) {
  const auto spec = two_workers();
  auto seen = on_workers<std::vector<int64_t>>(spec, [](MultiWorkerMirroredStrategy& s) {
    // 16 elements, global batch 8: each worker takes its share, each replica 2.
    auto dist = s.experimental_distribute_dataset(data::Dataset::range(16).batch(8));
    std::vector<int64_t> mine;
    for (const auto& x : dist) {
      for (const data::Element& e : s.experimental_local_results(x)) {
        for (int64_t v : e[0].to_vector<int64_t>()) mine.push_back(v);
      }
    }
    return mine;
  });
  std::vector<int64_t> all = seen[0];
  all.insert(all.end(), seen[1].begin(), seen[1].end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(16);
  for (int i = 0; i < 16; ++i) expected[i] = i;
  EXPECT_EQ(all, expected);
  EXPECT_EQ(seen[0].size(), 8u);
}

TEST_F(MultiWorkerTest, AFailedWorkerFailsTheOthersCollectivesInsteadOfHanging) {
  const auto spec = two_workers();
  auto outcome = on_workers<std::string>(spec, [](MultiWorkerMirroredStrategy& s) -> std::string {
    try {
      s.run([&] {
        if (s.worker_index() == 1) throw InternalError("worker 1 crashed");
        get_replica_context()->all_reduce(ReduceOp::SUM, constant(1.f));
      });
      return "no error";
    } catch (const Error& e) {
      return std::string(error_code_name(e.code()));
    }
  });
  EXPECT_EQ(outcome[1], "INTERNAL");
  EXPECT_TRUE(outcome[0] == "UNAVAILABLE" || outcome[0] == "ABORTED") << outcome[0];
}

TEST_F(MultiWorkerTest, UnevenDataAcrossWorkersDoesNotDeadlock) {
  const auto spec = two_workers();
  // OFF: each worker reads all of its own dataset: 12 examples on worker 0, 4 on worker 1. A
  // global batch of 4 gives each worker 2 examples per step (1 per replica).
  auto steps = on_workers<std::vector<int64_t>>(spec, [](MultiWorkerMirroredStrategy& s) {
    data::Options o;
    o.experimental_distribute.auto_shard_policy = data::AutoShardPolicy::OFF;
    const int64_t n = s.worker_index() == 0 ? 12 : 4;
    auto dist = s.experimental_distribute_dataset(data::Dataset::range(n).batch(4).with_options(o));
    std::vector<int64_t> sizes;  // per step: examples this worker fed, and the global sum
    for (const auto& x : dist) {
      auto counts = s.run(
          [](const data::Element& e) {
            const Tensor rows = constant(e[0].shape().dim(0));
            return get_replica_context()->all_reduce(ReduceOp::SUM, rows).item<int64_t>();
          },
          x);
      sizes.push_back(s.experimental_local_results(counts)[0]);
    }
    return sizes;
  });
  // Six steps on both workers: 2 + 2 examples, then worker 1 feeds empty batches.
  EXPECT_EQ(steps[0], (std::vector<int64_t>{4, 4, 2, 2, 2, 2}));
  EXPECT_EQ(steps[1], (std::vector<int64_t>{4, 4, 2, 2, 2, 2}));
}

TEST_F(MultiWorkerTest, AnUnreachableChiefIsUnavailableNamingItsAddress) {
  const auto spec = two_workers();
  ::testing::internal::CaptureStderr();
  try {
    MultiWorkerMirroredStrategy lonely(options_for(spec, "worker", 1, /*timeout_seconds=*/1));
    ::testing::internal::GetCapturedStderr();
    FAIL() << "expected UnavailableError";
  } catch (const UnavailableError& e) {
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(std::string(e.what()).find(spec.task_address("worker", 0)), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("still missing /job:worker/task:0 (the chief"),
              std::string::npos)
        << e.what();
    // Logged while waiting (every 250 ms with a 1 s deadline).
    EXPECT_NE(log.find("worker 1 (/job:worker/task:1) waiting for the rendezvous"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("still missing /job:worker/task:0 (the chief"), std::string::npos) << log;
  }
}

TEST_F(MultiWorkerTest, StartUpLogsAndListsTheMissingTasks) {
  const std::vector<std::string> addresses = free_addresses(3);
  const train::ClusterSpec spec(
      {{"chief", {addresses[0]}}, {"worker", {addresses[1], addresses[2]}}});
  // The chief and worker 0 come; worker 1 never does. Worker 0 gives up first (a
  // worker that outlives the chief's deadline loses the chief's store instead).
  ::testing::internal::CaptureStderr();
  std::vector<std::future<std::string>> futures;
  for (const auto& task :
       std::vector<std::tuple<std::string, int, double>>{{"chief", 0, 2.0}, {"worker", 0, 1.5}}) {
    // The tuple, not its structured bindings, is captured: clang 14 (clang-tidy) rejects those.
    futures.push_back(std::async(std::launch::async, [&spec, task]() -> std::string {
      const auto& [type, id, timeout] = task;
      try {
        MultiWorkerMirroredStrategy s(options_for(spec, type, id, timeout));
        return "no error";
      } catch (const UnavailableError& e) {
        return e.what();
      }
    }));
  }
  std::vector<std::string> errors;
  errors.reserve(futures.size());
  for (auto& f : futures) errors.push_back(f.get());
  const std::string log = ::testing::internal::GetCapturedStderr();
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("waiting for the rendezvous: still missing [/job:worker/task:1]"),
              std::string::npos)
        << e;
  }
  EXPECT_NE(errors[0].find("worker 0 (/job:chief/task:0) gave up after 2000ms"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("worker 1 (/job:worker/task:0) gave up after 1500ms"), std::string::npos)
      << errors[1];
  EXPECT_NE(log.find("worker 0 (/job:chief/task:0) waiting for the rendezvous"), std::string::npos)
      << log;
  EXPECT_NE(log.find("worker 1 (/job:worker/task:0) waiting for the rendezvous"), std::string::npos)
      << log;
  EXPECT_NE(log.find("still missing [/job:worker/task:1]"), std::string::npos) << log;
}

TEST_F(MultiWorkerTest, DifferentCollectiveSchedulesFailEveryWorkerShowingBothSides) {
  const auto spec = two_workers();
  auto outcome = on_workers<std::string>(spec, [](MultiWorkerMirroredStrategy& s) -> std::string {
    try {
      s.run([&] {
        // Worker 1 reduces a vector where worker 0 reduces a scalar.
        const Tensor x = s.worker_index() == 0 ? constant(1.f) : constant({1.f, 2.f});
        get_replica_context()->all_reduce(ReduceOp::SUM, x);
      });
      return "no error";
    } catch (const FailedPreconditionError& e) {
      return e.what();
    } catch (const Error& e) {
      return str_cat(error_code_name(e.code()), ": ", e.what());
    }
  });
  const std::string zero = "rank 0 (/job:worker/task:0)";
  const std::string one = "rank 1 (/job:worker/task:1)";
  EXPECT_NE(outcome[0].find("collective schedules differ across workers: this worker, " + zero +
                            ", issued collective #"),
            std::string::npos)
      << outcome[0];
  EXPECT_NE(outcome[0].find("all_reduce(SUM, [float32[]])"), std::string::npos) << outcome[0];
  EXPECT_NE(outcome[0].find("but " + one + " issued collective #"), std::string::npos)
      << outcome[0];
  EXPECT_NE(outcome[0].find("all_reduce(SUM, [float32[2]])"), std::string::npos) << outcome[0];
  EXPECT_NE(outcome[1].find("this worker, " + one + ", issued collective #"), std::string::npos)
      << outcome[1];
  EXPECT_NE(outcome[1].find("but " + zero + " issued collective #"), std::string::npos)
      << outcome[1];
}

TEST_F(MultiWorkerTest, ACollectiveTimeoutNamesTheTaskThatNeverEnteredIt) {
  const auto spec = two_workers();
  std::promise<void> worker0_done;
  std::shared_future<void> done = worker0_done.get_future().share();
  auto outcome = on_workers<std::string>(
      spec,
      [&](MultiWorkerMirroredStrategy& s) -> std::string {
        if (s.worker_index() == 1) {
          // Never enters the all-reduce; stays connected until worker 0 gave up.
          done.wait_for(std::chrono::seconds(30));
          return "skipped";
        }
        std::string o = "no error";
        try {
          s.run([&] { get_replica_context()->all_reduce(ReduceOp::SUM, constant(1.f)); });
        } catch (const Error& e) {
          o = str_cat(error_code_name(e.code()), ": ", e.what());
        }
        worker0_done.set_value();
        return o;
      },
      /*timeout_seconds=*/1);
  EXPECT_EQ(outcome[0].rfind("DEADLINE_EXCEEDED: ", 0), 0u) << outcome[0];
  EXPECT_NE(outcome[0].find("all_reduce(SUM, [float32[]])"), std::string::npos) << outcome[0];
  EXPECT_NE(outcome[0].find("rank 1 (/job:worker/task:1) never entered it within 1000ms"),
            std::string::npos)
      << outcome[0];
}

TEST_F(MultiWorkerTest, AWorkerWithASlowInputPipelineIsNamedWithInputOnEveryWorker) {
  const std::vector<StepProfileReport> reports = profile_two_workers(true, false);
  for (const StepProfileReport& r : reports) {
    EXPECT_EQ(r.steps, 4);
    EXPECT_EQ(r.num_workers, 2);
    ASSERT_EQ(r.replicas.size(), 4u) << r.table();
    ASSERT_EQ(r.stragglers.size(), 1u) << r.table();
    EXPECT_EQ(r.stragglers[0].who, "worker 1") << r.table();
    EXPECT_EQ(r.stragglers[0].dominant_phase, StepPhase::kInput) << r.table();
    // Worker 0 spends the difference waiting for worker 1 in the all-reduce.
    EXPECT_GT(r.worker_seconds(0)[static_cast<int>(StepPhase::kCollectiveWait)],
              r.worker_seconds(1)[static_cast<int>(StepPhase::kCollectiveWait)])
        << r.table();
  }
  EXPECT_EQ(reports[0].table(), reports[1].table());
  std::printf("%s", reports[0].table().c_str());  // the example in docs/step_profile.md
}

TEST_F(MultiWorkerTest, AWorkerWithThrottledComputeIsNamedWithForwardOnEveryWorker) {
  for (const StepProfileReport& r : profile_two_workers(false, true)) {
    ASSERT_EQ(r.stragglers.size(), 1u) << r.table();
    EXPECT_EQ(r.stragglers[0].who, "worker 1") << r.table();
    EXPECT_EQ(r.stragglers[0].dominant_phase, StepPhase::kForward) << r.table();
  }
}

TEST_F(MultiWorkerTest, RolesAreValidated) {
  const train::ClusterSpec spec(
      {{"worker", {"localhost:1", "localhost:2"}}, {"ps", {"localhost:3"}}});
  EXPECT_THROW(MultiWorkerMirroredStrategy(options_for(spec, "ps", 0)), InvalidArgumentError);
  EXPECT_THROW(MultiWorkerMirroredStrategy(options_for(spec, "worker", 5)), InvalidArgumentError);
  EXPECT_THROW(MultiWorkerMirroredStrategy(options_for(spec, "chief", 0)), InvalidArgumentError);
}

// The seed page's and older guides' spellings name the same types:
//   tf.distribute.experimental.MultiWorkerMirroredStrategy(
//       communication_options=tf.distribute.experimental.CommunicationOptions(
//           implementation=tf.distribute.experimental.CommunicationImplementation.RING))
TEST_F(MultiWorkerTest, TheExperimentalSpellingsNameTheSameTypes) {
  static_assert(
      std::is_same_v<experimental::MultiWorkerMirroredStrategy, MultiWorkerMirroredStrategy>);
  static_assert(std::is_same_v<experimental::CommunicationOptions, CommunicationOptions>);
  static_assert(
      std::is_same_v<experimental::CommunicationImplementation, CommunicationImplementation>);
  experimental::MultiWorkerMirroredStrategy strategy(
      {.cluster_resolver = std::make_shared<cr::SimpleClusterResolver>(
           train::ClusterSpec(std::vector<train::ClusterSpec::Job>{})),
       .communication_options = experimental::CommunicationOptions{
           .implementation = experimental::CommunicationImplementation::RING}});
  EXPECT_EQ(strategy.num_input_pipelines(), 1);
}

TEST_F(MultiWorkerTest, AnEmptyClusterIsSingleWorkerMode) {
  MultiWorkerMirroredStrategy local(
      {.cluster_resolver = std::make_shared<cr::SimpleClusterResolver>(
           train::ClusterSpec(std::vector<train::ClusterSpec::Job>{}))});
  EXPECT_EQ(local.num_replicas_in_sync(), 2);
  EXPECT_EQ(local.num_input_pipelines(), 1);
  auto r = local.run(
      [] { return get_replica_context()->all_reduce(ReduceOp::SUM, constant(1.f)).item<float>(); });
  EXPECT_EQ(r.values()[0], 2.f);
}

// CommunicationOptions{.check_divergence_every_n_steps = 1} (a Strata
// extension): worker 1 corrupts its copy of global replica 3 after step 1;
// the check of step 2 fails on both workers with the same report.
TEST_F(MultiWorkerTest, DivergedCopyOnOneWorkerFailsTheCheckOnEveryWorker) {
  const auto spec = two_workers();
  std::vector<std::string> reports(2);
  std::vector<std::future<void>> futures;
  futures.reserve(2);
  for (int w = 0; w < 2; ++w) {
    futures.push_back(std::async(std::launch::async, [&spec, &reports, w] {
      MultiWorkerMirroredStrategyOptions options = options_for(spec, "worker", w);
      options.communication_options.check_divergence_every_n_steps = 1;
      MultiWorkerMirroredStrategy s(options);
      Variable v;
      {
        auto scope = s.scope();
        v = Variable(constant(std::vector<float>{1.f, 2.f, 3.f}, TensorShape({3})),
                     {.name = "dense/kernel"});
      }
      const auto step = [&] {
        s.run([&] { v.assign_add(constant(std::vector<float>{1, 1, 1})); });
      };
      step();
      if (w == 1) distributed_components(v).at(1).assign(constant(std::vector<float>{2, 3, 5}));
      try {
        step();
      } catch (const DataLossError& e) {
        reports[w] = e.what();
      }
    }));
  }
  for (auto& f : futures) f.get();
  for (int w = 0; w < 2; ++w) {
    SCOPED_TRACE(str_cat("worker ", w));
    EXPECT_NE(reports[w].find("differ at step 2"), std::string::npos) << reports[w];
    EXPECT_NE(reports[w].find("variable 'dense/kernel' (shape [3])"), std::string::npos)
        << reports[w];
    EXPECT_NE(reports[w].find("replicas [0, 1, 2] hold fingerprint"), std::string::npos)
        << reports[w];
    EXPECT_NE(reports[w].find("replica [3] holds fingerprint"), std::string::npos) << reports[w];
  }
  EXPECT_EQ(reports[0], reports[1]);
}

// --- overlap_gradient_reduction -----------------------------------------------

// How a training step treats the gradients between tape.gradient and the
// all-reduce that apply_gradients would run.
enum class GradientUse {
  kUnchanged,         // all-reduced as the tape returned them
  kScaledEverywhere,  // every worker halves them first (as clipping would)
  kScaledOnWorker1,   // only worker 1 halves them (a worker-dependent choice)
  kLossReducedFirst,  // an all-reduce of the loss comes first, then the gradients
};

struct TrainResult {
  std::vector<float> weights;  // every variable of replica 0, flattened
  GradientOverlapCounts counts;
};

// Two workers x 2 replicas train a 8-16-4 ReLU network for 3 steps of plain
// SGD written out (the gradients' SUM all-reduce, then each replica updates
// its copies), each replica on its own 4 rows.
std::vector<TrainResult> train_with(bool overlap, GradientUse use, int64_t bucket_bytes) {
  CommunicationOptions comm;
  comm.overlap_gradient_reduction = overlap;
  comm.gradient_bucket_bytes = bucket_bytes;
  auto fill = [](int64_t n, float scale, float phase) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = scale * std::sin(0.7f * float(i) + phase);
    return v;
  };
  return MultiWorkerTest::on_workers_public<TrainResult>(
      [&](MultiWorkerMirroredStrategy& s) {
        std::vector<Variable> vars;
        {
          auto scope = s.scope();
          vars.emplace_back(constant(fill(8 * 16, 0.5f, 0.f), {8, 16}),
                            VariableOptions{.name = "w1"});
          vars.emplace_back(constant(fill(16, 0.1f, 1.f), {16}), VariableOptions{.name = "b1"});
          vars.emplace_back(constant(fill(16 * 4, 0.5f, 2.f), {16, 4}),
                            VariableOptions{.name = "w2"});
        }
        const int worker = s.worker_index();
        for (int step = 0; step < 3; ++step) {
          s.run([&] {
            ReplicaContext& ctx = *get_replica_context();
            const float id = float(ctx.replica_id_in_sync_group());
            const Tensor x = constant(fill(4 * 8, 1.f, id + float(step)), {4, 8});
            const Tensor target = constant(fill(4 * 4, 1.f, 3.f * id), {4, 4});
            std::vector<Tensor> grads;
            Tensor loss;
            {
              GradientTape tape;
              const Tensor h = relu(matmul(x, vars[0].value()) + vars[1].value());
              loss = reduce_sum(square(matmul(h, vars[2].value()) - target)) * (1.f / 16.f);
              grads = tape.gradient(loss, vars);
            }
            const bool scale = use == GradientUse::kScaledEverywhere ||
                               (use == GradientUse::kScaledOnWorker1 && worker == 1);
            if (scale) {
              for (Tensor& g : grads) g = g * 0.5f;
            }
            if (use == GradientUse::kLossReducedFirst) ctx.all_reduce(ReduceOp::SUM, loss);
            const std::vector<Tensor> sums = ctx.all_reduce(ReduceOp::SUM, grads);
            for (size_t i = 0; i < vars.size(); ++i) {
              distributed_components(vars[i])
                  .at(size_t(ctx.local_replica_id()))
                  .assign_sub(sums[i] * 0.05f);
            }
          });
        }
        TrainResult r;
        for (const Variable& v : vars) {
          for (float f : distributed_components(v).at(0).value().to_vector<float>())
            r.weights.push_back(f);
        }
        r.counts = s.gradient_overlap_counts();
        return r;
      },
      comm);
}

// The gradients' all-reduce starts during the backward pass and
// apply_gradients' all-reduce takes its sums: the same bits as reducing
// after the pass. 300-byte buckets: the pass's w2 and b1 gradients (256 + 64
// bytes) fill the first, w1's 512 bytes the second.
TEST_F(MultiWorkerTest, OverlappedGradientReductionGivesTheSameWeightsAsWithout) {
  const std::vector<TrainResult> off = train_with(false, GradientUse::kUnchanged, 300);
  const std::vector<TrainResult> on = train_with(true, GradientUse::kUnchanged, 300);
  for (int w = 0; w < 2; ++w) {
    SCOPED_TRACE(str_cat("worker ", w));
    EXPECT_EQ(on[w].weights, off[w].weights);
    EXPECT_EQ(on[w].weights, on[0].weights);
    // 3 steps x 2 local replicas, 2 buckets each, every pass's sums used.
    EXPECT_EQ(on[w].counts.buckets, 12);
    EXPECT_EQ(on[w].counts.used, 6);
    EXPECT_EQ(on[w].counts.discarded, 0);
    EXPECT_EQ(off[w].counts.buckets, 0);
  }
  // The weights moved: the test compares trained values, not the initial ones.
  const std::vector<TrainResult> once = train_with(true, GradientUse::kScaledEverywhere, 300);
  EXPECT_NE(once[0].weights, on[0].weights);
}

// Gradients changed between the tape and the all-reduce (here halved, as
// clipping or loss scaling would) are reduced as they are: the early sums
// are dropped, also when only one worker changed its gradients.
TEST_F(MultiWorkerTest, ChangedGradientsFallBackToTheirOwnAllReduce) {
  for (GradientUse use : {GradientUse::kScaledEverywhere, GradientUse::kScaledOnWorker1}) {
    SCOPED_TRACE(use == GradientUse::kScaledEverywhere ? "every worker" : "worker 1 only");
    const std::vector<TrainResult> off = train_with(false, use, 300);
    const std::vector<TrainResult> on = train_with(true, use, 300);
    for (int w = 0; w < 2; ++w) {
      EXPECT_EQ(on[w].weights, off[w].weights) << "worker " << w;
      EXPECT_EQ(on[w].counts.used, 0) << "worker " << w;
      EXPECT_EQ(on[w].counts.discarded, 6) << "worker " << w;
    }
  }
  // An all-reduce of other values first (the loss) keeps the pass for the
  // gradients' all-reduce that follows.
  const std::vector<TrainResult> off = train_with(false, GradientUse::kLossReducedFirst, 300);
  const std::vector<TrainResult> on = train_with(true, GradientUse::kLossReducedFirst, 300);
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(on[w].weights, off[w].weights) << "worker " << w;
    EXPECT_EQ(on[w].counts.used, 6) << "worker " << w;
  }
}

// Worker 1 never enters the first bucket's all-reduce: worker 0's step fails
// with the group's own error, naming the task that never came, after the
// 1 s collective timeout (not after the communication thread's much longer
// stall bound), and nothing hangs.
TEST_F(MultiWorkerTest, AWorkerMissingFromAnOverlappedReductionIsNamedWithinTheTimeout) {
  CommunicationOptions comm;
  comm.overlap_gradient_reduction = true;
  comm.gradient_bucket_bytes = 64;
  std::promise<void> worker0_done;
  std::shared_future<void> done = worker0_done.get_future().share();
  double seconds = 0;
  auto outcome = on_workers<std::string>(
      two_workers(),
      [&](MultiWorkerMirroredStrategy& s) -> std::string {
        Variable w;
        {
          auto scope = s.scope();
          w = Variable(constant(std::vector<float>(256, 0.5f), {16, 16}), {.name = "w"});
        }
        if (s.worker_index() == 1) {
          done.wait_for(std::chrono::seconds(30));
          return "skipped";
        }
        std::string o = "no error";
        const auto start = std::chrono::steady_clock::now();
        try {
          s.run([&] {
            std::vector<Tensor> grads;
            {
              GradientTape tape;
              const Tensor x = constant(std::vector<float>(32, 1.f), {2, 16});
              grads =
                  tape.gradient(reduce_sum(square(matmul(x, w.value()))), std::vector<Variable>{w});
            }
            get_replica_context()->all_reduce(ReduceOp::SUM, grads);
          });
        } catch (const Error& e) {
          o = str_cat(error_code_name(e.code()), ": ", e.what());
        }
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        worker0_done.set_value();
        return o;
      },
      /*timeout_seconds=*/1, comm);
  EXPECT_EQ(outcome[0].rfind("DEADLINE_EXCEEDED: ", 0), 0u) << outcome[0];
  EXPECT_NE(outcome[0].find("all_reduce(SUM, [float32[16, 16]])"), std::string::npos) << outcome[0];
  EXPECT_NE(outcome[0].find("rank 1 (/job:worker/task:1) never entered it within 1000ms"),
            std::string::npos)
      << outcome[0];
  EXPECT_LT(seconds, 8.0) << outcome[0];
}

}  // namespace
}  // namespace strata::distribute
