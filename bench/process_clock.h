#pragma once
// What a benchmark reads about its own process: clocks in seconds and minor
// page faults.
//
//   const double cpu0 = strata::bench::process_cpu_seconds();
//   run();
//   const double cpu = strata::bench::process_cpu_seconds() - cpu0;  // every thread's

#include <sys/resource.h>

#include <cstdint>
#include <ctime>

namespace strata::bench {

// The time of `clock` (CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID, ...) in seconds.
inline double clock_seconds(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Wall time (monotonic).
inline double wall_seconds() { return clock_seconds(CLOCK_MONOTONIC); }
// CPU time of the whole process, every thread: a figure that depends less on
// the machine's load than wall time.
inline double process_cpu_seconds() { return clock_seconds(CLOCK_PROCESS_CPUTIME_ID); }
// CPU time of the calling thread.
inline double thread_cpu_seconds() { return clock_seconds(CLOCK_THREAD_CPUTIME_ID); }

// Minor page faults of the process so far (first touches of fresh memory:
// what a freshly mapped buffer costs).
inline int64_t minor_faults() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

}  // namespace strata::bench
