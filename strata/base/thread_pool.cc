#include "strata/base/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <memory>
#include <utility>

#include "strata/base/cpu_relax.h"
#include "strata/base/denormal.h"
#include "strata/base/errors.h"
#include "strata/base/mutex.h"

namespace strata {

namespace {

// How long an idle worker, and a parallel_for caller whose helpers are still
// running chunks, poll before they sleep on a condition variable. A training
// step issues its ops back to back, a few to a few hundred microseconds apart:
// a worker that is still polling when the next parallel_for queues its chunks
// starts them at once, where a sleeping one costs a futex wake-up (tens of
// microseconds on a virtual machine) per op. Eigen's pool, which TensorFlow
// uses, spins before it blocks for the same reason. STRATA_POOL_SPIN_US
// overrides the default (thread_pool.h); a bad value fails the pool's constructor.
std::chrono::nanoseconds idle_spin() {
  const char* v = std::getenv("STRATA_POOL_SPIN_US");
  if (v == nullptr || *v == '\0') return std::chrono::nanoseconds(50'000);
  char* end = nullptr;
  const long long us = std::strtoll(v, &end, 10);
  STRATA_CHECK_ARG(*end == '\0' && us >= 0 && us <= 1'000'000,
                   "STRATA_POOL_SPIN_US: expected microseconds in [0, 1000000], got '", v, "'");
  return std::chrono::nanoseconds(us * 1000);
}

// Polls `ready` until it returns true or `budget` has passed; returns its last answer.
template <typename Ready>
bool spin_until(Ready ready, std::chrono::nanoseconds budget) {
  if (ready()) return true;
  if (budget.count() <= 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

}  // namespace

// One submitted task. Whoever first claims it (a pool thread popping one of its
// queue entries, or the thread waiting on its handle) runs it; everyone else
// only waits.
struct TaskHandle::State {
  explicit State(std::function<void()> f) : fn(std::move(f)) {}

  // Runs the task unless someone claimed it already; returns whether it ran it.
  bool try_run() {
    if (claimed.exchange(true)) return false;
    std::exception_ptr failure;
    try {
      fn();
    } catch (...) {
      failure = std::current_exception();
    }
    fn = nullptr;  // release what the task captured before anyone is woken
    MutexLock lock(mu);
    // Moved, so that this thread holds no reference to the exception once the
    // lock is released: the waiter alone then owns (and frees) the object.
    error = std::move(failure);
    finished = true;
    done.notify_all();
    return true;
  }

  std::function<void()> fn;  // touched only by the thread that claimed the task
  std::atomic<bool> claimed{false};
  Mutex mu;
  CondVar done;
  bool finished STRATA_GUARDED_BY(mu) = false;
  std::exception_ptr error STRATA_GUARDED_BY(mu);
};

TaskHandle::~TaskHandle() {
  if (!valid()) return;
  try {
    wait();
  } catch (...) {
    // Documented: a destructor never throws; wait() is where the error is reported.
  }
}

TaskHandle& TaskHandle::operator=(TaskHandle&& other) noexcept {
  if (this != &other) {
    TaskHandle old(std::move(*this));  // waits when it goes out of scope
    state_ = std::move(other.state_);
  }
  return *this;
}

void TaskHandle::wait() {
  STRATA_CHECK(FAILED_PRECONDITION, valid(), "TaskHandle::wait: the handle holds no task");
  const std::shared_ptr<State> state = std::move(state_);
  if (!state->try_run()) {
    // A pool thread is running it. The task is bounded by its own run time: it
    // waits only for tasks of its own, which it runs itself when no pool thread
    // has started them.
    MutexLock lock(state->mu);
    state->done.wait(state->mu, [&]() STRATA_REQUIRES(state->mu) { return state->finished; });
  }
  // Taken out of the state under its lock: whichever thread drops the state
  // last then frees no exception that this thread may still be using.
  std::exception_ptr error;
  {
    MutexLock lock(state->mu);
    error = std::move(state->error);
  }
  if (error) std::rethrow_exception(error);
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads), spin_(idle_spin()) {
  STRATA_CHECK_ARG(num_threads >= 1, "ThreadPool: expected num_threads >= 1, got ", num_threads);
  workers_.reserve(num_threads - 1);
  for (int i = 1; i < num_threads; ++i) {
    workers_.emplace_back([this] { serve(/*task_thread=*/false); });
  }
}

ThreadPool::~ThreadPool() {
  std::jthread task_thread;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    task_thread = std::move(task_thread_);
  }
  work_available_.notify_all();
  task_available_.notify_all();
  workers_.clear();  // joins
  // task_thread joins here.
}

void ThreadPool::serve(bool task_thread) {
  // Pool threads flush denormals to zero for their whole life (see denormal.h).
  const ScopedFlushDenormal flush;
  CondVar& available = task_thread ? task_available_ : work_available_;
  for (;;) {
    std::function<void()> entry;
    if (!task_thread) {
      spin_until([this] { return queued_.load(std::memory_order_acquire) > 0; }, spin_);
    }
    {
      MutexLock lock(mu_);
      std::deque<std::function<void()>>& queue = task_thread ? task_queue_ : queue_;
      // Idle until there is work: not a wait on a result, so it has no deadline.
      available.wait(mu_, [&]() STRATA_REQUIRES(mu_) { return stopping_ || !queue.empty(); });
      if (queue.empty()) return;  // stopping and drained
      entry = std::move(queue.front());
      queue.pop_front();
      if (!task_thread) queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    entry();
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
    queued_.fetch_add(helpers, std::memory_order_release);
  }
  if (helpers == 1) {
    work_available_.notify_one();
  } else {
    work_available_.notify_all();
  }
  state->run_chunks();
  spin_until([&] { return state->done.load(std::memory_order_acquire) == chunks; }, spin_);
  // Intra-op chunks cannot block on anything outside this pool, so this wait is
  // bounded by the chunks' own run time.
  MutexLock lock(state->mu);
  state->all_done.wait(state->mu,
                       [&]() STRATA_REQUIRES(state->mu) { return state->done.load() == chunks; });
  // Moved out: a helper's queue entry may drop the state last, and must then
  // free no exception the caller is still handling.
  if (state->error) std::rethrow_exception(std::exchange(state->error, nullptr));
}

TaskHandle ThreadPool::submit(std::function<void()> fn) {
  auto state = std::make_shared<TaskHandle::State>(std::move(fn));
  {
    MutexLock lock(mu_);
    if (!task_thread_.joinable()) {
      task_thread_ = std::jthread([this] { serve(/*task_thread=*/true); });
    }
    task_queue_.emplace_back([state] { state->try_run(); });
    if (!workers_.empty()) {
      queue_.emplace_back([state] { state->try_run(); });
      queued_.fetch_add(1, std::memory_order_release);
    }
  }
  task_available_.notify_one();
  if (!workers_.empty()) work_available_.notify_one();
  return TaskHandle(std::move(state));
}

void ThreadPool::run_all(std::span<const std::function<void()>> tasks) {
  if (tasks.empty()) return;
  std::vector<TaskHandle> handles;
  handles.reserve(tasks.size() - 1);
  for (size_t i = 1; i < tasks.size(); ++i) handles.push_back(submit(tasks[i]));
  std::exception_ptr first;
  try {
    tasks[0]();
  } catch (...) {
    first = std::current_exception();
  }
  for (TaskHandle& h : handles) {
    try {
      h.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace strata
