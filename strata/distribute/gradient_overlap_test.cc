// The communication thread under the overlapped gradient all-reduce
// (internal/gradient_overlap.h): order, failure propagation, bounded waits.
#include "strata/distribute/internal/gradient_overlap.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "strata/base/errors.h"
#include "strata/core/device.h"

namespace strata::distribute::internal {
namespace {

const Device& cpu() { return current_device(); }

TEST(CommunicationThreadTest, RunsJobsInTheOrderTheyWerePosted) {
  CommunicationThread thread(cpu(), "test thread");
  std::vector<int> order;  // written by the thread only, read after the waits
  uint64_t last = 0;
  for (int i = 0; i < 5; ++i) last = thread.post([&order, i] { order.push_back(i); });
  EXPECT_EQ(last, 5u);
  thread.wait(last, std::chrono::seconds(10), "the test");
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(CommunicationThreadTest, AFailedJobFailsTheLaterOnesWithTheSameErrorUntilCleared) {
  CommunicationThread thread(cpu(), "test thread");
  std::atomic<int> ran{0};
  const uint64_t first = thread.post([&] { ++ran; });
  const uint64_t failing = thread.post([] { throw UnavailableError("rank 1 went away"); });
  const uint64_t later = thread.post([&] { ++ran; });
  thread.wait(first, std::chrono::seconds(10), "the test");  // before the failure: fine
  try {
    thread.wait(later, std::chrono::seconds(10), "the test");
    FAIL() << "expected UnavailableError";
  } catch (const UnavailableError& e) {
    EXPECT_STREQ(e.what(), "rank 1 went away");
  }
  EXPECT_THROW(thread.wait(failing, std::chrono::seconds(10), "the test"), UnavailableError);
  EXPECT_EQ(ran.load(), 1);  // the job after the failure did not run
  thread.clear_failure();
  const uint64_t again = thread.post([&] { ++ran; });
  thread.wait(again, std::chrono::seconds(10), "the test");
  EXPECT_EQ(ran.load(), 2);
}

TEST(CommunicationThreadTest, AWaitForAStuckJobEndsAtTheStallTimeoutNamingTheWaiter) {
  std::atomic<bool> release{false};
  CommunicationThread thread(cpu(), "replica 3's communication thread");
  // Released on every way out of the test, so that a failed expectation
  // cannot leave the thread's destructor waiting for the stuck job.
  struct Release {
    std::atomic<bool>& flag;
    ~Release() { flag = true; }
  } const release_on_exit{release};
  const uint64_t stuck = thread.post([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  const auto start = std::chrono::steady_clock::now();
  try {
    thread.wait(stuck, std::chrono::milliseconds(200), "replica 3");
    FAIL() << "expected DeadlineExceededError";
  } catch (const DeadlineExceededError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("replica 3 waited 200ms for replica 3's communication thread"),
              std::string::npos)
        << what;
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.2);
  EXPECT_LT(waited, 5.0);
  EXPECT_FALSE(thread.wait_idle(std::chrono::milliseconds(50)));
  release = true;
  EXPECT_TRUE(thread.wait_idle(std::chrono::seconds(10)));
}

}  // namespace
}  // namespace strata::distribute::internal
