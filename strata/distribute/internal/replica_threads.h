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
// Hand-off: a replica thread that has finished a job spins for up to
// kReplicaSpin before it sleeps on its condition variable, and run_all spins
// for up to kCallerSpin before it sleeps waiting for the replicas: on a VM a
// sleeping thread takes tens of microseconds to wake (its virtual CPU halts),
// which made strategy.run of an empty function 5x slower on an idle machine
// than on a busy one. Steps issued back to back (a training loop) reach a
// spinning replica; a replica idle for longer sleeps and costs nothing.
//
// Thread-safety: run_all may be called by one thread at a time (a strategy's
// step is issued by its owner thread). Destruction stops and joins the threads.

#include <atomic>
#include <chrono>
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

  static constexpr std::chrono::microseconds kReplicaSpin{50};
  static constexpr std::chrono::microseconds kCallerSpin{20};

 private:
  struct Slot {
    Mutex mu;
    CondVar wake;
    uint64_t generation STRATA_GUARDED_BY(mu) = 0;
    std::atomic<uint64_t> posted{0};  // generation, for the replica to spin on without the lock
    bool stop STRATA_GUARDED_BY(mu) = false;
    std::exception_ptr error;  // written by the replica before it reports done
  };

  void thread_main(int replica);

  std::vector<const Device*> devices_;
  FailureHandler on_failure_;
  std::vector<std::unique_ptr<Slot>> slots_;
  const Job* job_ = nullptr;  // valid during run_all; published by the slots' mutexes
  Mutex done_mu_;
  CondVar all_done_;  // signalled under done_mu_ when remaining_ reaches 0
  std::atomic<int> remaining_{0};
  std::vector<std::jthread> threads_;
};

}  // namespace strata::distribute::internal
