#include "strata/cluster/cluster_resolver.h"

#include <cstdlib>
#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"

namespace strata::distribute::cluster_resolver {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Sets TF_CONFIG for one test and restores the previous value.
class ScopedTfConfig {
 public:
  explicit ScopedTfConfig(const std::optional<std::string>& value) {
    if (const char* old = std::getenv("TF_CONFIG")) old_ = old;
    apply(value);
  }
  ~ScopedTfConfig() { apply(old_); }
  void apply(const std::optional<std::string>& value) {
    if (value) {
      ::setenv("TF_CONFIG", value->c_str(), 1);
    } else {
      ::unsetenv("TF_CONFIG");
    }
  }

 private:
  std::optional<std::string> old_;
};

std::string invalid_argument_message(const std::string& tf_config) {
  try {
    TFConfigClusterResolver::from_string(tf_config).cluster_spec();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InvalidArgumentError for " << tf_config;
  return "";
}

constexpr const char* kSeedConfig = R"({
  "cluster": {"worker": ["localhost:12345", "localhost:23456"], "ps": ["localhost:34567"]},
  "task": {"type": "worker", "index": 1}
})";

TEST(TFConfigClusterResolver, ParsesTheSeedConfigWithWorkersAndPs) {
  auto r = TFConfigClusterResolver::from_string(kSeedConfig);
  const auto spec = r.cluster_spec();
  EXPECT_THAT(spec.jobs(), ElementsAre("worker", "ps"));
  EXPECT_EQ(spec.task_address("ps", 0), "localhost:34567");
  EXPECT_EQ(r.task_type(), "worker");
  EXPECT_EQ(r.task_id(), 1);
  EXPECT_EQ(r.rpc_layer(), std::nullopt);
  EXPECT_EQ(r.master(), "localhost:23456");
  EXPECT_EQ(r.master("ps", 0, "grpc"), "grpc://localhost:34567");
  EXPECT_TRUE(r.num_accelerators().empty());
}

TEST(TFConfigClusterResolver, MissingVariableIsAnEmptyConfig) {
  ScopedTfConfig env(std::nullopt);
  TFConfigClusterResolver r;
  EXPECT_TRUE(r.cluster_spec().empty());
  EXPECT_EQ(r.task_type(), std::nullopt);
  EXPECT_EQ(r.task_id(), std::nullopt);
  EXPECT_EQ(r.master(), "");
}

TEST(TFConfigClusterResolver, ReadsTheVariableOnEveryCall) {
  ScopedTfConfig env(
      R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}})");
  TFConfigClusterResolver r;
  EXPECT_EQ(r.task_id(), 0);
  env.apply(
      R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc"})");
  EXPECT_EQ(r.task_id(), 1);
  EXPECT_EQ(r.master(), "grpc://b:1");
}

TEST(TFConfigClusterResolver, InvalidJsonNamesTfConfigAndThePosition) {
  const std::string m = invalid_argument_message(R"({"cluster": {"worker": ["a:1",]}})");
  EXPECT_THAT(m, HasSubstr("TF_CONFIG: invalid JSON at byte"));
  EXPECT_THAT(m, HasSubstr("column"));
}

TEST(TFConfigClusterResolver, InvalidFieldsAreNamed) {
  EXPECT_THAT(invalid_argument_message("[1]"), HasSubstr("TF_CONFIG: expected a JSON object"));
  EXPECT_THAT(invalid_argument_message(R"({"cluster": ["a:1"]})"), HasSubstr("\"cluster\""));
  EXPECT_THAT(invalid_argument_message(R"({"cluster": {"worker": "a:1"}})"),
              HasSubstr("job 'worker'"));
  EXPECT_THAT(invalid_argument_message(R"({"task": "worker"})"),
              HasSubstr("\"task\" to be an object"));
  EXPECT_THAT(invalid_argument_message(R"({"task": {"type": 3}})"), HasSubstr("\"task.type\""));
  EXPECT_THAT(invalid_argument_message(R"({"task": {"type": "worker", "index": 1.5}})"),
              HasSubstr("\"task.index\" to be an integer, got 1.5"));
  EXPECT_THAT(invalid_argument_message(R"({"task": {"type": "worker", "index": "one"}})"),
              HasSubstr("\"task.index\" to be an integer, got \"one\""));
  EXPECT_THAT(invalid_argument_message(R"({"rpc_layer": 1})"), HasSubstr("\"rpc_layer\""));
  EXPECT_THAT(invalid_argument_message(R"({"session_master": []})"),
              HasSubstr("\"session_master\""));
}

