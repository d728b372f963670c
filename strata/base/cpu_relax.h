#pragma once
// One iteration of a spin-wait: tells the processor that this thread is
// polling, so that a sibling hyper-thread gets the core's resources and the
// loop leaves the pipeline without a memory-order violation flush.

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#else
#include <thread>
#endif

namespace strata {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace strata
