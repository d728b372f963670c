#include "strata/base/store.h"

#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"

namespace strata {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST(InMemoryStore, GetBlocksUntilAnotherThreadSets) {
  InMemoryStore store;
  std::jthread writer([&] {
    store.wait({"reader-started"}, 30s);
    store.set("key", to_bytes("value"));
  });
  store.set("reader-started", {});
  EXPECT_EQ(to_string(store.get("key", 30s)), "value");
}

TEST(InMemoryStore, GetTimeoutNamesTheKeyAndTheTimeWaited) {
  InMemoryStore store;
  try {
    store.get("rank/3", 20ms);
    FAIL();
  } catch (const DeadlineExceededError& e) {
    EXPECT_THAT(e.what(), HasSubstr("still missing: [rank/3]"));
    EXPECT_THAT(e.what(), HasSubstr("(timeout 20ms)"));
    EXPECT_THAT(e.what(), HasSubstr("waited "));
  }
}

TEST(InMemoryStore, WaitListsOnlyTheMissingKeys) {
  InMemoryStore store;
  store.set("a", to_bytes("1"));
  try {
    store.wait({"a", "b"}, 10ms);
    FAIL();
  } catch (const DeadlineExceededError& e) {
    EXPECT_THAT(e.what(), HasSubstr("still missing: [b]"));
  }
  store.set("b", {});
  EXPECT_NO_THROW(store.wait({"a", "b"}, 0ms));
}

TEST(InMemoryStore, AddIsAnAtomicCounterAcrossThreads) {
  InMemoryStore store;
  {
    std::vector<std::jthread> threads;
    threads.reserve(8);
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 500; ++i) store.add("count", 1);
      });
    }
  }
  EXPECT_EQ(store.add("count", 0), 4000);
  EXPECT_EQ(to_string(store.get("count", 0ms)), "4000");
  EXPECT_EQ(store.add("count", -4001), -1);
}

TEST(InMemoryStore, AddOnBytesThatAreNotACounterIsInvalid) {
  InMemoryStore store;
  store.set("k", to_bytes("abc"));
  EXPECT_THROW(store.add("k", 1), InvalidArgumentError);
}

TEST(InMemoryStore, CheckReportsWhetherAllKeysAreSet) {
  InMemoryStore store;
  EXPECT_FALSE(store.check({"x"}));
  store.set("x", {});
  EXPECT_TRUE(store.check({"x"}));
  EXPECT_FALSE(store.check({"x", "y"}));
  EXPECT_TRUE(store.check({}));
}

TEST(InMemoryStore, AbortWakesAWaiterWithAbortedError) {
  InMemoryStore store;
  std::jthread aborter([&] {
    store.wait({"waiting"}, 30s);
    store.abort();
  });
  store.set("waiting", {});
  EXPECT_THROW(store.get("never", 60s), AbortedError);
  EXPECT_THROW(store.wait({"never"}, 1ms), AbortedError);
}

}  // namespace
}  // namespace strata
