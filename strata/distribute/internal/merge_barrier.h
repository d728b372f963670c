#pragma once
// MergeBarrier: the rendezvous behind ReplicaContext::merge_call on strategies
// whose replicas run on several threads.
//
// Every local replica calls arrive(replica, payload, merge). When all have
// arrived, replica 0 runs its `merge` with the payloads of every replica (in
// replica order) and publishes the result; every replica then returns that
// shared result. Type erasure is done by the caller (merge_call's template).
//
// A replica that finishes its step while others wait at a merge point, or a
// replica failure (abort()), wakes the waiters with an error, so a mismatch in
// merge_call counts never hangs: FailedPreconditionError "Some replicas made a
// different number of replica_context().merge_call() calls." as TF. Waits
// also time out (DeadlineExceededError) after `timeout`.
//
// Thread-safe: one instance per strategy, used by its replica threads.

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "strata/base/mutex.h"

namespace strata::distribute::internal {

class MergeBarrier {
 public:
  using Merge = std::function<std::shared_ptr<void>(const std::vector<const void*>& payloads)>;

  MergeBarrier(int num_replicas, std::chrono::milliseconds timeout);

  // Blocks until every replica arrived and replica 0's merge ran; returns its result.
  std::shared_ptr<void> arrive(int replica, const void* payload, const Merge& merge);

  // Called when replica `replica` finished its step; wakes merge waiters with
  // the "different number of merge_call() calls" error if any are waiting.
  void replica_finished(int replica);
  // Wakes every waiter with `error` (a replica failed).
  void abort(std::exception_ptr error);
  // Prepares for the next step.
  void reset();

 private:
  const int num_replicas_;
  const std::chrono::milliseconds timeout_;
  Mutex mu_;
  CondVar changed_;
  uint64_t round_ STRATA_GUARDED_BY(mu_) = 0;
  int arrived_ STRATA_GUARDED_BY(mu_) = 0;
  int finished_ STRATA_GUARDED_BY(mu_) = 0;
  std::vector<const void*> payloads_ STRATA_GUARDED_BY(mu_);
  const Merge* merge_ STRATA_GUARDED_BY(mu_) = nullptr;
  std::shared_ptr<void> result_ STRATA_GUARDED_BY(mu_);
  std::exception_ptr error_ STRATA_GUARDED_BY(mu_);
};

}  // namespace strata::distribute::internal
