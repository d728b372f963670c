#pragma once
// CachingAllocator: the 64-byte aligned memory behind tensor buffers, with a
// bounded cache of freed blocks.
//
// Why: a fresh block of more than a few MiB comes from mmap, and every one of
// its pages faults on first touch (a 64 MiB add's output took 16,385 faults,
// more time than the add itself). Reusing freed blocks avoids the faults and
// the munmap; and since a training step allocates the same buffers every step,
// in the steady state every buffer comes from the cache: no call into the C
// heap at all (the free lists live inside the cached blocks themselves).
//
// Policy:
//   - Every request is rounded up to a size class: under kSmallBlockBytes
//     (64 KiB) a multiple of 64 bytes; from there on 4 classes per power of
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
//     poisoned (but for the first kHeaderBytes of a cached block, which hold
//     the free lists' links), so use after free (until the block is reused) and
//     overflow past the requested size are still reported for instances with a
//     cache.
//
// Example:
//   CachingAllocator& a = CachingAllocator::global();
//   void* p = a.allocate(64 << 20);   // 64-byte aligned, uninitialised
//   a.deallocate(p, 64 << 20);        // same size as requested; cached
//   void* q = a.allocate(60 << 20);   // same class: reuses p's block
//
// Thread-safe: any thread may allocate and free, including a block allocated
// on another thread.
//
// PoolAllocator<T> (below) puts the small objects of a step in the same cache:
// the control blocks and handles of tensors and buffers (std::allocate_shared),
// the gradient tape's records and the backward pass's containers. They are
// made and freed again every step, so that from the second step on they too
// are reused blocks instead of calls into the C heap.

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <new>
#include <vector>

#include "strata/base/mutex.h"

namespace strata {

struct AllocatorStats {
  size_t max_cached_bytes = 0;
  size_t cached_bytes = 0;         // total size of the free blocks held in the cache
  size_t cached_blocks = 0;        // number of free blocks held in the cache
  int64_t hits = 0;                // cacheable requests served from the cache
  int64_t misses = 0;              // cacheable requests that allocated fresh memory
  int64_t evictions = 0;           // cached blocks freed to make room for newer ones
  int64_t system_allocations = 0;  // blocks taken from the C heap (aligned_alloc)
};

class CachingAllocator {
 public:
  static constexpr size_t kAlignment = 64;
  // Size classes below this are 64-byte multiples (see block_size).
  static constexpr size_t kSmallBlockBytes = size_t{64} << 10;

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
  // requests of at least kSmallBlockBytes a multiple of a quarter of the
  // largest power of two <= bytes. A cacheable request reserves this much.
  static size_t block_size(size_t bytes) noexcept;

 private:
  // The links of a cached block, written at its start: its class's list
  // (newest first) and the cache-wide list in the order blocks were freed.
  struct FreeBlock {
    FreeBlock* newer_in_class;
    FreeBlock* older_in_class;
    FreeBlock* newer;
    FreeBlock* older;
    size_t block;
  };
  struct FreeList {
    FreeBlock* newest = nullptr;
  };

 public:
  // The bytes at the start of a cached block that hold its links.
  static constexpr size_t kHeaderBytes = sizeof(FreeBlock);

 private:
  static_assert(sizeof(FreeBlock) <= kAlignment);
  bool cacheable(size_t block) const noexcept { return block <= max_cached_bytes_; }
  // block_size(bytes) if that block is cacheable, else bytes rounded up to
  // kAlignment (an uncacheable block is not inflated to its class).
  size_t reserved_size(size_t bytes) const noexcept;
  // Takes `b` (of class `list`) out of both lists.
  void unlink_locked(FreeList& list, FreeBlock* b) STRATA_REQUIRES(mu_);
  // Frees the oldest cached block. Requires a non-empty cache.
  void evict_oldest_locked() STRATA_REQUIRES(mu_);
  void free_all_locked() STRATA_REQUIRES(mu_);

  // The free list of class `block` (a cacheable size class), created on
  // first use: the small classes are an array indexed by block / kAlignment,
  // the large ones nodes of large_free_ kept when they empty, so that the
  // steady state allocates no map nodes. nullptr when absent and !create;
  // throws std::bad_alloc when a map node cannot be made.
  FreeList* free_list_locked(size_t block, bool create) STRATA_REQUIRES(mu_);

  const size_t max_cached_bytes_;
  mutable Mutex mu_;
  std::array<FreeList, kSmallBlockBytes / kAlignment> small_free_ STRATA_GUARDED_BY(mu_);
  std::map<size_t, FreeList> large_free_ STRATA_GUARDED_BY(mu_);
  FreeBlock* oldest_ STRATA_GUARDED_BY(mu_) = nullptr;  // the cache-wide list's ends
  FreeBlock* newest_ STRATA_GUARDED_BY(mu_) = nullptr;
  bool shut_down_ STRATA_GUARDED_BY(mu_) = false;
  AllocatorStats stats_ STRATA_GUARDED_BY(mu_);
};

// A standard allocator over CachingAllocator::global() (see above), for
// std::allocate_shared and containers whose blocks a training step makes and
// frees every step. Every block is 64-byte aligned and at least 64 bytes, so
// it suits objects and arrays of a few cache lines and more, not single bytes.
// Stateless: all instances are equal and any may free what another allocated.
template <typename T>
struct PoolAllocator {
  using value_type = T;
  static_assert(alignof(T) <= CachingAllocator::kAlignment);

  PoolAllocator() noexcept = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>& /*other*/) noexcept {
  }  // NOLINT(google-explicit-constructor)

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(CachingAllocator::global().allocate(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept {
    CachingAllocator::global().deallocate(p, n * sizeof(T));
  }

  template <typename U>
  bool operator==(const PoolAllocator<U>& /*other*/) const noexcept {
    return true;
  }
};

// A std::vector whose elements live in PoolAllocator blocks.
template <typename T>
using PooledVector = std::vector<T, PoolAllocator<T>>;

}  // namespace strata
