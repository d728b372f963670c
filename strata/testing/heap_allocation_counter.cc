// Replaces the malloc family of the program that compiles this file in (see
// heap_allocation_counter.h): glibc lets an executable interpose them, and
// its __libc_* entry points are the real allocator.
#include "strata/testing/heap_allocation_counter.h"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STRATA_SANITIZER_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STRATA_SANITIZER_MALLOC 1
#endif
#endif

#if defined(__GLIBC__) && !defined(STRATA_SANITIZER_MALLOC)
#include <execinfo.h>
#include <unistd.h>

extern "C" {
void* __libc_malloc(size_t size);                      // NOLINT(bugprone-reserved-identifier)
void* __libc_calloc(size_t n, size_t size);            // NOLINT(bugprone-reserved-identifier)
void* __libc_realloc(void* p, size_t size);            // NOLINT(bugprone-reserved-identifier)
void* __libc_memalign(size_t alignment, size_t size);  // NOLINT(bugprone-reserved-identifier)
void __libc_free(void* p);                             // NOLINT(bugprone-reserved-identifier)
}

namespace {

std::atomic<int64_t> g_heap_allocations{0};
// Live AllocationTrace objects while STRATA_TRACE_ALLOCATIONS is set.
std::atomic<int> g_tracing{0};
// True while this thread writes a trace (backtrace() may allocate itself).
thread_local bool t_in_trace = false;
// Held while one stack is written, so that the stacks of threads that
// allocate at once do not interleave their lines (a spin lock: a mutex could
// allocate on first use in some C libraries, and traces are rare).
std::atomic_flag g_trace_writer;

void write_trace() {
  if (t_in_trace) return;
  t_in_trace = true;
  void* frames[32];
  // Frame 0 is this function and frame 1 count_allocation(): skip them.
  const int n = ::backtrace(frames, 32);
  while (g_trace_writer.test_and_set(std::memory_order_acquire)) {
  }
  if (n > 2) ::backtrace_symbols_fd(frames + 2, n - 2, STDERR_FILENO);
  static constexpr char kEnd[] = "--\n";
  [[maybe_unused]] const ssize_t w = ::write(STDERR_FILENO, kEnd, sizeof(kEnd) - 1);
  g_trace_writer.clear(std::memory_order_release);
  t_in_trace = false;
}

void count_allocation() {
  g_heap_allocations.fetch_add(1, std::memory_order_relaxed);
  if (g_tracing.load(std::memory_order_relaxed) > 0) write_trace();
}

}  // namespace

// NOLINTBEGIN(cppcoreguidelines-no-malloc,readability-inconsistent-declaration-parameter-name)
extern "C" {
void* malloc(size_t size) {
  count_allocation();
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) {
  count_allocation();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) {
  count_allocation();
  return __libc_realloc(p, size);
}
void* memalign(size_t alignment, size_t size) {
  count_allocation();
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  count_allocation();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  count_allocation();
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* p) { __libc_free(p); }
}
// NOLINTEND(cppcoreguidelines-no-malloc,readability-inconsistent-declaration-parameter-name)

namespace strata::testing {

int64_t heap_allocations() noexcept { return g_heap_allocations.load(std::memory_order_relaxed); }

AllocationTrace::AllocationTrace() {
  const char* env = std::getenv("STRATA_TRACE_ALLOCATIONS");
  if (env == nullptr || *env == '\0') return;
  // The first backtrace() loads the unwinder (allocating); do it before tracing.
  void* frame[1];
  ::backtrace(frame, 1);
  active_ = true;
  g_tracing.fetch_add(1, std::memory_order_relaxed);
}

AllocationTrace::~AllocationTrace() {
  if (active_) g_tracing.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace strata::testing

#else

namespace strata::testing {

int64_t heap_allocations() noexcept { return -1; }  // not counted here (see the header)
AllocationTrace::AllocationTrace() = default;
AllocationTrace::~AllocationTrace() = default;

}  // namespace strata::testing

#endif
