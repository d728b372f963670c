#include "strata/core/allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "strata/base/errors.h"
#include "strata/core/tensor.h"

namespace strata {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(CachingAllocator, BlockSizesAreAlignedClassesWithAtMostAQuarterOfSlack) {
  EXPECT_EQ(CachingAllocator::block_size(0), 64u);
  EXPECT_EQ(CachingAllocator::block_size(1), 64u);
  EXPECT_EQ(CachingAllocator::block_size(65), 128u);
  EXPECT_EQ(CachingAllocator::block_size(64 * kKiB), 64 * kKiB);
  EXPECT_EQ(CachingAllocator::block_size(64 * kKiB + 1), 80 * kKiB);
  EXPECT_EQ(CachingAllocator::block_size(100 * kKiB), 112 * kKiB);
  EXPECT_EQ(CachingAllocator::block_size(kMiB + 1), kMiB + kMiB / 4);
  EXPECT_EQ(CachingAllocator::block_size(64 * kMiB), 64 * kMiB);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 10000; ++i) {
    const size_t bytes = rng() % (512 * kMiB);
    const size_t block = CachingAllocator::block_size(bytes);
    ASSERT_GE(block, bytes);
    ASSERT_EQ(block % 64, 0u) << bytes;
    if (bytes >= CachingAllocator::kSmallBlockBytes) {
      ASSERT_LE(block, bytes + bytes / 4) << bytes;
      // Idempotent: a class is its own class.
      ASSERT_EQ(CachingAllocator::block_size(block), block) << bytes;
    }
  }
}

TEST(CachingAllocator, ReuseAfterFreeHandsBackTheAlignedBlock) {
  CachingAllocator a(16 * kMiB);
  void* p = a.allocate(kMiB);
  ASSERT_TRUE(aligned(p));
  std::memset(p, 1, kMiB);
  a.deallocate(p, kMiB);
  EXPECT_EQ(a.stats().cached_bytes, kMiB);
  EXPECT_EQ(a.stats().cached_blocks, 1u);
  // 1 MiB - 100 bytes is in the same class: the freed block comes back.
  void* q = a.allocate(kMiB - 100);
  EXPECT_EQ(q, p);
  EXPECT_TRUE(aligned(q));
  std::memset(q, 2, kMiB - 100);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.cached_bytes, 0u);
  a.deallocate(q, kMiB - 100);
  // Every size, cached or not, fresh or reused, is 64-byte aligned.
  for (size_t bytes :
       {size_t{0}, size_t{1}, size_t{100}, 64 * kKiB - 1, 64 * kKiB, 64 * kKiB + 3, 3 * kMiB + 5}) {
    for (int round = 0; round < 2; ++round) {
      void* r = a.allocate(bytes);
      EXPECT_TRUE(aligned(r)) << bytes;
      std::memset(r, 3, bytes);
      a.deallocate(r, bytes);
    }
  }
  EXPECT_GE(a.stats().hits, 4);
}

TEST(CachingAllocator, LiveBlocksNeverAlias) {
  CachingAllocator a(64 * kMiB);
  std::vector<std::pair<unsigned char*, size_t>> live;
  auto check_disjoint = [&] {
    std::vector<std::pair<unsigned char*, size_t>> sorted = live;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 1; i < sorted.size(); ++i)
      ASSERT_LE(sorted[i - 1].first + sorted[i - 1].second, sorted[i].first);
  };
  auto fill = [&](size_t i) { std::memset(live[i].first, static_cast<int>(i), live[i].second); };
  for (size_t i = 0; i < 16; ++i) {
    const size_t bytes = 256 * kKiB + i * 1000;  // all in one or two classes
    live.emplace_back(static_cast<unsigned char*>(a.allocate(bytes)), bytes);
    fill(i);
  }
  check_disjoint();
  // Free every other block, allocate again: the reused blocks are the freed
  // ones, never one still in use.
  for (size_t i = 0; i < live.size(); i += 2) a.deallocate(live[i].first, live[i].second);
  for (size_t i = 0; i < live.size(); i += 2) {
    live[i].first = static_cast<unsigned char*>(a.allocate(live[i].second));
    fill(i);
  }
  check_disjoint();
  EXPECT_EQ(a.stats().hits, 8);
  for (size_t i = 0; i < live.size(); ++i) {
    for (size_t j = 0; j < live[i].second; j += 4099)
      ASSERT_EQ(live[i].first[j], static_cast<unsigned char>(i)) << "block " << i;
    a.deallocate(live[i].first, live[i].second);
  }
}

