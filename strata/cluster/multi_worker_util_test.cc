#include "strata/cluster/multi_worker_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"

namespace strata::distribute::multi_worker_util {
namespace {

using ::testing::HasSubstr;
using train::ClusterSpec;

const ClusterSpec kWithChief(
    {{"chief", {"c:1"}}, {"worker", {"w0:1", "w1:1"}}, {"ps", {"p:1"}}, {"evaluator", {"e:1"}}});
const ClusterSpec kWorkersOnly({{"worker", {"w0:1", "w1:1"}}, {"ps", {"p:1"}}});

std::string message(auto fn) {
  try {
    fn();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InvalidArgumentError";
  return "";
}

TEST(IsChief, TheChiefTaskIsChiefWhenPresent) {
  EXPECT_TRUE(is_chief(kWithChief, "chief", 0));
  EXPECT_FALSE(is_chief(kWithChief, "worker", 0));
  EXPECT_FALSE(is_chief(kWithChief, "ps", 0));
}

TEST(IsChief, WorkerZeroIsChiefWithoutAChiefJob) {
  EXPECT_TRUE(is_chief(kWorkersOnly, "worker", 0));
  EXPECT_FALSE(is_chief(kWorkersOnly, "worker", 1));
}

TEST(IsChief, TheEvaluatorIsItsOwnChiefAndAnEmptyClusterIsChief) {
  EXPECT_TRUE(is_chief(kWithChief, "evaluator", 0));
  EXPECT_TRUE(is_chief(ClusterSpec({{"worker", {"w:1"}}}), "evaluator", 0));
  EXPECT_TRUE(is_chief(ClusterSpec(), std::nullopt, std::nullopt));
}

TEST(WorkerCount, CountsChiefAndWorkersOrTheEvaluator) {
  EXPECT_EQ(worker_count(kWithChief, "worker"), 3);
  EXPECT_EQ(worker_count(kWithChief, "chief"), 3);
  EXPECT_EQ(worker_count(kWithChief, "evaluator"), 1);
  EXPECT_EQ(worker_count(kWorkersOnly, "worker"), 2);
  EXPECT_THAT(message([] { worker_count(kWorkersOnly, "ps"); }),
              HasSubstr("Unexpected `task_type` 'ps'"));
}

TEST(IdInCluster, ChiefIsZeroAndWorkersFollow) {
  EXPECT_EQ(id_in_cluster(kWithChief, "chief", 0), 0);
  EXPECT_EQ(id_in_cluster(kWithChief, "worker", 1), 2);
  EXPECT_EQ(id_in_cluster(kWorkersOnly, "worker", 1), 1);
  EXPECT_EQ(id_in_cluster(kWithChief, "evaluator", 0), 0);
  EXPECT_THAT(message([] { id_in_cluster(kWithChief, "ps", 0); }),
              HasSubstr("There is no id for task_type 'ps'"));
}

TEST(CollectiveLeader, IsTheChiefElseWorkerZeroAndNoneForEvaluators) {
  EXPECT_EQ(collective_leader(kWithChief, "worker", 1), "/job:chief/replica:0/task:0");
  EXPECT_EQ(collective_leader(kWorkersOnly, "worker", 1), "/job:worker/replica:0/task:0");
  EXPECT_EQ(collective_leader(kWithChief, "evaluator", 0), "");
  EXPECT_EQ(collective_leader(ClusterSpec(), std::nullopt, std::nullopt), "");
}

TEST(ValidateClusterSpec, RejectsTensorFlowsInvalidCases) {
  EXPECT_THAT(
      message([] { validate_cluster_spec(kWorkersOnly, std::nullopt, 0); }),
      HasSubstr("When `cluster_spec` is given, you must also specify `task_type` and `task_id`."));
  EXPECT_THAT(message([] { validate_cluster_spec(kWorkersOnly, "worker", std::nullopt); }),
              HasSubstr("you must also specify"));
  EXPECT_THAT(message([] { validate_cluster_spec(kWorkersOnly, "master", 0); }),
              HasSubstr("Unrecognized task_type: 'master'"));
  EXPECT_THAT(message([] { validate_cluster_spec(kWorkersOnly, "chief", 0); }),
              HasSubstr("`task_type` 'chief' not found in cluster_spec."));
  EXPECT_THAT(message([] {
                validate_cluster_spec(ClusterSpec({{"chief", {"a:1", "b:1"}}}), "chief", 0);
              }),
              HasSubstr("There must be at most one 'chief' job."));
  EXPECT_THAT(message([] {
                validate_cluster_spec(
                    ClusterSpec({{"worker", {"a:1"}}, {"evaluator", {"a:1", "b:1"}}}), "worker", 0);
              }),
              HasSubstr("There must be at most one 'evaluator' job."));
  EXPECT_THAT(message([] { validate_cluster_spec(kWorkersOnly, "worker", 2); }),
              HasSubstr("The `task_id` 2 exceeds the maximum id of worker."));
  EXPECT_THAT(message([] {
                validate_cluster_spec(ClusterSpec({{"trainer", {"a:1"}}}), "worker", 0);
              }),
              HasSubstr("Disallowed task type found in cluster spec"));
  EXPECT_NO_THROW(validate_cluster_spec(kWithChief, "ps", 0));
}

}  // namespace
}  // namespace strata::distribute::multi_worker_util
