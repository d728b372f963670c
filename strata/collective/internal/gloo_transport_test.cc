#include "strata/collective/internal/gloo_transport.h"

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/base/store.h"
#include "strata/base/str_cat.h"

namespace strata::collective::internal {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Clock = StoreAdapter::Clock;

std::string name_of(int p) { return str_cat("/job:worker/task:", p); }

// Rank 1 waits for a key rank 0 would publish later in the rendezvous, and
// rank 0 has abandoned the rendezvous: rank 1's wait ends after a poll with
// UnavailableError naming rank 0 and why, not at its deadline.
TEST(StoreAdapter, AWaitEndsWhenAnotherRankAbandonsTheRendezvous) {
  InMemoryStore store;
  const auto deadline = Clock::now() + 30s;
  StoreAdapter rank0(store, "gloo/0/", deadline, 0, 2, name_of);
  StoreAdapter rank1(store, "gloo/0/", deadline, 1, 2, name_of);
  rank0.abandon("the mesh check of rank 1 failed");
  const auto start = Clock::now();
  try {
    rank1.get("direct/0");
    ADD_FAILURE() << "expected UnavailableError";
  } catch (const UnavailableError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/job:worker/task:0 gave up this rendezvous: the mesh check "
                                    "of rank 1 failed"));
  }
  EXPECT_LT(Clock::now() - start, 5s);
  // wait() of several keys ends the same way; the rank that abandoned is not
  // stopped by its own notice.
  EXPECT_THROW(rank1.wait({"a", "b"}), UnavailableError);
  EXPECT_NO_THROW(rank0.throw_if_abandoned());
  EXPECT_THROW(rank1.throw_if_abandoned(), UnavailableError);
}

TEST(StoreAdapter, AWaitReturnsTheValueOnceAPeerSetsIt) {
  InMemoryStore store;
  StoreAdapter rank0(store, "gloo/0/", Clock::now() + 30s, 0, 2, name_of);
  StoreAdapter rank1(store, "gloo/0/", Clock::now() + 30s, 1, 2, name_of);
  auto waiting = std::async(std::launch::async, [&] { return rank1.get("direct/0"); });
  rank0.set("direct/0", {'o', 'k'});
  EXPECT_EQ(waiting.get(), (std::vector<char>{'o', 'k'}));
  // Keys live under the adapter's prefix.
  EXPECT_TRUE(store.check({"gloo/0/direct/0"}, 1s));
}

TEST(StoreAdapter, WithoutAnAbandonmentTheDeadlineStands) {
  InMemoryStore store;
  StoreAdapter rank1(store, "gloo/0/", Clock::now() + 700ms, 1, 2, name_of);
  const auto start = Clock::now();
  EXPECT_THROW(rank1.get("direct/0"), DeadlineExceededError);
  EXPECT_GE(Clock::now() - start, 600ms);
  EXPECT_LT(Clock::now() - start, 5s);
}

}  // namespace
}  // namespace strata::collective::internal
