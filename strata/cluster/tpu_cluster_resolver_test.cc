#include "strata/cluster/tpu_cluster_resolver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"

namespace strata::distribute::cluster_resolver {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TPUClusterResolver, LocalIsThisHostWithAnEmptyClusterAndNoMaster) {
  TPUClusterResolver r("local");
  EXPECT_TRUE(r.is_local());
  EXPECT_TRUE(r.cluster_spec().empty());
  EXPECT_EQ(r.master(), "");
  EXPECT_EQ(r.task_type(), "worker");
  EXPECT_EQ(r.task_id(), 0);
}

TEST(TPUClusterResolver, EmptyNameWithoutAClusterInTfConfigIsLocal) {
  TPUClusterResolver r("", {.tf_config = "{}"});
  EXPECT_TRUE(r.is_local());
  EXPECT_EQ(r.master(), "");
}

TEST(TPUClusterResolver, AddressListIsAPodOfWorkers) {
  TPUClusterResolver r("grpc://10.0.0.1:8470,10.0.0.2:8470");
  EXPECT_FALSE(r.is_local());
  EXPECT_THAT(r.cluster_spec().job_tasks("worker"), ElementsAre("10.0.0.1:8470", "10.0.0.2:8470"));
  EXPECT_EQ(r.master(), "grpc://10.0.0.1:8470");
  r.set_task_id(1);
  EXPECT_EQ(r.master(), "grpc://10.0.0.2:8470");
  EXPECT_EQ(r.rpc_layer(), "grpc");
}

TEST(TPUClusterResolver, EmptyNameResolvesAPodFromTfConfig) {
  TPUClusterResolver r("", {.tf_config = R"({"cluster": {"worker": ["h0:1", "h1:1"]},
                                             "task": {"type": "worker", "index": 1}})"});
  EXPECT_FALSE(r.is_local());
  EXPECT_EQ(r.task_id(), 1);
  EXPECT_EQ(r.master(), "grpc://h1:1");
}

TEST(TPUClusterResolver, CoordinatorIsItsOwnJob) {
  TPUClusterResolver r(
      "h0:1,h1:1",
      {.job_name = "tpu_worker", .coordinator_name = "coordinator", .coordinator_address = "c:2"});
  EXPECT_THAT(r.cluster_spec().jobs(), ElementsAre("tpu_worker", "coordinator"));
  EXPECT_EQ(r.task_type(), "tpu_worker");
  EXPECT_EQ(r.master("coordinator", 0), "grpc://c:2");
}

TEST(TPUClusterResolver, UnknownTasksAndCloudNamesAreInvalid) {
  TPUClusterResolver r("h0:1");
  try {
    r.master("ps", 0);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("No TPUs with the specified names exist."));
  }
  EXPECT_THROW(r.master("worker", 3), InvalidArgumentError);
  try {
    TPUClusterResolver cloud("my-tpu");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'my-tpu'"));
  }
}

}  // namespace
}  // namespace strata::distribute::cluster_resolver
