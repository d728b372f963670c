#include "strata/base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
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

// Sets STRATA_POOL_SPIN_US for one scope and restores what was there.
class ScopedSpinSetting {
 public:
  explicit ScopedSpinSetting(const char* value) {
    if (const char* old = std::getenv("STRATA_POOL_SPIN_US")) old_ = old;
    ::setenv("STRATA_POOL_SPIN_US", value, 1);
  }
  ~ScopedSpinSetting() {
    if (old_) {
      ::setenv("STRATA_POOL_SPIN_US", old_->c_str(), 1);
    } else {
      ::unsetenv("STRATA_POOL_SPIN_US");
    }
  }
  ScopedSpinSetting(const ScopedSpinSetting&) = delete;
  ScopedSpinSetting& operator=(const ScopedSpinSetting&) = delete;

 private:
  std::optional<std::string> old_;
};

TEST(ThreadPool, TheSpinTimeComesFromTheEnvironmentAndABadOneIsNamed) {
  for (const char* bad : {"fast", "-5", "10us", "2000000"}) {
    const ScopedSpinSetting setting(bad);
    try {
      ThreadPool pool(2);
      ADD_FAILURE() << "STRATA_POOL_SPIN_US=" << bad << " was accepted";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
  // Sleeping at once and polling long both give every index exactly once.
  for (const char* good : {"0", "1000"}) {
    const ScopedSpinSetting setting(good);
    ThreadPool pool(2);
    for (int round = 0; round < 50; ++round) {
      std::vector<std::atomic<int>> hits(10000);
      pool.parallel_for(10000, 16, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      for (const auto& h : hits) ASSERT_EQ(h.load(), 1) << "STRATA_POOL_SPIN_US=" << good;
    }
  }
}

// The tasks of run_all / submit below stand for what tf.distribute's TPU
// executor does per logical device: each shard of an op is an independent task
// on its device's threads, the caller waiting for all of them.

constexpr auto kTimeout = std::chrono::seconds(30);

std::vector<std::function<void()>> counting_tasks(int n, std::vector<std::atomic<int>>& runs) {
  std::vector<std::function<void()>> tasks;
  tasks.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) tasks.emplace_back([&runs, i] { runs[i].fetch_add(1); });
  return tasks;
}

TEST(ThreadPool, RunAllRunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int n : {0, 1, 2, 7, 64}) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
      pool.run_all(counting_tasks(n, runs));
      for (const auto& r : runs) ASSERT_EQ(r.load(), 1) << threads << " threads, " << n << " tasks";
    }
  }
}

TEST(ThreadPool, RunAllRethrowsTheLowestNumberedFailureAfterEveryTaskRan) {
  ThreadPool pool(3);
  std::atomic<int> ran{0};
  std::vector<std::function<void()>> tasks;
  tasks.reserve(8);
  for (int i = 0; i < 8; ++i) {
    tasks.emplace_back([&ran, i] {
      ran.fetch_add(1);
      if (i == 5) throw std::out_of_range("task 5");
      if (i == 2) throw InvalidArgumentError("task 2");
    });
  }
  try {
    pool.run_all(tasks);
    FAIL() << "run_all returned although tasks 2 and 5 threw";
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "task 2");
  }
  EXPECT_EQ(ran.load(), 8);
  // A failure of the caller's own task (tasks[0]) is reported the same way.
  tasks[0] = [] { throw DataLossError("task 0"); };
  EXPECT_THROW(pool.run_all(tasks), DataLossError);
}

TEST(ThreadPool, SubmittedTasksRunOnThePoolWithoutAWaiterAlsoAtSizeOne) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::promise<std::thread::id> ran_on;
    TaskHandle task = pool.submit([&] { ran_on.set_value(std::this_thread::get_id()); });
    // Nobody waits on the handle yet: a pool thread (the task thread of a pool
    // of size 1) has to take the task.
    std::future<std::thread::id> id = ran_on.get_future();
    ASSERT_EQ(id.wait_for(kTimeout), std::future_status::ready) << threads << " threads";
    EXPECT_NE(id.get(), std::this_thread::get_id());
    task.wait();
    EXPECT_FALSE(task.valid());
  }
}

