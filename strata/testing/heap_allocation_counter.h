#pragma once
// Counts every heap allocation of the process: the program that compiles
// heap_allocation_counter.cc into itself (add the file to its sources; it is
// not part of the strata_testing library, because it replaces the malloc
// family of the whole program) gets malloc, calloc, realloc, memalign,
// aligned_alloc and posix_memalign defined by that file, which count each call
// and forward to glibc. operator new, std::aligned_alloc and every library's
// mallocs arrive there, on every thread.
//
//   const int64_t before = strata::testing::heap_allocations();
//   train_step();
//   const int64_t per_step = strata::testing::heap_allocations() - before;
//
// Off glibc and under the address and thread sanitizers (whose runtimes
// define the malloc family themselves) nothing is counted and
// heap_allocations() returns -1.
//
// Tracing: while AllocationTrace is alive and STRATA_TRACE_ALLOCATIONS is set
// to a non-empty value, every allocation writes its call stack to stderr (one
// frame a line, the program's own functions named when it links with
// -rdynamic, then a line "--"), which shows the allocating call sites of a
// region that should not allocate.
//
// Thread-safe.

#include <cstdint>

namespace strata::testing {

// The number of heap allocations since the program started, or -1 when not counted.
int64_t heap_allocations() noexcept;

// Traces allocations (see above) from construction to destruction.
class AllocationTrace {
 public:
  AllocationTrace();
  ~AllocationTrace();
  AllocationTrace(const AllocationTrace&) = delete;
  AllocationTrace& operator=(const AllocationTrace&) = delete;

 private:
  bool active_ = false;
};

}  // namespace strata::testing
