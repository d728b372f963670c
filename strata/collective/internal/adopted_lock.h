#pragma once
// AdoptedLock: holds a Mutex that a successful try_lock() acquired, until
// destruction. The collectives' reset() uses it to refuse to wait for a call
// in progress instead of queueing behind it:
//
//   STRATA_CHECK(FAILED_PRECONDITION, call_mu.try_lock(), "reset: a call is in progress");
//   const AdoptedLock lock(call_mu);
//
// Thread-safety: as MutexLock (one thread, one scope).

#include "strata/base/mutex.h"
#include "strata/base/thread_annotations.h"

namespace strata::collective::internal {

class STRATA_SCOPED_CAPABILITY AdoptedLock {
 public:
  explicit AdoptedLock(Mutex& mu) STRATA_REQUIRES(mu) : mu_(mu) {}
  ~AdoptedLock() STRATA_RELEASE() { mu_.unlock(); }
  AdoptedLock(const AdoptedLock&) = delete;
  AdoptedLock& operator=(const AdoptedLock&) = delete;

 private:
  Mutex& mu_;
};

}  // namespace strata::collective::internal
