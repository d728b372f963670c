// What config::enable_op_determinism() changes in the kernels: the ranges a
// kernel's parallel_for hands out and the thread count a GEMM is split for
// stop depending on the device's pool.
#include "strata/kernels/internal/kernel_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "strata/base/mutex.h"
#include "strata/core/config.h"
#include "strata/core/device.h"
#include "strata/testing/logical_devices.h"

namespace strata::kernels {
namespace {

const std::vector<int> kThreads = {1, 2, 7};

class KernelSplitTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(kThreads); }
  void TearDown() override {
    config::disable_op_determinism();
    strata::internal::reset_runtime_for_testing();
  }

  // The sorted ranges parallel_for gives fn on each device, and the thread
  // count a GEMM would be split for there.
  struct Split {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    int gemm_threads = 0;
  };
  static std::vector<Split> splits(int64_t n, int64_t min_chunk) {
    std::vector<Split> out;
    for (const config::LogicalDevice& d : config::list_logical_devices("CPU")) {
      DeviceScope scope(find_device(d.name));
      Mutex mu;
      Split split;
      internal::parallel_for(n, min_chunk, [&](int64_t begin, int64_t end) {
        MutexLock lock(mu);
        split.ranges.emplace_back(begin, end);
      });
      std::sort(split.ranges.begin(), split.ranges.end());
      split.gemm_threads = internal::num_threads();
      out.push_back(std::move(split));
    }
    return out;
  }
};

TEST_F(KernelSplitTest, WithoutTheFlagTheSplitFollowsThePool) {
  // The pools of 1 and 7 threads cut 300001 elements differently, which is
  // what lets a kernel's bits depend on the thread count.
  const std::vector<Split> s = splits(300001, 1024);
  EXPECT_EQ(s[0].ranges.size(), 1u);
  EXPECT_NE(s[0].ranges, s[2].ranges);
  EXPECT_EQ(s[0].gemm_threads, 1);
  EXPECT_EQ(s[2].gemm_threads, 7);
}

TEST_F(KernelSplitTest, UnderTheFlagEveryPoolGetsTheSameRangesAndGemmSplit) {
  // tf.config.experimental.enable_op_determinism()
  config::enable_op_determinism();
  for (const auto& [n, min_chunk] :
       std::vector<std::pair<int64_t, int64_t>>{{300001, 1024}, {100, 1}, {5000, 4096}}) {
    const std::vector<Split> s = splits(n, min_chunk);
    for (size_t d = 1; d < s.size(); ++d) {
      EXPECT_EQ(s[d].ranges, s[0].ranges) << n << " elements, " << kThreads[d] << " threads";
      EXPECT_EQ(s[d].gemm_threads, s[0].gemm_threads);
    }
    // The ranges tile [0, n) in at most 64 chunks of at least min_chunk.
    EXPECT_LE(s[0].ranges.size(), 64u);
    int64_t next = 0;
    for (const auto& [begin, end] : s[0].ranges) {
      EXPECT_EQ(begin, next);
      EXPECT_TRUE(end - begin >= min_chunk || end == n);
      next = end;
    }
    EXPECT_EQ(next, n);
  }
}

}  // namespace
}  // namespace strata::kernels
