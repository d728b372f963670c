#include "strata/core/allocator.h"

#include <bit>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <string_view>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"

#if defined(__SANITIZE_ADDRESS__)
#define STRATA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRATA_ASAN 1
#endif
#endif

#if defined(STRATA_ASAN)
#include <sanitizer/asan_interface.h>
#define STRATA_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define STRATA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define STRATA_POISON(p, n) ((void)(p), (void)(n))
#define STRATA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace strata {
namespace {

constexpr std::string_view kCacheEnv = "STRATA_BUFFER_CACHE_MIB";
#if defined(STRATA_ASAN)
constexpr size_t kDefaultCacheMiB = 0;
#else
constexpr size_t kDefaultCacheMiB = 256;
#endif

}  // namespace

size_t CachingAllocator::cache_limit_from_env(const char* value) {
  if (value == nullptr || *value == '\0') return kDefaultCacheMiB << 20;
  const std::string_view s(value);
  size_t mib = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), mib);
  if (ec != std::errc() || end != s.data() + s.size() ||
      mib > (std::numeric_limits<size_t>::max() >> 20)) {
    throw InvalidArgumentError(
        str_cat(kCacheEnv, ": expected a non-negative integer number of MiB, got '", s, "'"));
  }
  return mib << 20;
}

namespace {

// Frees the global allocator's cache when static objects are destroyed. The
// allocator itself is never destroyed: tensors with static storage duration
// may free their buffers after this runs.
struct ReleaseAtExit {
  CachingAllocator* allocator;
  ~ReleaseAtExit() { allocator->shutdown(); }
};

}  // namespace

CachingAllocator& CachingAllocator::global() {
  static CachingAllocator* const instance =
      new CachingAllocator(cache_limit_from_env(std::getenv(std::string(kCacheEnv).c_str())));
  static const ReleaseAtExit release{instance};
  return *instance;
}

