#pragma once
// CachingAllocator: the 64-byte aligned memory behind tensor buffers, with a
// bounded cache of freed large blocks.
//
// Why: a fresh block of more than a few MiB comes from mmap, and every one of
// its pages faults on first touch (a 64 MiB add's output took 16,385 faults,
// more time than the add itself). Reusing freed blocks avoids the faults and
// the munmap.
//
// Policy:
//   - Requests under kMinCachedBytes (64 KiB) go straight to aligned_alloc
//     (glibc's own bins already reuse such blocks without faults).
//   - Larger requests are rounded up to a size class: 4 classes per power of
//     two (2^k, 1.25, 1.5, 1.75 x 2^k), so at most 25% more address space
//     is reserved; a freed block is kept on its class's free list and handed
//     out again for any request of the same class, most recently freed first.
//   - The cached (free) blocks never total more than max_cached_bytes: a
//     block that does not fit evicts the least recently freed blocks first;
//     a block larger than the whole bound is never cached. Blocks in use do
//     not count against the bound.
//   - The process-wide instance, global(), bounds its cache at 256 MiB, or at
//     STRATA_BUFFER_CACHE_MIB MiB when that variable is set (0 disables the
//     cache). Under AddressSanitizer its default is 0 so that ASan's own
//     quarantine still catches every use after free in the rest of the
//     project. Its cached blocks are returned to the system at exit; blocks
//     freed after that (static tensors) are freed directly.
//   - Under ASan, cached blocks and the unused tail of a rounded block are
//     poisoned, so use after free (until the block is reused) and overflow
//     past the requested size are still reported for instances with a cache.
//
// Example:
//   CachingAllocator& a = CachingAllocator::global();
//   void* p = a.allocate(64 << 20);   // 64-byte aligned, uninitialised
//   a.deallocate(p, 64 << 20);        // same size as requested; cached
//   void* q = a.allocate(60 << 20);   // same class: reuses p's block
//
// Thread-safe: any thread may allocate and free, including a block allocated
// on another thread.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>

#include "strata/base/mutex.h"

namespace strata {

struct AllocatorStats {
  size_t max_cached_bytes = 0;
  size_t cached_bytes = 0;   // total size of the free blocks held in the cache
  size_t cached_blocks = 0;  // number of free blocks held in the cache
  int64_t hits = 0;          // cacheable requests served from the cache
  int64_t misses = 0;        // cacheable requests that allocated fresh memory
  int64_t evictions = 0;     // cached blocks freed to make room for newer ones
};

class CachingAllocator {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kMinCachedBytes = size_t{64} << 10;

  // The process-wide allocator used by Buffer (see the policy above). Throws
  // InvalidArgumentError on first use if STRATA_BUFFER_CACHE_MIB is set to
  // something other than a non-negative integer.
  static CachingAllocator& global();

  // global()'s bound in bytes for the value of STRATA_BUFFER_CACHE_MIB
  // (nullptr or empty: unset, the default). Throws InvalidArgumentError
  // naming the value unless it is a non-negative integer.
  static size_t cache_limit_from_env(const char* value);

  explicit CachingAllocator(size_t max_cached_bytes);
  ~CachingAllocator();  // frees the cached blocks; blocks in use must be freed before
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Returns a kAlignment-aligned block of at least `bytes` bytes (a unique
  // non-null pointer even for 0), contents unspecified. Throws
  // ResourceExhaustedError if the system has no memory for it even after
  // the cached blocks are freed.
  void* allocate(size_t bytes);
  // Frees a block from allocate(); `bytes` must be the size requested there.
  void deallocate(void* p, size_t bytes) noexcept;

  // Frees every cached block.
  void trim() noexcept;
  // trim(), and from now on deallocate() frees directly (exit-time state).
  void shutdown() noexcept;

  AllocatorStats stats() const;

  // The size class of a request of `bytes`: a multiple of kAlignment, and for
  // requests of at least kMinCachedBytes a multiple of a quarter of the
  // largest power of two <= bytes. A cacheable request reserves this much.
  static size_t block_size(size_t bytes) noexcept;

 private:
  struct Block {
    void* p;
    uint64_t seq;  // when it was freed: smaller is older
  };
  bool cacheable(size_t block) const noexcept {
    return block >= kMinCachedBytes && block <= max_cached_bytes_;
  }
  // block_size(bytes) if that block is cacheable, else bytes rounded up to
  // kAlignment (an uncacheable block is not inflated to its class).
  size_t reserved_size(size_t bytes) const noexcept;
  // Frees the oldest cached block. Requires a non-empty cache.
  void evict_oldest_locked() STRATA_REQUIRES(mu_);
  void free_all_locked() STRATA_REQUIRES(mu_);

  const size_t max_cached_bytes_;
  mutable Mutex mu_;
  // Free blocks by block size; each deque is ordered oldest first.
  std::map<size_t, std::deque<Block>> free_ STRATA_GUARDED_BY(mu_);
  uint64_t next_seq_ STRATA_GUARDED_BY(mu_) = 0;
  bool shut_down_ STRATA_GUARDED_BY(mu_) = false;
  AllocatorStats stats_ STRATA_GUARDED_BY(mu_);
};

}  // namespace strata