TEST(CachingAllocator, SmallBlocksAreCachedAndTheSteadyStateTakesNothingFromTheSystem) {
  CachingAllocator a(kMiB);
  // One "step" of a program: blocks of a few sizes, large and small, held
  // together and freed, in the same order every time.
  const std::vector<size_t> sizes = {4, 40, 512, 512, 4 * kKiB, 100 * kKiB, 64, 3000};
  auto step = [&] {
    std::vector<void*> held;
    for (size_t bytes : sizes) {
      void* p = a.allocate(bytes);
      EXPECT_TRUE(aligned(p)) << bytes;
      std::memset(p, 7, bytes);
      held.push_back(p);
    }
    for (size_t i = 0; i < held.size(); ++i) a.deallocate(held[i], sizes[i]);
  };
  step();
  const AllocatorStats first = a.stats();
  EXPECT_EQ(first.system_allocations, static_cast<int64_t>(sizes.size()));
  EXPECT_EQ(first.cached_blocks, sizes.size());
  for (int i = 0; i < 10; ++i) step();
  const AllocatorStats later = a.stats();
  EXPECT_EQ(later.system_allocations, first.system_allocations);  // none after the first step
  EXPECT_EQ(later.hits, 10 * static_cast<int64_t>(sizes.size()));
  EXPECT_EQ(later.cached_blocks, sizes.size());
  // 4, 40 and 64 bytes share the 64-byte class; a 64-byte request reuses a 4-byte block.
  void* p = a.allocate(4);
  a.deallocate(p, 4);
  EXPECT_EQ(a.allocate(64), p);
  a.deallocate(p, 64);
}

TEST(CachingAllocator, CacheBoundIsRespectedOldestEvictedFirst) {
  CachingAllocator a(kMiB);
  std::vector<void*> blocks;
  blocks.reserve(5);
  for (int i = 0; i < 5; ++i) blocks.push_back(a.allocate(256 * kKiB));
  for (void* p : blocks) a.deallocate(p, 256 * kKiB);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.cached_bytes, kMiB);
  EXPECT_EQ(s.cached_blocks, 4u);
  EXPECT_EQ(s.evictions, 1);
  // The first block freed was the one evicted; the rest come back newest first.
  for (int i = 4; i >= 1; --i) EXPECT_EQ(a.allocate(256 * kKiB), blocks[i]);
  for (int i = 1; i <= 4; ++i) a.deallocate(blocks[i], 256 * kKiB);
  // A 768 KiB block evicts the three oldest 256 KiB blocks to fit.
  void* big = a.allocate(768 * kKiB);
  a.deallocate(big, 768 * kKiB);
  s = a.stats();
  EXPECT_EQ(s.cached_bytes, kMiB);
  EXPECT_EQ(s.cached_blocks, 2u);
  EXPECT_EQ(s.evictions, 4);
  // A block larger than the whole bound is never cached.
  void* huge = a.allocate(2 * kMiB);
  a.deallocate(huge, 2 * kMiB);
  EXPECT_EQ(a.stats().cached_bytes, kMiB);
  a.trim();
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  EXPECT_EQ(a.stats().cached_blocks, 0u);
}

TEST(CachingAllocator, ZeroBoundCachesNothingAndShutdownStopsCaching) {
  CachingAllocator off(0);
  for (int i = 0; i < 3; ++i) off.deallocate(off.allocate(kMiB), kMiB);
  EXPECT_EQ(off.stats().cached_bytes, 0u);
  EXPECT_EQ(off.stats().hits, 0);

  CachingAllocator a(8 * kMiB);
  void* p = a.allocate(kMiB);
  void* q = a.allocate(kMiB);
  a.deallocate(p, kMiB);
  a.shutdown();
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  a.deallocate(q, kMiB);  // freed directly
  EXPECT_EQ(a.stats().cached_bytes, 0u);
}