CachingAllocator::CachingAllocator(size_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {
  stats_.max_cached_bytes = max_cached_bytes;
}

CachingAllocator::~CachingAllocator() { trim(); }

size_t CachingAllocator::block_size(size_t bytes) noexcept {
  if (bytes < kSmallBlockBytes)
    return bytes == 0 ? kAlignment : (bytes + kAlignment - 1) & ~(kAlignment - 1);
  // Round up to a multiple of a quarter of the largest power of two <= bytes.
  const size_t step = std::bit_floor(bytes) >> 2;
  if (bytes > std::numeric_limits<size_t>::max() - step) return bytes;  // absurd; let malloc fail
  return (bytes + step - 1) & ~(step - 1);
}

size_t CachingAllocator::reserved_size(size_t bytes) const noexcept {
  const size_t block = block_size(bytes);
  if (cacheable(block)) return block;
  return bytes == 0 ? kAlignment : (bytes + kAlignment - 1) & ~(kAlignment - 1);
}

void CachingAllocator::unlink_locked(FreeList& list, FreeBlock* b) {
  if (b->newer_in_class != nullptr) {
    b->newer_in_class->older_in_class = b->older_in_class;
  } else {
    list.newest = b->older_in_class;
  }
  if (b->older_in_class != nullptr) b->older_in_class->newer_in_class = b->newer_in_class;
  if (b->newer != nullptr) {
    b->newer->older = b->older;
  } else {
    newest_ = b->older;
  }
  if (b->older != nullptr) {
    b->older->newer = b->newer;
  } else {
    oldest_ = b->newer;
  }
  stats_.cached_bytes -= b->block;
  --stats_.cached_blocks;
}

CachingAllocator::FreeList* CachingAllocator::free_list_locked(size_t block, bool create) {
  if (block < kSmallBlockBytes) return &small_free_[block / kAlignment];
  if (create) return &large_free_[block];
  auto it = large_free_.find(block);
  return it == large_free_.end() ? nullptr : &it->second;
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t block = reserved_size(bytes);
  if (cacheable(block)) {
    MutexLock lock(mu_);
    FreeList* list = free_list_locked(block, /*create=*/false);
    if (list != nullptr && list->newest != nullptr) {
      // Most recently freed first: its pages are the likeliest to be cached.
      FreeBlock* b = list->newest;
      unlink_locked(*list, b);
      ++stats_.hits;
      // The links were readable while cached; the caller gets exactly `bytes`.
      STRATA_POISON(b, block);
      STRATA_UNPOISON(b, bytes);
      return b;
    }
    ++stats_.misses;
    ++stats_.system_allocations;
  } else {
    MutexLock lock(mu_);
    ++stats_.system_allocations;
  }
  // The one place Strata takes raw memory: 64-byte aligned blocks from the C heap, released
  // with std::free (cppcoreguidelines-no-malloc is silenced for those calls only).
  void* p = std::aligned_alloc(kAlignment, block);
  if (p == nullptr) {
    // Out of memory: give the idle cached blocks back and try once more.
    trim();
    p = std::aligned_alloc(kAlignment, block);
  }
  if (p == nullptr) {
    throw ResourceExhaustedError(
        str_cat("CachingAllocator: failed to allocate ", bytes, " bytes (block of ", block, ")"));
  }
  // The rounded-up tail is not the caller's: let ASan report writes to it.
  STRATA_POISON(static_cast<std::byte*>(p) + bytes, block - bytes);
  return p;
}

void CachingAllocator::deallocate(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  const size_t block = reserved_size(bytes);
  if (cacheable(block)) {
    MutexLock lock(mu_);
    if (!shut_down_) {
      FreeList* list = nullptr;
      try {
        list = free_list_locked(block, /*create=*/true);
      } catch (const std::bad_alloc&) {
        // No memory for the bookkeeping: free the block instead of caching it.
        std::free(p);  // NOLINT(cppcoreguidelines-no-malloc): see allocate()
        return;
      }
      while (stats_.cached_bytes + block > max_cached_bytes_) evict_oldest_locked();
      STRATA_UNPOISON(p, kHeaderBytes);
      auto* b = static_cast<FreeBlock*>(p);
      *b = FreeBlock{.newer_in_class = nullptr,
                     .older_in_class = list->newest,
                     .newer = nullptr,
                     .older = newest_,
                     .block = block};
      if (list->newest != nullptr) list->newest->newer_in_class = b;
      list->newest = b;
      if (newest_ != nullptr) {
        newest_->newer = b;
      } else {
        oldest_ = b;
      }
      newest_ = b;
      stats_.cached_bytes += block;
      ++stats_.cached_blocks;
      STRATA_POISON(static_cast<std::byte*>(p) + kHeaderBytes, block - kHeaderBytes);
      return;
    }
  }
  STRATA_UNPOISON(p, block);
  std::free(p);  // NOLINT(cppcoreguidelines-no-malloc): see allocate()
}

void CachingAllocator::evict_oldest_locked() {
  STRATA_INTERNAL_CHECK(oldest_ != nullptr, "CachingAllocator: eviction from an empty cache");
  FreeBlock* b = oldest_;
  const size_t block = b->block;
  unlink_locked(*free_list_locked(block, /*create=*/false), b);
  ++stats_.evictions;
  STRATA_UNPOISON(b, block);
  std::free(b);  // NOLINT(cppcoreguidelines-no-malloc): see allocate()
}

void CachingAllocator::free_all_locked() {
  while (oldest_ != nullptr) {
    FreeBlock* b = oldest_;
    const size_t block = b->block;
    unlink_locked(*free_list_locked(block, /*create=*/false), b);
    STRATA_UNPOISON(b, block);
    std::free(b);  // NOLINT(cppcoreguidelines-no-malloc): see allocate()
  }
}

void CachingAllocator::trim() noexcept {
  MutexLock lock(mu_);
  free_all_locked();
}

void CachingAllocator::shutdown() noexcept {
  MutexLock lock(mu_);
  free_all_locked();
  shut_down_ = true;
}

AllocatorStats CachingAllocator::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

}  // namespace strata
