#include "strata/base/logging.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace strata {
namespace {

using ::testing::HasSubstr;

// Restores the threshold a test changes.
class LogLevelGuard {
 public:
  LogLevelGuard() : saved_(min_log_level()) {}
  ~LogLevelGuard() { set_min_log_level(saved_); }
  LogLevelGuard(const LogLevelGuard&) = delete;
  LogLevelGuard& operator=(const LogLevelGuard&) = delete;

 private:
  int saved_;
};

TEST(Logging, LinesHaveOneFormat) {
  // 2026-12-04T03:00:00.123Z
  const auto time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1796353200123));
  EXPECT_EQ(internal::format_log_line(LogSeverity::WARNING, time, "strata/keras/model.cc", 42,
                                      "input ran out"),
            "W 2026-12-04T03:00:00.123Z model.cc:42] input ran out\n");
  EXPECT_EQ(internal::format_log_line(LogSeverity::INFO, time, "x.cc", 1, "a"),
            "I 2026-12-04T03:00:00.123Z x.cc:1] a\n");
  EXPECT_EQ(internal::format_log_line(LogSeverity::ERROR, time, "x.cc", 7, ""),
            "E 2026-12-04T03:00:00.123Z x.cc:7] \n");
}

TEST(Logging, WritesToStderrWithTheCallersFileAndLine) {
  LogLevelGuard guard;
  set_min_log_level(0);
  ::testing::internal::CaptureStderr();
  const int line = __LINE__ + 1;
  STRATA_LOG(WARNING, "value ", 3, " is odd");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(std::regex_match(
      err, std::regex("W \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z logging_test\\.cc:" +
                      std::to_string(line) + "\\] value 3 is odd\n")))
      << err;
}

TEST(Logging, TheThresholdDropsLowerSeveritiesWithoutEvaluatingThem) {
  LogLevelGuard guard;
  set_min_log_level(2);
  int evaluated = 0;
  auto count = [&] { return ++evaluated; };
  ::testing::internal::CaptureStderr();
  STRATA_LOG(INFO, "info ", count());
  STRATA_LOG(WARNING, "warning ", count());
  STRATA_LOG(ERROR, "error ", count());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(evaluated, 1);
  EXPECT_THAT(err, HasSubstr("] error 1\n"));
  EXPECT_THAT(err, ::testing::Not(HasSubstr("info")));
  EXPECT_THAT(err, ::testing::Not(HasSubstr("warning")));

  set_min_log_level(3);
  EXPECT_FALSE(log_enabled(LogSeverity::ERROR));
  set_min_log_level(99);
  EXPECT_EQ(min_log_level(), 3);
  set_min_log_level(-5);
  EXPECT_EQ(min_log_level(), 0);
  EXPECT_TRUE(log_enabled(LogSeverity::INFO));
}

TEST(Logging, EnvironmentValuesAreTheDigitsZeroToThree) {
  EXPECT_EQ(internal::parse_min_log_level("0"), 0);
  EXPECT_EQ(internal::parse_min_log_level("3"), 3);
  EXPECT_EQ(internal::parse_min_log_level(nullptr), -1);
  EXPECT_EQ(internal::parse_min_log_level(""), -1);
  EXPECT_EQ(internal::parse_min_log_level("4"), -1);
  EXPECT_EQ(internal::parse_min_log_level("1x"), -1);
  EXPECT_EQ(internal::parse_min_log_level("WARNING"), -1);
}

TEST(Logging, LinesFromManyThreadsNeverInterleave) {
  LogLevelGuard guard;
  set_min_log_level(0);
  constexpr int kThreads = 8, kLines = 200;
  const std::string payload(300, 'x');
  ::testing::internal::CaptureStderr();
  {
    std::vector<std::jthread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kLines; ++i) STRATA_LOG(INFO, "t", t, " ", payload, " end");
      });
    }
  }
  std::istringstream lines(::testing::internal::GetCapturedStderr());
  const std::regex whole("I \\S+ logging_test\\.cc:\\d+\\] t\\d x{300} end");
  int count = 0;
  for (std::string l; std::getline(lines, l); ++count) {
    ASSERT_TRUE(std::regex_match(l, whole)) << "line " << count << ": " << l;
  }
  EXPECT_EQ(count, kThreads * kLines);
}

}  // namespace
}  // namespace strata
