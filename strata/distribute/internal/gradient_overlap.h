#pragma once
// GradientOverlap: one local replica's all-reduce of its gradients overlapped
// with the backward pass (CommunicationOptions.overlap_gradient_reduction), as
// PyTorch DDP's gradient buckets.
//
//   // on replica thread r, inside tape.gradient(loss, variables):
//   auto sink = overlap.sink(variables.size());   // the tape reports to it
//   sink->gradient_final(3, g3);                  // as the backward pass finishes each
//   ...                                           // full buckets go to the communication thread
//   // later, in apply_gradients' all-reduce on the same thread:
//   if (auto reduced = overlap.take(grads, /*sum=*/true)) return *reduced;
//   overlap.drain();                              // else: the thread is idle, reduce as before
//
// Buckets: gradients are appended, in the order the tape finishes them, to the
// open bucket; once it holds bucket_bytes or more it is handed to the
// communication thread, which all-reduces it (SUM) through the strategy's
// group with this replica's rank; the last gradient of the pass closes the
// last bucket. Every replica of every worker runs the same ops, so forms the
// same buckets in the same order and issues the same collectives.
//
// take(): the values of a SUM all-reduce are used from the early reduction
// only when they are exactly the defined gradients one completed pass
// produced (the same tensors, in any order) on every replica: the replicas
// agree with one small all-reduce (MAX of the index of the matching pass and
// of its negation) queued behind the buckets. When any replica's values
// differ (the user clipped, scaled or chose other gradients, or reduces
// something else), every replica answers nullopt and its caller reduces its
// values itself, after the queue has run dry: the early results are dropped
// once some replica did not use them. A pass nobody matched stays for a
// later all-reduce of the step; finish_step() drops what is left.
//
// Order with the replica thread's own collectives: each rank of a group is
// driven by one thread at a time, and every worker must issue the same
// collectives in the same order. The replica thread calls drain() before
// each collective of its own (the strategy does, in every path that uses the
// group from a replica thread, and at the end of the step), so the queued
// buckets always come first, in the same place on every worker.
//
// Failures: a job that throws (a dead peer, a timeout naming the task that
// never entered the collective, an abort after another replica failed)
// fails every later job of the queue with the same exception, and take(),
// drain() and finish_step() rethrow it, the same named error the replica
// would have got from its own all-reduce. Every wait for the thread is
// bounded: DeadlineExceededError when the thread finished no job for
// stall_timeout (each job is itself bounded by the group's timeout).
//
// Thread-safety: sink, take, drain and finish_step on the replica's thread
// only; recover() and stats() when the replica thread is idle (between
// steps). The destructor waits for the queued jobs and joins the thread.

#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "strata/base/mutex.h"
#include "strata/core/device.h"
#include "strata/core/tensor.h"
#include "strata/distribute/communication_options.h"
#include "strata/ops/collective_ops.h"

namespace strata::collective {
class Collectives;
}

namespace strata::distribute::internal {

// A thread that runs jobs in the order they were posted.
// Thread-safety: thread-safe.
class CommunicationThread {
 public:
  // The thread works under `device` (a DeviceScope) and flushes denormals,
  // as the replica threads do, so its arithmetic gives the same bits.
  CommunicationThread(const Device& device, std::string name);
  ~CommunicationThread();
  CommunicationThread(const CommunicationThread&) = delete;
  CommunicationThread& operator=(const CommunicationThread&) = delete;

  // Queues `job` and returns its ticket (1, 2, ... in posting order). Once a
  // job threw, later jobs are not run: they fail with the same exception.
  uint64_t post(std::function<void()> job);
  // Returns once job `ticket` is done; rethrows the first failure among the
  // jobs up to it. DeadlineExceededError (naming `waiter`) when no job
  // finished for `stall_timeout`.
  void wait(uint64_t ticket, std::chrono::milliseconds stall_timeout, const std::string& waiter);
  // The ticket of the last job posted (0: none).
  uint64_t last_ticket() const;
  // Waits for every posted job without rethrowing; false if a job is still
  // running after no progress for `stall_timeout`.
  bool wait_idle(std::chrono::milliseconds stall_timeout);
  // Forgets the failure, so that the next jobs run (once idle).
  void clear_failure();

 private:
  void main_loop();

  std::string name_;
  mutable Mutex mu_;
  CondVar changed_;
  std::deque<std::function<void()>> queue_ STRATA_GUARDED_BY(mu_);
  uint64_t posted_ STRATA_GUARDED_BY(mu_) = 0;
  uint64_t done_ STRATA_GUARDED_BY(mu_) = 0;
  uint64_t failed_at_ STRATA_GUARDED_BY(mu_) = 0;  // ticket of the first failed job, 0: none
  std::exception_ptr failure_ STRATA_GUARDED_BY(mu_);
  bool stop_ STRATA_GUARDED_BY(mu_) = false;
  const Device* device_;
  std::jthread thread_;  // last: started once the members above exist
};

struct GradientOverlapOptions {
  int64_t bucket_bytes = 0;
  // The longest a replica waits for its communication thread to finish a
  // job (each job is bounded by the group's own timeout).
  std::chrono::milliseconds stall_timeout{0};
  // "MultiWorkerMirroredStrategy replica 0": who waits, for error messages.
  std::string owner;
};

class GradientOverlap {
 public:
  // `group`: the strategy's collectives, used with `rank` (this replica's
  // global replica id).
  GradientOverlap(std::shared_ptr<collective::Collectives> group, int rank, const Device& device,
                  GradientOverlapOptions options);
  ~GradientOverlap();
  GradientOverlap(const GradientOverlap&) = delete;
  GradientOverlap& operator=(const GradientOverlap&) = delete;

  // The sink for one tape.gradient of `num_sources` variables.
  std::unique_ptr<GradientSink> sink(size_t num_sources);
  // The SUM across every replica of `values` from the early reduction, or
  // nullopt (see above). Collective while a completed pass is outstanding:
  // every replica must call it at the same point.
  std::optional<std::vector<Tensor>> take(const std::vector<Tensor>& values, bool sum);
  // Returns once the communication thread is idle; rethrows its failure.
  void drain();
  // End of a step on the replica thread: drain(), then drop the passes not used.
  void finish_step();
  // After a failed step, from the driving thread (the group was aborted, so
  // the queued jobs end quickly): waits for the thread, drops every pass and
  // the failure.
  void recover();
  GradientOverlapCounts counts() const { return counts_; }

 private:
  class Sink;
  struct Bucket {
    std::vector<Tensor> inputs;
    std::vector<Tensor> outputs;  // written by the communication thread
    uint64_t ticket = 0;
  };
  struct Pass {
    std::vector<std::shared_ptr<Bucket>> buckets;
    // Tensor id of each gradient -> (bucket, position in it).
    std::vector<std::pair<uint64_t, std::pair<size_t, size_t>>> where;
  };
  void post_bucket(const std::shared_ptr<Bucket>& bucket);
  void pass_completed(std::shared_ptr<Pass> pass);
  // Index of the outstanding pass whose gradients `values` are, or -1.
  int64_t matching_pass(const std::vector<Tensor>& values) const;

  std::shared_ptr<collective::Collectives> group_;
  int rank_;
  GradientOverlapOptions options_;
  std::vector<std::shared_ptr<Pass>> passes_;  // completed, not yet used
  GradientOverlapCounts counts_;
  CommunicationThread thread_;
};

}  // namespace strata::distribute::internal
