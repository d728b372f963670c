// A planted violation of every kind the thread-safety check must reject; the
// ThreadSafety.CheckRejectsPlantedViolations test expects a clang error on each
// line marked VIOLATION and on no other. Never built into a target.
#include <chrono>

#include "strata/base/mutex.h"

namespace strata {

class Account {
 public:
  int balance_without_lock() const {
    return balance_;  // VIOLATION: read without mu_
  }
  void deposit_without_lock(int n) {
    balance_ += n;  // VIOLATION: write without mu_
  }
  void deposit(int n) {
    MutexLock lock(mu_);
    add_locked(n);
  }
  void deposit_through_helper_without_lock(int n) {
    add_locked(n);  // VIOLATION: calls a STRATA_REQUIRES(mu_) function unlocked
  }
  void wait_positive_with_unannotated_predicate() {
    MutexLock lock(mu_);
    changed_.wait(mu_, [&] {
      return balance_ > 0;  // VIOLATION: a predicate lambda is analysed on its own
    });
  }
  void wait_positive() {
    MutexLock lock(mu_);
    changed_.wait(mu_, [&]() STRATA_REQUIRES(mu_) { return balance_ > 0; });
  }
  void wait_without_lock() {
    changed_.wait_for(mu_, std::chrono::milliseconds(1));  // VIOLATION: waits unlocked
  }
  void lock_and_forget() { mu_.lock(); }  // VIOLATION: returns holding mu_

 private:
  void add_locked(int n) STRATA_REQUIRES(mu_) { balance_ += n; }

  mutable Mutex mu_;
  CondVar changed_;
  int balance_ STRATA_GUARDED_BY(mu_) = 0;
};

}  // namespace strata
