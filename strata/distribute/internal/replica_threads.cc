#include "strata/distribute/internal/replica_threads.h"

#include <string>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"

namespace strata::distribute::internal {

namespace {
thread_local bool t_on_replica_thread = false;

bool is_secondary(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const AbortedError&) {
    return true;
  } catch (const CancelledError&) {
    return true;
  } catch (...) {
    return false;
  }
}

// Re-throws `e` with its dynamic type preserved and the replica named.
[[noreturn]] void rethrow_naming(const std::exception_ptr& e, int replica, const Device& device) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    throw_error(err.code(), str_cat("replica ", replica, " (", device.name(), "): ", err.what()));
  } catch (const std::exception& err) {
    throw UnknownError(str_cat("replica ", replica, " (", device.name(), "): ", err.what()));
  }
}
}  // namespace

bool ReplicaThreads::on_replica_thread() noexcept { return t_on_replica_thread; }

ReplicaThreads::ReplicaThreads(std::vector<const Device*> devices, FailureHandler on_failure)
    : devices_(std::move(devices)), on_failure_(std::move(on_failure)) {
  STRATA_CHECK_ARG(!devices_.empty(), "ReplicaThreads: expected at least one device, got 0");
  for (size_t i = 0; i < devices_.size(); ++i) slots_.push_back(std::make_unique<Slot>());
  threads_.reserve(devices_.size());
  for (int i = 0; i < size(); ++i) threads_.emplace_back([this, i] { thread_main(i); });
}

ReplicaThreads::~ReplicaThreads() {
  for (auto& slot : slots_) {
    MutexLock lock(slot->mu);
    slot->stop = true;
    slot->wake.notify_one();
  }
  threads_.clear();  // joins
}

void ReplicaThreads::thread_main(int replica) {
  t_on_replica_thread = true;
  DeviceScope device_scope(*devices_[replica]);
  Slot& slot = *slots_[replica];
  uint64_t seen = 0;
  for (;;) {
    {
      MutexLock lock(slot.mu);
      slot.wake.wait(
          slot.mu, [&]() STRATA_REQUIRES(slot.mu) { return slot.stop || slot.generation != seen; });
      if (slot.stop) return;
      seen = slot.generation;
    }
    slot.error = nullptr;
    try {
      (*job_)(replica);
    } catch (...) {
      slot.error = std::current_exception();
      if (on_failure_) on_failure_(replica, slot.error);
    }
    MutexLock lock(done_mu_);
    if (--remaining_ == 0) all_done_.notify_one();
  }
}

void ReplicaThreads::run_all(const Job& job) {
  job_ = &job;
  {
    MutexLock lock(done_mu_);
    remaining_ = size();
  }
  for (auto& slot : slots_) {
    MutexLock lock(slot->mu);
    ++slot->generation;
    slot->wake.notify_one();
  }
  {
    // Bounded by the replicas: a failing replica aborts the collectives the
    // others wait in (on_failure_), so every replica returns.
    MutexLock lock(done_mu_);
    all_done_.wait(done_mu_, [&]() STRATA_REQUIRES(done_mu_) { return remaining_ == 0; });
  }
  job_ = nullptr;
  int first = -1;
  for (int i = 0; i < size(); ++i) {
    if (!slots_[i]->error) continue;
    if (first < 0) first = i;
    if (!is_secondary(slots_[i]->error)) rethrow_naming(slots_[i]->error, i, *devices_[i]);
  }
  if (first >= 0) rethrow_naming(slots_[first]->error, first, *devices_[first]);
}

}  // namespace strata::distribute::internal
