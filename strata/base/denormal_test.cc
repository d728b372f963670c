#include "strata/base/denormal.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cfloat>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "strata/base/thread_pool.h"

namespace strata {
namespace {

// The smallest normal float32 halved: 2^-127, a denormal (unless flushed).
// `volatile` keeps the compiler from folding the product at compile time, so
// the processor's mode decides the result.
float halve_smallest_normal() {
  volatile float smallest = FLT_MIN;  // 2^-126
  volatile float half = 0.5f;
  return smallest * half;
}

// A denormal input: 2^-127 written bit by bit (exponent 0, top mantissa bit).
float denormal_input() {
  const uint32_t bits = 0x00400000u;
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Denormal * 1 reads the input as zero under DAZ.
float times_one(float x) {
  volatile float v = x;
  volatile float one = 1.0f;
  return v * one;
}

class DenormalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!denormal_flushing_supported())
      GTEST_SKIP() << "no flush-to-zero control on this processor";
  }
};

// TensorFlow (internal, no Python API): {tsl::port::ScopedFlushDenormal flush; ...}
// sets FTZ and DAZ and restores the previous mode at the end of the block; its
// thread pools' threads run under one for their whole life.
TEST_F(DenormalTest, ScopeFlushesOnTheCallingThreadAndRestoresTheMode) {
  // The thread starts in IEEE mode: gtest's main thread is not a runtime thread.
  ASSERT_EQ(get_denormal_state(), DenormalState{});
  EXPECT_EQ(halve_smallest_normal(), 0x1p-127f);
  EXPECT_EQ(times_one(denormal_input()), 0x1p-127f);
  {
    ScopedFlushDenormal flush;
    EXPECT_EQ(get_denormal_state(), (DenormalState{true, true}));
    EXPECT_EQ(halve_smallest_normal(), 0.0f);           // FTZ: the denormal result is flushed
    EXPECT_EQ(times_one(denormal_input()), 0.0f);       // DAZ: the denormal input reads as 0
    EXPECT_EQ(FLT_MIN * times_one(2.0f), 2 * FLT_MIN);  // normal numbers are untouched
    {
      ScopedFlushDenormal nested;  // already set: the inner scope changes nothing
      EXPECT_EQ(halve_smallest_normal(), 0.0f);
    }
    EXPECT_EQ(halve_smallest_normal(), 0.0f);  // the outer scope still holds
  }
  EXPECT_EQ(get_denormal_state(), DenormalState{});
  EXPECT_EQ(halve_smallest_normal(), 0x1p-127f);
}

TEST_F(DenormalTest, ScopeRestoresAModeThatWasAlreadyPartlySet) {
  ASSERT_TRUE(set_denormal_state({.flush_to_zero = true, .denormals_are_zero = false}) ||
              !denormal_flushing_supported());
#if defined(__x86_64__)
  {
    ScopedFlushDenormal flush;
    EXPECT_EQ(get_denormal_state(), (DenormalState{true, true}));
  }
  EXPECT_EQ(get_denormal_state(), (DenormalState{true, false}));
#endif
  set_denormal_state({});
}

TEST_F(DenormalTest, PoolThreadsFlushDenormals) {
  ThreadPool pool(3);
  // A submitted task that a pool thread has started: wait() only waits for it
  // (it would run a task nobody had started on this thread).
  std::atomic<bool> started{false};
  float result = -1;
  DenormalState state;
  TaskHandle task = pool.submit([&] {
    state = get_denormal_state();
    result = halve_smallest_normal();
    started = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!started && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ASSERT_TRUE(started) << "no pool thread took the task within 30 s";
  task.wait();
  EXPECT_EQ(state, (DenormalState{true, true}));
  EXPECT_EQ(result, 0.0f);

  // parallel_for: chunks on the workers flush; chunks the caller runs keep the
  // caller's (IEEE) mode, as it is not inside a scope.
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<float> out(256, -1.0f);
  std::vector<std::thread::id> ran_on(256);
  pool.parallel_for(256, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      ran_on[i] = std::this_thread::get_id();
      out[i] = halve_smallest_normal();
    }
  });
  for (size_t i = 0; i < out.size(); ++i) {
    if (ran_on[i] == caller) {
      EXPECT_EQ(out[i], 0x1p-127f) << i;
    } else {
      EXPECT_EQ(out[i], 0.0f) << i;
    }
  }
  EXPECT_EQ(get_denormal_state(), DenormalState{});  // the caller's mode is untouched
  {
    ScopedFlushDenormal flush;  // with the caller inside a scope, every chunk flushes
    pool.parallel_for(256, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = halve_smallest_normal();
    });
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], 0.0f) << i;
  }
}

}  // namespace
}  // namespace strata
