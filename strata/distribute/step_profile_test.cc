#include "strata/distribute/step_profile.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/ops/math_ops.h"
#include "strata/testing/logical_devices.h"

namespace strata::distribute {
namespace {

using std::chrono::milliseconds;

double seconds_of(const PhaseSeconds& s, StepPhase p) { return s[static_cast<int>(p)]; }

class StepProfileTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(2); }
};

TEST_F(StepProfileTest, WithoutProfilingAPhaseRecordsNothingAndGatherSaysWhy) {
  MirroredStrategy strategy;
  strategy.run([] { ScopedStepPhase forward(StepPhase::kForward); });
  EXPECT_EQ(strategy.step_profiler(), nullptr);
  auto scope = strategy.scope();
  try {
    gather_step_profile(strategy);
    FAIL() << "gathered without a profile";
  } catch (const FailedPreconditionError& e) {
    EXPECT_NE(std::string(e.what()).find("enable_step_profile"), std::string::npos) << e.what();
  }
}

// A phase entered inside another pauses it: the outer phase's total leaves
// out the inner one's time.
TEST_F(StepProfileTest, NestedPhasesAreExclusive) {
  MirroredStrategy strategy;
  std::shared_ptr<StepProfiler> profiler = strategy.enable_step_profile();
  strategy.run([] {
    ScopedStepPhase apply(StepPhase::kApply);
    std::this_thread::sleep_for(milliseconds(20));
    {
      ScopedStepPhase wait(StepPhase::kCollectiveWait);
      std::this_thread::sleep_for(milliseconds(300));
    }
  });
  for (const PhaseSeconds& s : profiler->snapshot()) {
    EXPECT_GE(seconds_of(s, StepPhase::kCollectiveWait), 0.3);
    EXPECT_GE(seconds_of(s, StepPhase::kApply), 0.02);
    EXPECT_LT(seconds_of(s, StepPhase::kApply), 0.2) << "the inner phase counted twice";
    EXPECT_EQ(seconds_of(s, StepPhase::kForward), 0.0);
  }
}

// Time in cross-replica context (drawing a batch for every replica) counts
// for every local replica.
TEST_F(StepProfileTest, CrossReplicaTimeCountsForEveryReplica) {
  MirroredStrategy strategy;
  std::shared_ptr<StepProfiler> profiler = strategy.enable_step_profile();
  {
    auto scope = strategy.scope();
    ScopedStepPhase input(StepPhase::kInput);
    std::this_thread::sleep_for(milliseconds(30));
  }
  const std::vector<PhaseSeconds> s = profiler->snapshot();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_GE(seconds_of(s[0], StepPhase::kInput), 0.03);
  EXPECT_EQ(seconds_of(s[0], StepPhase::kInput), seconds_of(s[1], StepPhase::kInput));
}

// A replica slowed in its forward pass: its all-reduce partner waits for it,
// and the report names it with its dominant phase.
TEST_F(StepProfileTest, ASlowReplicaIsNamedWithItsPhaseAndThePeerWaitsForIt) {
  MirroredStrategy strategy;
  strategy.enable_step_profile();
  const Tensor g = constant({1.0f, 2.0f});
  for (int step = 0; step < 3; ++step) {
    strategy.step_profiler()->count_step();
    strategy.run([&g] {
      ReplicaContext* ctx = get_replica_context();
      {
        ScopedStepPhase forward(StepPhase::kForward);
        std::this_thread::sleep_for(milliseconds(ctx->replica_id_in_sync_group() == 1 ? 60 : 2));
      }
      ScopedStepPhase apply(StepPhase::kApply);
      ctx->all_reduce(ReduceOp::SUM, g);
    });
  }
  auto scope = strategy.scope();
  const StepProfileReport report = gather_step_profile(strategy);
  EXPECT_EQ(report.steps, 3);
  ASSERT_EQ(report.replicas.size(), 2u);
  EXPECT_GT(seconds_of(report.replicas[0].seconds, StepPhase::kCollectiveWait),
            seconds_of(report.replicas[1].seconds, StepPhase::kCollectiveWait) + 0.1)
      << report.table();
  ASSERT_EQ(report.stragglers.size(), 1u) << report.table();
  EXPECT_EQ(report.stragglers[0].who, "replica 1");
  EXPECT_EQ(report.stragglers[0].dominant_phase, StepPhase::kForward);
  EXPECT_NE(report.table().find("Straggler: replica 1 is"), std::string::npos) << report.table();
  EXPECT_NE(report.table().find("most of it in forward"), std::string::npos) << report.table();
}

// The rule itself, on made-up totals: more than 20% over the median busy
// time (input + forward + gradient + apply) names a worker; collective time
// never does (it is the others' waiting).
TEST(StepProfileReportTest, StragglersAreWorkersOverTheMedianBusyTimeByMoreThanAFifth) {
  auto times = [](int worker, int replica, double input, double forward, double wait) {
    ReplicaStepTimes r{.worker = worker, .replica = replica};
    r.seconds[static_cast<int>(StepPhase::kInput)] = input;
    r.seconds[static_cast<int>(StepPhase::kForward)] = forward;
    r.seconds[static_cast<int>(StepPhase::kCollectiveWait)] = wait;
    return r;
  };
  // Median busy of {1.0, 1.1, 1.5} is 1.1: 1.5 > 1.32 is named, 1.1 is not.
  StepProfileReport r = make_step_profile_report(
      {times(2, 2, 1.0, 0.5, 0), times(0, 0, 0.5, 0.5, 9), times(1, 1, 0.5, 0.6, 9)}, 10);
  EXPECT_EQ(r.num_workers, 3);
  ASSERT_EQ(r.stragglers.size(), 1u);
  EXPECT_EQ(r.stragglers[0].who, "worker 2");
  EXPECT_EQ(r.stragglers[0].dominant_phase, StepPhase::kInput);
  EXPECT_DOUBLE_EQ(r.stragglers[0].busy_seconds, 1.5);
  EXPECT_DOUBLE_EQ(r.stragglers[0].median_busy_seconds, 1.1);
  EXPECT_EQ(r.replicas[0].replica, 0);  // sorted by replica id
  // 1.3 vs a median of 1.15: within 20%.
  r = make_step_profile_report({times(0, 0, 0.5, 0.5, 0), times(1, 1, 0.5, 0.8, 0)}, 1);
  EXPECT_TRUE(r.stragglers.empty()) << r.table();
  EXPECT_NE(r.table().find("No straggler"), std::string::npos);
}

}  // namespace
}  // namespace strata::distribute
