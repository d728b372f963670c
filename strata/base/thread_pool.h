#pragma once
// ThreadPool: a fixed set of worker threads for intra-op parallelism.
//
// Each device owns one pool (see strata/core/device.h). parallel_for splits a
// range into chunks and runs them on the workers *and the calling thread*, then
// returns when all chunks are done; an exception thrown by a chunk is re-thrown
// in the caller (the first one; the remaining chunks still run to completion).
// A pool of size 1 runs everything inline on the caller, with no hand-off.
// The pool's threads flush denormals to zero (strata/base/denormal.h); chunks
// that run on the caller keep the caller's mode (the kernels run theirs inside
// a ScopedFlushDenormal).
//
// run_all and submit run independent tasks (the shards of a sharded op, one per
// logical device): submit queues one task and returns a TaskHandle; its wait()
// runs the task on the waiting thread if no pool thread has started it yet,
// else waits for that thread to finish it. A waiter therefore never waits for a
// task that nobody runs, so tasks may themselves call run_all, submit or
// parallel_for on the same pool (from a pool thread too) without deadlock, as
// long as a task does not wait for something outside the pool.
//
// Submitted tasks run on the workers and on the pool's task thread, started by
// the first submit. parallel_for counts its caller as one of the pool's
// num_threads(); work submitted from a thread that does not belong to the
// device has no such caller, and the task thread stands in for it: a task
// runs with up to num_threads() threads (its own and the workers), also on a
// pool of size 1. The task thread runs only submitted tasks.
//
//   strata::ThreadPool pool(2);
//   pool.parallel_for(n, /*min_chunk=*/4096, [&](int64_t begin, int64_t end) {
//     for (int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
//   });
//   std::vector<std::function<void()>> tasks = {[&] { left = f(x); }, [&] { right = g(x); }};
//   pool.run_all(tasks);                          // both ran; an exception is re-thrown here
//   strata::TaskHandle task = pool.submit([&] { side = k(x); });
//   task.wait();
//
// Idle workers poll for new chunks for a moment (50 µs by default) before they
// sleep, and so does a parallel_for caller waiting for its helpers' chunks: a
// training step issues kernels microseconds apart, and a worker still polling
// takes the next kernel's chunks without a futex wake-up. That moved the MLP at
// 2 threads from 0.70 to 0.81 of its GEMM floor (docs/PERFORMANCE.md). The
// environment variable STRATA_POOL_SPIN_US sets the time in microseconds (0:
// sleep at once, for machines whose cores are shared with other busy work), as
// OMP_WAIT_POLICY does for OpenMP runtimes; each pool reads it when it is made
// (a bad value: InvalidArgumentError from the constructor).
//
// Thread-safe: several threads may call parallel_for, run_all and submit on the
// same pool at once (their work shares the threads). Destruction runs the
// tasks still queued, then joins the threads.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "strata/base/mutex.h"

namespace strata {

// The handle of one task submitted to a ThreadPool. Move-only; one thread at a
// time. The destructor of a handle not yet waited for waits (as wait() does)
// and drops the task's exception: the task never outlives its handle.
class TaskHandle {
 public:
  // An empty handle (valid() is false).
  TaskHandle() = default;
  ~TaskHandle();
  TaskHandle(TaskHandle&& other) noexcept = default;
  // Waits for the task this handle holds (dropping its exception), then takes `other`'s.
  TaskHandle& operator=(TaskHandle&& other) noexcept;

  // Whether the handle holds a task not yet waited for.
  bool valid() const noexcept { return state_ != nullptr; }

  // Returns once the task has run: runs it on this thread if no pool worker has
  // started it, else blocks until the worker finishes it. Re-throws the task's
  // exception. Leaves the handle empty. Throws FailedPreconditionError on an
  // empty handle.
  void wait();

 private:
  friend class ThreadPool;
  struct State;
  explicit TaskHandle(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

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

  // Queues `fn` for the pool's threads (its workers and its task thread,
  // started here the first time) and returns its handle. The task runs on the
  // first of them to take it or, if none has by the time someone waits for it,
  // on the waiting thread.
  [[nodiscard]] TaskHandle submit(std::function<void()> fn);

  // Runs every task, the caller taking part (it runs tasks[0] and then each task
  // no pool thread has started), and returns when all have run. If tasks throw,
  // the others still run to completion and the exception of the
  // lowest-numbered failed task is re-thrown.
  void run_all(std::span<const std::function<void()>> tasks);

 private:
  // A pool thread's loop: runs entries of queue_ (a worker) or of task_queue_
  // (the task thread) until the pool stops and that queue is empty.
  void serve(bool task_thread);

  const int num_threads_;
  const std::chrono::nanoseconds spin_;  // how long idle threads poll before they sleep
  Mutex mu_;
  CondVar work_available_;
  CondVar task_available_;
  // The workers' queue: parallel_for's helpers and submitted tasks.
  std::deque<std::function<void()>> queue_ STRATA_GUARDED_BY(mu_);
  // queue_.size(), readable without mu_: idle workers poll it for a moment
  // before they sleep (see serve()).
  std::atomic<int64_t> queued_{0};
  // The task thread's queue: submitted tasks only. A task sits in both queues;
  // the entry taken second finds it claimed and does nothing.
  std::deque<std::function<void()>> task_queue_ STRATA_GUARDED_BY(mu_);
  bool stopping_ STRATA_GUARDED_BY(mu_) = false;
  std::vector<std::jthread> workers_;
  std::jthread task_thread_ STRATA_GUARDED_BY(mu_);  // not joinable until the first submit
};

}  // namespace strata