TEST(CachingAllocator, ConcurrentAllocAndFreeFromThreads) {
  constexpr size_t kBound = 4 * kMiB;
  CachingAllocator a(kBound);
  constexpr int kThreads = 4, kIters = 400;
  // Blocks freed on a thread other than the one that allocated them.
  std::vector<std::vector<std::pair<void*, size_t>>> handoff(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&a, &handoff, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<std::pair<unsigned char*, size_t>> mine;
      for (int i = 0; i < kIters; ++i) {
        const size_t bytes = 64 * kKiB + rng() % (512 * kKiB);
        auto* p = static_cast<unsigned char*>(a.allocate(bytes));
        ASSERT_TRUE(aligned(p));
        std::memset(p, t + 1, bytes);
        mine.emplace_back(p, bytes);
        if (mine.size() > 3 || i == kIters - 1) {
          // Nobody else wrote into a block this thread holds.
          for (const auto& [q, n] : mine) {
            ASSERT_EQ(q[0], t + 1);
            ASSERT_EQ(q[n / 2], t + 1);
            ASSERT_EQ(q[n - 1], t + 1);
          }
          for (size_t j = 1; j < mine.size(); ++j) a.deallocate(mine[j].first, mine[j].second);
          handoff[t].emplace_back(mine[0].first, mine[0].second);
          mine.clear();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    std::thread([&a, &handoff, t] {
      for (const auto& [p, n] : handoff[t]) a.deallocate(p, n);
    }).join();
  }
  const AllocatorStats s = a.stats();
  EXPECT_LE(s.cached_bytes, kBound);
  EXPECT_GT(s.hits, 0);
  EXPECT_EQ(s.hits + s.misses, kThreads * kIters);
}

// Sanitizer allocators abort on an impossible request instead of returning null.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST(CachingAllocator, OutOfMemoryFreesTheCacheThenThrowsResourceExhausted) {
  CachingAllocator a(8 * kMiB);
  a.deallocate(a.allocate(kMiB), kMiB);
  ASSERT_EQ(a.stats().cached_bytes, kMiB);
  const size_t impossible = size_t{1} << 62;
  try {
    a.allocate(impossible);
    ADD_FAILURE() << "allocated 2^62 bytes";
  } catch (const ResourceExhaustedError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(impossible)), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(a.stats().cached_bytes, 0u);
}
#endif

TEST(CachingAllocator, EnvironmentValueIsMiBOrAnError) {
  EXPECT_EQ(CachingAllocator::cache_limit_from_env("0"), 0u);
  EXPECT_EQ(CachingAllocator::cache_limit_from_env("512"), 512 * kMiB);
  for (const char* bad : {"-1", "12x", "lots", " 3"}) {
    try {
      CachingAllocator::cache_limit_from_env(bad);
      ADD_FAILURE() << "no error for " << bad;
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("STRATA_BUFFER_CACHE_MIB"), std::string::npos);
    }
  }
}

TEST(CachingAllocator, TensorBuffersReuseFreedBlocks) {
  CachingAllocator& g = CachingAllocator::global();
  if (g.stats().max_cached_bytes < 16 * kMiB) GTEST_SKIP() << "global buffer cache disabled";
  const void* first = nullptr;
  {
    Tensor t = Tensor::allocate(DType::float32, {1024, 1024});  // 4 MiB
    first = t.raw_data();
  }
  const int64_t hits = g.stats().hits;
  Tensor u = Tensor::allocate(DType::float32, {1000, 1024});  // same class
  EXPECT_EQ(u.raw_data(), first);
  EXPECT_TRUE(aligned(u.raw_data()));
  // The elements, and the tensor's handle and the buffer's control block
  // (PoolAllocator), all from the cache.
  EXPECT_EQ(g.stats().hits, hits + 3);
}

#if defined(__SANITIZE_ADDRESS__)
// PoolAllocator puts std::allocate_shared objects and container blocks in the
// global cache: a block freed is the block the next request of its class gets.
TEST(PoolAllocator, SharedObjectsAndVectorsReuseCachedBlocks) {
  if (CachingAllocator::global().stats().max_cached_bytes == 0) {
    GTEST_SKIP() << "the global cache is disabled (sanitizer build or STRATA_BUFFER_CACHE_MIB=0)";
  }
  struct Payload {
    int64_t a = 1, b = 2, c = 3;
  };
  const void* first = nullptr;
  {
    auto p = std::allocate_shared<Payload>(PoolAllocator<Payload>());
    first = p.get();
    EXPECT_EQ(p->b, 2);
  }
  const AllocatorStats before = CachingAllocator::global().stats();
  {
    auto q = std::allocate_shared<Payload>(PoolAllocator<Payload>());
    EXPECT_EQ(static_cast<const void*>(q.get()), first);  // the same control block again
  }
  PooledVector<int64_t> v;
  for (int64_t i = 0; i < 100; ++i) v.push_back(i);
  EXPECT_EQ(v[99], 99);
  v = PooledVector<int64_t>();
  for (int64_t i = 0; i < 100; ++i) v.push_back(i);  // the same growth, from the cache
  const AllocatorStats after = CachingAllocator::global().stats();
  EXPECT_GT(after.hits, before.hits);
  // The second shared object and the second vector's growth reused freed blocks; only the
  // first vector's growth may have taken new ones (classes not seen before).
  EXPECT_LE(after.system_allocations - before.system_allocations, 8);
  EXPECT_EQ(PoolAllocator<int>(), PoolAllocator<double>());
}

TEST(CachingAllocatorDeathTest, AsanReportsUseOfACachedBlockAndWritesPastTheRequest) {
  CachingAllocator a(8 * kMiB);
  EXPECT_DEATH(
      {
        auto* p = static_cast<unsigned char*>(a.allocate(kMiB));
        a.deallocate(p, kMiB);
        p[kMiB / 2] = 1;  // the block is cached, not the caller's (past its links)
      },
      "use-after-poison");
  EXPECT_DEATH(
      {
        // 1 MiB + 1 reserves 1.25 MiB; the slack is not the caller's.
        auto* p = static_cast<unsigned char*>(a.allocate(kMiB + 1));
        p[kMiB + 64] = 1;
      },
      "use-after-poison");
}
#endif

}  // namespace
}  // namespace strata
