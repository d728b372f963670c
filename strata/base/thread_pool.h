#pragma once
// ThreadPool: a fixed set of worker threads for intra-op parallelism.
//
// Each device owns one pool (see strata/core/device.h). parallel_for splits a
// range into chunks and runs them on the workers *and the calling thread*, then
// returns when all chunks are done; an exception thrown by a chunk is re-thrown
// in the caller (the first one; the remaining chunks still run to completion).
// A pool of size 1 runs everything inline on the caller, with no hand-off.
//
//   strata::ThreadPool pool(2);
//   pool.parallel_for(n, /*min_chunk=*/4096, [&](int64_t begin, int64_t end) {
//     for (int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
//   });
//
// Thread-safe: several threads may call parallel_for on the same pool at once
// (their chunks share the workers). Destruction joins the workers.

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "strata/base/mutex.h"

namespace strata {

class ThreadPool {
 public:
  // `num_threads` >= 1 counts the caller: a pool of N starts N-1 workers.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Total parallelism, caller included.
  int num_threads() const noexcept { return num_threads_; }

  // Runs fn(begin, end) over [0, n) in at most num_threads() * 4 chunks of at
  // least `min_chunk` elements. Blocks until every chunk has run.
  void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

  // The number of chunks parallel_for would use for n elements.
  int64_t num_chunks(int64_t n, int64_t min_chunk) const noexcept;

 private:
  void worker_loop();

  const int num_threads_;
  Mutex mu_;
  CondVar work_available_;
  std::deque<std::function<void()>> queue_ STRATA_GUARDED_BY(mu_);
  bool stopping_ STRATA_GUARDED_BY(mu_) = false;
  std::vector<std::jthread> workers_;
};

}  // namespace strata
