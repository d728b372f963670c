#include "strata/base/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"

namespace strata {

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads) {
  STRATA_CHECK_ARG(num_threads >= 1, "ThreadPool: expected num_threads >= 1, got ", num_threads);
  workers_.reserve(num_threads - 1);
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  work_available_.notify_all();
  workers_.clear();  // joins
}

void ThreadPool::worker_loop() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(mu_);
      work_available_.wait(mu_,
                           [&]() STRATA_REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

int64_t ThreadPool::num_chunks(int64_t n, int64_t min_chunk) const noexcept {
  if (n <= 0) return 0;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  const int64_t by_size = (n + min_chunk - 1) / min_chunk;
  // A few chunks per thread smooths out imbalance without much overhead.
  const int64_t by_threads = num_threads_ == 1 ? 1 : int64_t{num_threads_} * 4;
  return std::max<int64_t>(1, std::min(by_size, by_threads));
}

namespace {
// Shared state of one parallel_for call; lives until the last chunk finishes.
struct ForState {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n;
  int64_t chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  Mutex mu;
  CondVar all_done;
  std::exception_ptr error STRATA_GUARDED_BY(mu);

  // Claims and runs chunks until none are left. Returns after its last one.
  void run_chunks() {
    for (;;) {
      const int64_t c = next.fetch_add(1);
      if (c >= chunks) return;
      const int64_t begin = n * c / chunks;
      const int64_t end = n * (c + 1) / chunks;
      try {
        (*fn)(begin, end);
      } catch (...) {
        MutexLock lock(mu);
        if (!error) error = std::current_exception();
      }
      if (done.fetch_add(1) + 1 == chunks) {
        MutexLock lock(mu);
        all_done.notify_all();
      }
    }
  }
};
}  // namespace

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk,
                              const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t chunks = num_chunks(n, min_chunk);
  if (chunks == 0) return;
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  auto state = std::make_shared<ForState>();
  state->fn = &fn;
  state->n = n;
  state->chunks = chunks;
  // Ask at most one helper per worker; each helper drains chunks until none remain.
  const int64_t helpers = std::min<int64_t>(chunks - 1, static_cast<int64_t>(workers_.size()));
  {
    MutexLock lock(mu_);
    for (int64_t i = 0; i < helpers; ++i) queue_.emplace_back([state] { state->run_chunks(); });
  }
  if (helpers == 1) {
    work_available_.notify_one();
  } else {
    work_available_.notify_all();
  }
  state->run_chunks();
  // Intra-op chunks cannot block on anything outside this pool, so this wait is
  // bounded by the chunks' own run time.
  MutexLock lock(state->mu);
  state->all_done.wait(state->mu,
                       [&]() STRATA_REQUIRES(state->mu) { return state->done.load() == chunks; });
  if (state->error) std::rethrow_exception(state->error);
}

}  // namespace strata
