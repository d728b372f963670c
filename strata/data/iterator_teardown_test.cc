// Destroying an iterator mid-flight: the destructor of a parallel-map
// or prefetch iterator stops its threads and joins them within a bound, waiting
// for at most the user calls already running, and no user function runs after it
// returned. The bounds are generous (CI is loaded, sanitizers are slow); a
// destructor that kept producing or failed to wake its threads exceeds them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "strata/base/mutex.h"
#include "strata/data/dataset.h"

namespace strata::data {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kSlowCall = 100ms;
constexpr auto kTeardownBound = 2s;

// Counts the calls of a user function that sleeps kSlowCall.
struct SlowCalls {
  std::atomic<int> started{0};
  std::atomic<int> running{0};
  void run() {
    ++started;
    ++running;
    std::this_thread::sleep_for(kSlowCall);
    --running;
  }
};

// Destroys `it` on another thread; fails the test if that takes longer than
// `bound`, then calls `unblock` (which must let the destructor finish) and
// waits for it. Returns the time the destructor took.
Clock::duration destroy_within(std::unique_ptr<Iterator> it, Clock::duration bound,
                               const std::function<void()>& unblock = {}) {
  const auto t0 = Clock::now();
  auto done = std::async(std::launch::async, [&it] { it.reset(); });
  if (done.wait_for(bound) != std::future_status::ready) {
    ADD_FAILURE() << "iterator destructor did not return within "
                  << std::chrono::duration_cast<std::chrono::milliseconds>(bound).count() << " ms";
    if (unblock) unblock();
    done.wait();
  }
  return Clock::now() - t0;
}

// Waits (bounded) until pred() holds.
template <typename Pred>
bool eventually(Pred pred, Clock::duration limit = 10s) {
  const auto deadline = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

Element scalar(int64_t v) { return Element{constant(v)}; }

TEST(IteratorTeardown, ParallelMapWithASlowFnStopsPromptlyAndRunsNoFnAfterwards) {
  for (bool deterministic : {true, false}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "non-deterministic");
    SlowCalls calls;
    auto ds = Dataset::range(1'000'000).map(
        [&calls](const Element& e) {
          calls.run();
          return e;
        },
        {.num_parallel_calls = 4, .deterministic = deterministic});
    auto it = std::make_unique<Iterator>(ds.iter());
    it->get_next();
    it->get_next();
    ASSERT_TRUE(eventually([&] { return calls.running.load() > 0; }));  // workers are mid-fn
    destroy_within(std::move(it), kTeardownBound);
    EXPECT_EQ(calls.running.load(), 0) << "a map fn was still running after the destructor";
    const int started = calls.started.load();
    // At most num_parallel_calls results are outstanding beyond the 2 consumed.
    EXPECT_LE(started, 2 + 4);
    std::this_thread::sleep_for(3 * kSlowCall);
    EXPECT_EQ(calls.started.load(), started) << "a map fn started after the destructor returned";
  }
}

TEST(IteratorTeardown, ParallelMapDropsAnInputPulledDuringDestructionUnmapped) {
  // The generator's third call blocks until released; the destructor must wait
  // for it (user code is never interrupted) but must not map what it returns.
  Mutex mu;
  CondVar cv;
  bool blocked = false, release = false;
  std::atomic<int> pulls{0}, mapped{0};
  auto ds = Dataset::from_generator(
                [&]() -> GeneratorFn {
                  return [&]() -> std::optional<Element> {
                    const int n = ++pulls;
                    if (n == 3) {
                      MutexLock l(mu);
                      blocked = true;
                      cv.notify_all();
                      cv.wait(mu, [&] { return release; });
                    }
                    return scalar(n);
                  };
                },
                {TensorSpec({}, int64)})
                .map(
                    [&](const Element& e) {
                      ++mapped;
                      return e;
                    },
                    {.num_parallel_calls = 2});
  auto it = std::make_unique<Iterator>(ds.iter());
  EXPECT_EQ(it->get_next()[0].item<int64_t>(), 1);
  {
    MutexLock l(mu);
    ASSERT_TRUE(cv.wait_for(mu, 10s, [&] { return blocked; }));
  }
  ASSERT_TRUE(eventually([&] { return mapped.load() == 2; }));  // inputs 1 and 2
  auto unblock = [&] {
    {
      MutexLock l(mu);
      release = true;
    }
    cv.notify_all();
  };
  std::atomic<bool> destroying{false};
  auto done = std::async(std::launch::async, [&] {
    destroying = true;
    it.reset();
  });
  ASSERT_TRUE(eventually([&] { return destroying.load(); }));
  // The destructor must not return while a worker is inside the generator.
  EXPECT_EQ(done.wait_for(300ms), std::future_status::timeout);
  unblock();
  EXPECT_EQ(done.wait_for(kTeardownBound), std::future_status::ready);
  done.wait();
  EXPECT_EQ(pulls.load(), 3);
  EXPECT_EQ(mapped.load(), 2) << "the input pulled during destruction was mapped";
}

TEST(IteratorTeardown, PrefetchWithAFullBufferAndABlockedProducerStopsPromptly) {
  std::atomic<int> pulls{0};
  auto ds = Dataset::from_generator(
                [&]() -> GeneratorFn {
                  return [&]() -> std::optional<Element> { return scalar(++pulls); };
                },
                {TensorSpec({}, int64)})
                .prefetch(4);
  auto it = std::make_unique<Iterator>(ds.iter());
  EXPECT_EQ(it->get_next()[0].item<int64_t>(), 1);
  // One consumed + a full buffer of 4; then the producer blocks.
  ASSERT_TRUE(eventually([&] { return pulls.load() == 5; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(pulls.load(), 5) << "the producer ran past the buffer's capacity";
  destroy_within(std::move(it), kTeardownBound);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(pulls.load(), 5) << "the producer pulled after the destructor returned";
}

TEST(IteratorTeardown, PrefetchInsideASlowUpstreamWaitsOnlyForTheCallInProgress) {
  SlowCalls calls;
  int64_t n = 0;
  auto ds = Dataset::from_generator(
                [&]() -> GeneratorFn {
                  return [&]() -> std::optional<Element> {
                    calls.run();
                    return scalar(n++);
                  };
                },
                {TensorSpec({}, int64)})
                .prefetch(8);
  auto it = std::make_unique<Iterator>(ds.iter());
  EXPECT_EQ(it->get_next()[0].item<int64_t>(), 0);
  ASSERT_TRUE(
      eventually([&] { return calls.running.load() > 0; }));  // the producer is inside a call
  const int started_before = calls.started.load();
  destroy_within(std::move(it), kTeardownBound);
  EXPECT_EQ(calls.running.load(), 0);
  const int started = calls.started.load();
  // The call in progress finished; at most one more had begun before the
  // destructor's stop request (a producer filling its 8 slots would start 8).
  EXPECT_LE(started, started_before + 1);
  std::this_thread::sleep_for(3 * kSlowCall);
  EXPECT_EQ(calls.started.load(), started)
      << "the upstream was called after the destructor returned";
}

TEST(IteratorTeardown, PrefetchOverAParallelMapAndTheReverseStopPromptly) {
  for (bool prefetch_outside : {true, false}) {
    SCOPED_TRACE(prefetch_outside ? "map.prefetch" : "prefetch.map");
    SlowCalls calls;
    auto fn = [&calls](const Element& e) {
      calls.run();
      return e;
    };
    auto src = Dataset::range(1'000'000);
    auto ds = prefetch_outside ? src.map(fn, {.num_parallel_calls = 3}).prefetch(AUTOTUNE)
                               : src.prefetch(2).map(fn, {.num_parallel_calls = 3});
    auto it = std::make_unique<Iterator>(ds.iter());
    for (int i = 0; i < 3; ++i) EXPECT_EQ(it->get_next()[0].item<int64_t>(), i);
    ASSERT_TRUE(eventually([&] { return calls.running.load() > 0; }));
    destroy_within(std::move(it), kTeardownBound);
    EXPECT_EQ(calls.running.load(), 0);
    const int started = calls.started.load();
    std::this_thread::sleep_for(3 * kSlowCall);
    EXPECT_EQ(calls.started.load(), started) << "a map fn started after the destructor returned";
  }
}

}  // namespace
}  // namespace strata::data
