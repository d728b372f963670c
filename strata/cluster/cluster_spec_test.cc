#include "strata/cluster/cluster_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"

namespace strata::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename Fn>
std::string invalid_argument_message(Fn fn) {
  try {
    fn();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InvalidArgumentError";
  return "";
}

TEST(ClusterSpec, DenseJobsKeepInsertionOrderAndTaskPositions) {
  ClusterSpec spec(
      {{"worker", {"localhost:12345", "localhost:23456"}}, {"ps", {"localhost:34567"}}});
  EXPECT_THAT(spec.jobs(), ElementsAre("worker", "ps"));
  EXPECT_EQ(spec.num_tasks("worker"), 2u);
  EXPECT_THAT(spec.task_indices("worker"), ElementsAre(0, 1));
  EXPECT_EQ(spec.task_address("worker", 1), "localhost:23456");
  EXPECT_THAT(spec.job_tasks("ps"), ElementsAre("localhost:34567"));
  EXPECT_TRUE(static_cast<bool>(spec));
}

TEST(ClusterSpec, SparseJobsReportSortedIndicesAndHoles) {
  ClusterSpec spec({{"worker", {{3, "h3:1"}, {1, "h1:1"}}}});
  EXPECT_THAT(spec.task_indices("worker"), ElementsAre(1, 3));
  EXPECT_EQ(spec.num_tasks("worker"), 2u);
  EXPECT_THAT(spec.job_tasks("worker"), ElementsAre("", "h1:1", "", "h3:1"));
  EXPECT_FALSE(spec.as_dict()[0].second.is_dense());
}

TEST(ClusterSpec, UnknownJobIsInvalidArgumentNamingTheJob) {
  ClusterSpec spec({{"worker", {"a:1"}}});
  EXPECT_EQ(invalid_argument_message([&] { spec.num_tasks("chief"); }),
            "No such job in cluster: 'chief'");
  EXPECT_THAT(invalid_argument_message([&] { spec.task_address("ps", 0); }), HasSubstr("'ps'"));
}

TEST(ClusterSpec, UnknownTaskIndexNamesTheIndexAndJob) {
  ClusterSpec spec({{"worker", {"a:1"}}});
  EXPECT_EQ(invalid_argument_message([&] { spec.task_address("worker", 4); }),
            "No task with index 4 in job 'worker'");
}

TEST(ClusterSpec, EmptySpecIsFalseAndEqualToDefault) {
  ClusterSpec empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_FALSE(static_cast<bool>(empty));
  EXPECT_EQ(empty, ClusterSpec::from_json("{}"));
}

TEST(ClusterSpec, EqualityComparesTasksAndIgnoresJobOrder) {
  ClusterSpec a({{"worker", {"a:1"}}, {"ps", {"b:1"}}});
  ClusterSpec b({{"ps", {"b:1"}}, {"worker", {"a:1"}}});
  ClusterSpec c({{"ps", {"b:1"}}, {"worker", {"a:2"}}});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(ClusterSpec({{"worker", {"a:1", "b:1"}}}),
            ClusterSpec({{"worker", {{0, "a:1"}, {1, "b:1"}}}}));
}

TEST(ClusterSpec, JsonRoundTripKeepsDenseAndSparseJobsInOrder) {
  ClusterSpec spec({{"worker", {"a:1", "b:1"}}, {"ps", {{2, "c:1"}}}, {"evaluator", {}}});
  const std::string json = spec.to_json();
  EXPECT_EQ(json, R"({"worker":["a:1","b:1"],"ps":{"2":"c:1"},"evaluator":[]})");
  const ClusterSpec back = ClusterSpec::from_json(json);
  EXPECT_EQ(back, spec);
  EXPECT_THAT(back.jobs(), ElementsAre("worker", "ps", "evaluator"));
}

TEST(ClusterSpec, FromJsonCoercesObjectKeysWithInt) {
  const ClusterSpec spec = ClusterSpec::from_json(R"({"worker": {"0": "a:1", " 5": "b:1"}})");
  EXPECT_THAT(spec.task_indices("worker"), ElementsAre(0, 5));
}

TEST(ClusterSpec, FromJsonNamesTheOffendingJobOrField) {
  EXPECT_THAT(invalid_argument_message([] { ClusterSpec::from_json(R"(["a:1"])"); }),
              HasSubstr("must be a dictionary mapping one or more job names"));
  EXPECT_THAT(invalid_argument_message([] { ClusterSpec::from_json(R"({"worker": "a:1"})"); }),
              HasSubstr("job 'worker'"));
  EXPECT_THAT(invalid_argument_message([] { ClusterSpec::from_json(R"({"worker": ["a:1", 7]})"); }),
              HasSubstr("job 'worker' task 1: expected a string address, got 7"));
  EXPECT_THAT(invalid_argument_message([] { ClusterSpec::from_json(R"({"ps": {"x": "a:1"}})"); }),
              HasSubstr("got 'x'"));
  EXPECT_THAT(invalid_argument_message([] { ClusterSpec::from_json(R"({"ps": )"); }),
              HasSubstr("invalid JSON"));
}

TEST(ClusterSpec, ConstructionRejectsDuplicateJobsEmptyAddressesAndNegativeIndices) {
  EXPECT_THAT(invalid_argument_message([] {
                ClusterSpec({{"worker", {"a:1"}}, {"worker", {"b:1"}}});
              }),
              HasSubstr("job 'worker' is given twice"));
  EXPECT_THAT(invalid_argument_message([] {
                ClusterSpec({{"worker", {""}}});
              }),
              HasSubstr("task 0"));
  EXPECT_THAT(invalid_argument_message([] {
                ClusterSpec({{"ps", {{-1, "a:1"}}}});
              }),
              HasSubstr("got -1"));
}

}  // namespace
}  // namespace strata::train
