#include "strata/cluster/slurm_cluster_resolver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"

namespace strata::distribute::cluster_resolver {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Env = std::map<std::string, std::string>;

TEST(ExpandHostlist, ExpandsRangesListsAndZeroPadding) {
  EXPECT_THAT(expand_hostlist("node[01-03,07]"),
              ElementsAre("node01", "node02", "node03", "node07"));
  EXPECT_THAT(expand_hostlist("a[1-2],b3"), ElementsAre("a1", "a2", "b3"));
  EXPECT_THAT(expand_hostlist("r[1-2]n[8-9]"), ElementsAre("r1n8", "r1n9", "r2n8", "r2n9"));
  EXPECT_THAT(expand_hostlist("n[9-11]"), ElementsAre("n9", "n10", "n11"));
  EXPECT_THAT(expand_hostlist("single"), ElementsAre("single"));
}

TEST(ExpandHostlist, MalformedListsNameTheList) {
  EXPECT_THROW(expand_hostlist("node[1-3"), InvalidArgumentError);
  try {
    expand_hostlist("node[3-1]");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'node[3-1]'"));
  }
  EXPECT_THROW(expand_hostlist("node[a-b]"), InvalidArgumentError);
}

TEST(ExpandTasksPerNode, ExpandsRepeatCounts) {
  EXPECT_THAT(expand_tasks_per_node("2(x3),1"), ElementsAre(2, 2, 2, 1));
  EXPECT_THAT(expand_tasks_per_node("4"), ElementsAre(4));
  EXPECT_THROW(expand_tasks_per_node("2(3)"), InvalidArgumentError);
  EXPECT_THROW(expand_tasks_per_node("x"), InvalidArgumentError);
}

Env two_nodes_two_tasks(int rank) {
  return {{"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_NTASKS", "4"},
          {"SLURM_STEP_NODELIST", "node[01-02]"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}};
}

TEST(SlurmClusterResolver, AssignsTasksToNodesInOrderWithIncreasingPorts) {
  SlurmClusterResolver r({.environment = two_nodes_two_tasks(3)});
  EXPECT_THAT(r.cluster_spec().job_tasks("worker"),
              ElementsAre("node01:8888", "node01:8889", "node02:8888", "node02:8889"));
  EXPECT_EQ(r.task_type(), "worker");
  EXPECT_EQ(r.task_id(), 3);
  EXPECT_EQ(r.rpc_layer(), "grpc");
  EXPECT_EQ(r.master(), "grpc://node02:8889");
  EXPECT_EQ(r.master("worker", 0, ""), "node01:8888");
}

TEST(SlurmClusterResolver, DealsRanksToJobsInNameOrder) {
  SlurmClusterResolver ps({.jobs = {{"worker", 3}, {"ps", 1}},
                           .port_base = 9000,
                           .environment = two_nodes_two_tasks(0)});
  EXPECT_THAT(ps.cluster_spec().jobs(), ElementsAre("ps", "worker"));
  EXPECT_THAT(ps.cluster_spec().job_tasks("ps"), ElementsAre("node01:9000"));
  EXPECT_EQ(ps.task_type(), "ps");
  EXPECT_EQ(ps.task_id(), 0);
  SlurmClusterResolver worker(
      {.jobs = {{"worker", 3}, {"ps", 1}}, .environment = two_nodes_two_tasks(2)});
  EXPECT_EQ(worker.task_type(), "worker");
  EXPECT_EQ(worker.task_id(), 1);
}

TEST(SlurmClusterResolver, FallsBackToTheJobNodelistAndTasksPerNode) {
  SlurmClusterResolver r({.environment = Env{{"SLURM_PROCID", "0"},
                                             {"SLURM_NTASKS", "3"},
                                             {"SLURM_JOB_NODELIST", "a[1-2],b3"},
                                             {"SLURM_TASKS_PER_NODE", "1(x3)"}}});
  EXPECT_THAT(r.cluster_spec().job_tasks("worker"), ElementsAre("a1:8888", "a2:8888", "b3:8888"));
}

TEST(SlurmClusterResolver, MissingVariablesAreFailedPreconditionNamingThem) {
  try {
    SlurmClusterResolver r({.environment = Env{{"SLURM_NTASKS", "1"}}});
    FAIL();
  } catch (const FailedPreconditionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("SLURM_PROCID"));
  }
}

TEST(SlurmClusterResolver, RejectsBadValuesAndTooManyRequestedTasks) {
  auto env = two_nodes_two_tasks(0);
  env["SLURM_PROCID"] = "zero";
  EXPECT_THROW(SlurmClusterResolver({.environment = env}), InvalidArgumentError);
  try {
    SlurmClusterResolver r({.jobs = {{"worker", 5}}, .environment = two_nodes_two_tasks(0)});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("requested 5 tasks"));
  }
}

TEST(SlurmClusterResolver, GpusPerNodeCapTasksAndAreReported) {
  SlurmClusterResolver r({.jobs = {{"worker", 2}},
                          .gpus_per_node = 2,
                          .gpus_per_task = 2,
                          .environment = two_nodes_two_tasks(1)});
  EXPECT_THAT(r.cluster_spec().job_tasks("worker"), ElementsAre("node01:8888", "node02:8888"));
  EXPECT_EQ(r.num_accelerators(), (std::map<std::string, int>{{"GPU", 2}}));
}

}  // namespace
}  // namespace strata::distribute::cluster_resolver