TEST(TFConfigClusterResolver, TaskTypeNotInTheClusterIsInvalid) {
  EXPECT_THAT(invalid_argument_message(
                  R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}})"),
              HasSubstr("\"task.type\" 'chief' is not a job of the cluster"));
}

TEST(TFConfigClusterResolver, TaskIndexOutOfRangeIsInvalid) {
  EXPECT_THAT(
      invalid_argument_message(
          R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 2}})"),
      HasSubstr("\"task.index\" 2 is out of range for job 'worker'"));
}

TEST(TFConfigClusterResolver, AcceptsAnIntegerStringIndexAndAnEvaluatorOutsideTheCluster) {
  auto r = TFConfigClusterResolver::from_string(
      R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": "1"}})");
  EXPECT_EQ(r.task_id(), 1);
  auto e = TFConfigClusterResolver::from_string(
      R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "evaluator", "index": 0}})");
  EXPECT_EQ(e.task_type(), "evaluator");
}

TEST(TFConfigClusterResolver, ConstructorValuesAndSettersOverrideTfConfig) {
  auto r = TFConfigClusterResolver::from_string(
      kSeedConfig, {.task_type = "ps", .task_id = 0, .rpc_layer = "grpc", .environment = "google"});
  EXPECT_EQ(r.task_type(), "ps");
  EXPECT_EQ(r.task_id(), 0);
  EXPECT_EQ(r.environment(), "google");
  EXPECT_EQ(r.master(), "grpc://localhost:34567");
  r.set_task_type("worker");
  r.set_task_id(0);
  EXPECT_EQ(r.master(), "grpc://localhost:12345");
}

TEST(TFConfigClusterResolver, MasterIsSessionMasterOrEmptyForASingleTask) {
  EXPECT_EQ(TFConfigClusterResolver::from_string(
                R"({"session_master": "grpc://m:1", "cluster": {"worker": ["a:1", "b:1"]}})")
                .master(),
            "grpc://m:1");
  EXPECT_EQ(TFConfigClusterResolver::from_string(
                R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}})")
                .master(),
            "");
  EXPECT_THROW(
      TFConfigClusterResolver::from_string(R"({"cluster": {"worker": ["a:1", "b:1"]}})").master(),
      InvalidArgumentError);
}

TEST(SimpleClusterResolver, ReturnsItsOptionsAndFormatsMasters) {
  train::ClusterSpec spec({{"worker", {"localhost:12345", "localhost:23456"}}});
  SimpleClusterResolver r(spec, {.master = "m:1",
                                 .task_type = "worker",
                                 .task_id = 1,
                                 .environment = "google",
                                 .num_accelerators = {{"GPU", 2}},
                                 .rpc_layer = "grpc"});
  EXPECT_EQ(r.cluster_spec(), spec);
  EXPECT_EQ(r.master(), "grpc://m:1");
  EXPECT_EQ(r.master("worker", 0), "grpc://localhost:12345");
  EXPECT_EQ(r.master("worker", 1, "grpc+verbs"), "grpc+verbs://localhost:23456");
  EXPECT_EQ(r.task_type(), "worker");
  EXPECT_EQ(r.task_id(), 1);
  EXPECT_EQ(r.environment(), "google");
  EXPECT_EQ(r.num_accelerators(), (std::map<std::string, int>{{"GPU", 2}}));
  EXPECT_THROW(r.master("ps", 0), InvalidArgumentError);
}

TEST(SimpleClusterResolver, DefaultsMatchTensorFlow) {
  SimpleClusterResolver r(train::ClusterSpec({{"worker", {"a:1"}}}));
  EXPECT_EQ(r.master(), "");
  EXPECT_EQ(r.task_type(), std::nullopt);
  EXPECT_EQ(r.task_id(), std::nullopt);
  EXPECT_EQ(r.rpc_layer(), std::nullopt);
  EXPECT_EQ(r.environment(), "");
  EXPECT_TRUE(r.num_accelerators().empty());
}

}  // namespace
}  // namespace strata::distribute::cluster_resolver
