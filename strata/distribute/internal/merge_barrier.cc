#include "strata/distribute/internal/merge_barrier.h"

#include "strata/base/errors.h"
#include "strata/base/mutex.h"

namespace strata::distribute::internal {

namespace {
std::exception_ptr mismatch_error() {
  return std::make_exception_ptr(FailedPreconditionError(
      "Some replicas made a different number of replica_context().merge_call() calls."));
}
}  // namespace

MergeBarrier::MergeBarrier(int num_replicas, std::chrono::milliseconds timeout)
    : num_replicas_(num_replicas), timeout_(timeout), payloads_(num_replicas, nullptr) {}

std::shared_ptr<void> MergeBarrier::arrive(int replica, const void* payload, const Merge& merge) {
  MutexLock lock(mu_);
  if (error_) std::rethrow_exception(error_);
  if (finished_ > 0) {
    error_ = mismatch_error();
    changed_.notify_all();
    std::rethrow_exception(error_);
  }
  const uint64_t round = round_;
  payloads_[replica] = payload;
  if (replica == 0) merge_ = &merge;
  ++arrived_;
  changed_.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto wait_for = [&](auto pred, const char* what) STRATA_REQUIRES(mu_) {
    if (!changed_.wait_until(mu_, deadline,
                             [&]() STRATA_REQUIRES(mu_) { return error_ || pred(); })) {
      error_ = std::make_exception_ptr(DeadlineExceededError(
          str_cat("merge_call: replica ", replica, " waited ", timeout_.count(), " ms for ", what,
                  " (", arrived_, " of ", num_replicas_, " replicas arrived)")));
      changed_.notify_all();
    }
    if (error_) std::rethrow_exception(error_);
  };
  if (replica == 0) {
    wait_for([&]() STRATA_REQUIRES(mu_) { return arrived_ == num_replicas_; },
             "the other replicas");
    std::vector<const void*> payloads = payloads_;
    const Merge* merge_fn = merge_;
    lock.unlock();
    std::shared_ptr<void> result;
    try {
      result = (*merge_fn)(payloads);
    } catch (...) {
      lock.lock();
      error_ = std::current_exception();
      changed_.notify_all();
      std::rethrow_exception(error_);
    }
    lock.lock();
    result_ = std::move(result);
    arrived_ = 0;
    ++round_;
    changed_.notify_all();
    return result_;
  }
  wait_for([&]() STRATA_REQUIRES(mu_) { return round_ != round; }, "replica 0 to run merge_fn");
  return result_;
}

void MergeBarrier::replica_finished(int) {
  MutexLock lock(mu_);
  ++finished_;
  if (arrived_ > 0 && !error_) {
    error_ = mismatch_error();
    changed_.notify_all();
  }
}

void MergeBarrier::abort(std::exception_ptr error) {
  MutexLock lock(mu_);
  if (!error_) error_ = std::move(error);
  changed_.notify_all();
}

void MergeBarrier::reset() {
  MutexLock lock(mu_);
  round_ = 0;
  arrived_ = 0;
  finished_ = 0;
  result_.reset();
  error_ = nullptr;
  std::fill(payloads_.begin(), payloads_.end(), nullptr);
}

}  // namespace strata::distribute::internal