TEST(ThreadPool, WaitRethrowsTheTaskExceptionOnce) {
  ThreadPool pool(2);
  TaskHandle task = pool.submit([] { throw UnavailableError("peer gone"); });
  EXPECT_THROW(task.wait(), UnavailableError);
  EXPECT_THROW(task.wait(), FailedPreconditionError);  // the handle is empty now
  EXPECT_THROW(TaskHandle().wait(), FailedPreconditionError);
}

TEST(ThreadPool, AHandleDestroyedUnwaitedRunsItsTaskAndDropsTheError) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::atomic<int> ran{0};
    {
      TaskHandle task = pool.submit([&] {
        ran.fetch_add(1);
        throw InternalError("dropped");
      });
    }
    EXPECT_EQ(ran.load(), 1) << threads << " threads";
    // Move assignment waits for the task the handle held before taking the other.
    TaskHandle a = pool.submit([&] { ran.fetch_add(1); });
    a = pool.submit([&] { ran.fetch_add(10); });
    EXPECT_EQ(ran.load() % 10, 2) << threads << " threads";
    a.wait();
    EXPECT_EQ(ran.load(), 12) << threads << " threads";
  }
}

TEST(ThreadPool, TheCallerRunsEveryTaskWhileThePoolThreadsAreBusy) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    // Occupy every pool thread: the workers and the task thread.
    std::vector<std::promise<void>> started(static_cast<size_t>(threads));
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<int> next{0};
    std::vector<TaskHandle> blockers;
    blockers.reserve(static_cast<size_t>(threads));
    for (int i = 0; i < threads; ++i) {
      blockers.push_back(pool.submit([&] {
        started[static_cast<size_t>(next.fetch_add(1))].set_value();
        // Bounded, so that a broken pool fails the test instead of hanging it.
        if (released.wait_for(kTimeout) != std::future_status::ready) {
          throw DeadlineExceededError("blocker not released");
        }
      }));
    }
    for (auto& s : started) {
      ASSERT_EQ(s.get_future().wait_for(kTimeout), std::future_status::ready)
          << threads << " threads";
    }
    const auto caller = std::this_thread::get_id();
    std::vector<std::thread::id> ran_on(6);
    std::vector<std::function<void()>> tasks;
    for (size_t i = 0; i < ran_on.size(); ++i) {
      tasks.emplace_back([&ran_on, i] { ran_on[i] = std::this_thread::get_id(); });
    }
    pool.run_all(tasks);
    for (const auto& id : ran_on) EXPECT_EQ(id, caller) << threads << " threads";
    release.set_value();
    for (TaskHandle& b : blockers) b.wait();
  }
}

// A task that waits for tasks of its own, on the pool whose worker runs it.
int64_t count_leaves(ThreadPool& pool, int depth) {
  if (depth == 0) {
    std::atomic<int64_t> n{0};
    pool.parallel_for(100, 1, [&](int64_t b, int64_t e) { n += e - b; });
    return n.load() / 100;
  }
  std::vector<std::atomic<int64_t>> counts(3);
  std::vector<std::function<void()>> children;
  for (size_t i = 0; i < counts.size(); ++i) {
    children.emplace_back([&, i] { counts[i] = count_leaves(pool, depth - 1); });
  }
  pool.run_all(children);
  return counts[0] + counts[1] + counts[2];
}

TEST(ThreadPool, NestedRunAllFromPoolWorkersCompletes) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    int64_t leaves = 0;
    // The outermost call itself on a worker (when there is one).
    TaskHandle root = pool.submit([&] { leaves = count_leaves(pool, 4); });
    root.wait();
    EXPECT_EQ(leaves, 81) << threads << " threads";  // 3^4
  }
}

TEST(ThreadPool, ManyConcurrentCallersOfRunAllAndSubmitShareThePool) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  callers.reserve(8);
  for (int c = 0; c < 8; ++c) {
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<std::function<void()>> tasks(
            5, [&] { pool.parallel_for(64, 4, [&](int64_t b, int64_t e) { total += e - b; }); });
        if (c % 2 == 0) {
          pool.run_all(tasks);
        } else {
          std::vector<TaskHandle> handles;
          handles.reserve(tasks.size());
          for (const auto& t : tasks) handles.push_back(pool.submit(t));
          for (TaskHandle& h : handles) h.wait();
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), int64_t{8} * 50 * 5 * 64);
}

}  // namespace
}  // namespace strata
