#pragma once
// ReplicaThreads: one long-lived thread per local replica, each bound to its
// device (a DeviceScope held for the thread's lifetime), that run a job for
// every replica and report when all have finished.
//
//   ReplicaThreads threads({&cpu0, &cpu1});
//   threads.run_all([&](int replica) { ... });   // blocks until both ran
//
// run_all captures every replica's exception and, after all replicas have
// returned, re-throws the root cause (see run_all). `on_failure` is called, on
// the failing thread, as soon as a replica throws, so the owner can abort the
// collectives the other replicas may be waiting in: that is what bounds the
// wait (collectives have timeouts, user code between them does not block on
// other replicas).
//
// Thread-safety: run_all may be called by one thread at a time (a strategy's
// step is issued by its owner thread). Destruction stops and joins the threads.

#include <cstdint>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "strata/base/mutex.h"
#include "strata/core/device.h"

namespace strata::distribute::internal {

class ReplicaThreads {
 public:
  using Job = std::function<void(int replica)>;
  using FailureHandler = std::function<void(int replica, std::exception_ptr error)>;

  explicit ReplicaThreads(std::vector<const Device*> devices, FailureHandler on_failure = {});
  ~ReplicaThreads();
  ReplicaThreads(const ReplicaThreads&) = delete;
  ReplicaThreads& operator=(const ReplicaThreads&) = delete;

  int size() const noexcept { return static_cast<int>(devices_.size()); }
  const std::vector<const Device*>& devices() const noexcept { return devices_; }

  // Runs job(i) on replica thread i for every i and waits for all of them.
  // If replicas threw, re-throws the first exception that is not an
  // AbortedError/CancelledError caused by another replica's failure (the root
  // cause), prefixed with the failing replica's index and device; if only such
  // secondary errors were thrown, the first of them.
  void run_all(const Job& job);

  // True on a replica thread (of any strategy).
  static bool on_replica_thread() noexcept;

 private:
  struct Slot {
    Mutex mu;
    CondVar wake;
    uint64_t generation STRATA_GUARDED_BY(mu) = 0;
    bool stop STRATA_GUARDED_BY(mu) = false;
    std::exception_ptr error;  // written by the replica before it reports done
  };

  void thread_main(int replica);

  std::vector<const Device*> devices_;
  FailureHandler on_failure_;
  std::vector<std::unique_ptr<Slot>> slots_;
  const Job* job_ = nullptr;  // valid during run_all; published by the slots' mutexes
  Mutex done_mu_;
  CondVar all_done_;
  int remaining_ STRATA_GUARDED_BY(done_mu_) = 0;
  std::vector<std::jthread> threads_;
};

}  // namespace strata::distribute::internal
