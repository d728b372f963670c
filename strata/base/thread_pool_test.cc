#include "strata/base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

#include "strata/base/errors.h"

namespace strata {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(10007);
    pool.parallel_for(10007, 10, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (const auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " threads";
  }
}

TEST(ThreadPool, SmallRangesRunInlineAsOneChunk) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.num_chunks(100, 1000), 1);
  EXPECT_EQ(pool.num_chunks(0, 1), 0);
  EXPECT_EQ(pool.num_chunks(1 << 20, 1), 16);
  const auto caller = std::this_thread::get_id();
  pool.parallel_for(100, 1000,
                    [&](int64_t, int64_t) { EXPECT_EQ(std::this_thread::get_id(), caller); });
}

TEST(ThreadPool, UsesWorkerThreads) {
  ThreadPool pool(2);
  std::atomic<int> other{0};
  const auto caller = std::this_thread::get_id();
  // Repeat: a worker must take at least one chunk in some run.
  for (int rep = 0; rep < 200 && other.load() == 0; ++rep) {
    pool.parallel_for(64, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() != caller) other.fetch_add(1);
      volatile double x = 0;
      for (int i = 0; i < 20000; ++i) x = x + i;
    });
  }
  EXPECT_GT(other.load(), 0);
}

TEST(ThreadPool, ChunkExceptionsReachTheCaller) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(1000, 1,
                                 [](int64_t b, int64_t) {
                                   if (b == 0) throw InvalidArgumentError("chunk 0 failed");
                                 }),
               InvalidArgumentError);
  // The pool is still usable afterwards.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 100);
}

TEST(ThreadPool, ConcurrentCallersShareThePool) {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  callers.reserve(4);
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep)
        pool.parallel_for(1000, 7, [&](int64_t b, int64_t e) { total += e - b; });
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 1000);
}

TEST(ThreadPool, RejectsZeroThreads) { EXPECT_THROW(ThreadPool(0), InvalidArgumentError); }

}  // namespace
}  // namespace strata
