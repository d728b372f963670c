#pragma once
// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// clang's thread-safety annotations, so that every `STRATA_GUARDED_BY(mu_)` is
// checked at compile time (-Wthread-safety; the clang-tsa preset and the
// ThreadSafety.* tests) instead of being a comment.
//
//   class Counter {
//    public:
//     void add(int n) {
//       MutexLock lock(mu_);
//       total_ += n;
//       changed_.notify_all();
//     }
//     // Waits until the total reaches `n`; false after `timeout`.
//     bool wait_for_total(int n, std::chrono::milliseconds timeout) {
//       MutexLock lock(mu_);
//       return changed_.wait_for(mu_, timeout, [&]() STRATA_REQUIRES(mu_) { return total_ >= n; });
//     }
//    private:
//     Mutex mu_;
//     CondVar changed_;
//     int total_ STRATA_GUARDED_BY(mu_) = 0;
//   };
//
// A predicate passed to CondVar runs with the mutex held, but clang analyses a
// lambda as a function of its own: annotate it `STRATA_REQUIRES(mu)` (as above)
// so that it may read the guarded members.

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "strata/base/thread_annotations.h"

namespace strata {

// A non-recursive mutual-exclusion lock. Thread-safe; not copyable or movable.
class STRATA_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() STRATA_ACQUIRE() { mu_.lock(); }
  void unlock() STRATA_RELEASE() { mu_.unlock(); }
  // Acquires the mutex if it is free; returns whether it did.
  bool try_lock() STRATA_TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // Tells the analysis that the caller holds the mutex, where it cannot see it
  // (a callback the lock holder runs). Checks nothing at run time.
  void assert_held() const STRATA_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction (scoped, like std::lock_guard);
// unlock() and lock() release and re-acquire it in between. One thread at a time.
class STRATA_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) STRATA_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() STRATA_RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Releases the mutex early (before a notify or a call that must not hold it).
  void unlock() STRATA_RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  // Re-acquires it after unlock().
  void lock() STRATA_ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A condition variable over a Mutex the caller holds. Every wait returns with
// the mutex held again, also when the predicate throws. Thread-safe.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void notify_one() noexcept { cv_.notify_one(); }
  void notify_all() noexcept { cv_.notify_all(); }

  // Blocks until notified (or a spurious wake-up).
  void wait(Mutex& mu) STRATA_REQUIRES(mu) {
    Adopted l(mu);
    cv_.wait(l.lock);
  }
  // Blocks until `pred()` holds.
  template <class Predicate>
  void wait(Mutex& mu, Predicate pred) STRATA_REQUIRES(mu) {
    Adopted l(mu);
    cv_.wait(l.lock, std::move(pred));
  }
  // Blocks until `pred()` holds or `deadline` passes; returns `pred()`.
  template <class Clock, class Duration, class Predicate>
  bool wait_until(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline,
                  Predicate pred) STRATA_REQUIRES(mu) {
    Adopted l(mu);
    return cv_.wait_until(l.lock, deadline, std::move(pred));
  }
  // Blocks until notified or `deadline` passes.
  template <class Clock, class Duration>
  std::cv_status wait_until(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      STRATA_REQUIRES(mu) {
    Adopted l(mu);
    return cv_.wait_until(l.lock, deadline);
  }
  // Blocks until `pred()` holds or `timeout` elapses; returns `pred()`.
  template <class Rep, class Period, class Predicate>
  bool wait_for(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout, Predicate pred)
      STRATA_REQUIRES(mu) {
    Adopted l(mu);
    return cv_.wait_for(l.lock, timeout, std::move(pred));
  }
  // Blocks until notified or `timeout` elapses.
  template <class Rep, class Period>
  std::cv_status wait_for(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout)
      STRATA_REQUIRES(mu) {
    Adopted l(mu);
    return cv_.wait_for(l.lock, timeout);
  }

 private:
  // The caller's lock lent to std::condition_variable for one wait: adopted on
  // entry, released (not unlocked) on exit, so the caller still holds it.
  struct Adopted {
    explicit Adopted(Mutex& mu) : lock(mu.mu_, std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    Adopted(const Adopted&) = delete;
    Adopted& operator=(const Adopted&) = delete;
    std::unique_lock<std::mutex> lock;
  };
  std::condition_variable cv_;
};

}  // namespace strata
