#include "strata/distribute/internal/replica_threads.h"

#include <string>
#include <thread>

#include "strata/base/denormal.h"
#include "strata/base/errors.h"
#include "strata/base/mutex.h"

namespace strata::distribute::internal {

namespace {
thread_local bool t_on_replica_thread = false;

// Polls done() until it holds or `budget` has passed; returns done(). Each
// poll yields the processor: on an idle core the yield returns at once, on a
// busy machine the thread being waited for (or anyone else) runs instead of
// the poller.
template <typename Done>
bool spin_until(const Done& done, std::chrono::microseconds budget) {
  if (done()) return true;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    std::this_thread::yield();
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

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
  const ScopedFlushDenormal flush;  // as every runtime thread (strata/base/denormal.h)
  Slot& slot = *slots_[replica];
  uint64_t seen = 0;
  for (;;) {
    // A job posted soon after the last one is seen while spinning (the
    // acquire load publishes job_); else sleep until one is posted or stop.
    if (!spin_until([&] { return slot.posted.load(std::memory_order_acquire) != seen; },
                    kReplicaSpin)) {
      MutexLock lock(slot.mu);
      slot.wake.wait(
          slot.mu, [&]() STRATA_REQUIRES(slot.mu) { return slot.stop || slot.generation != seen; });
      if (slot.stop) return;
    }
    seen = slot.posted.load(std::memory_order_acquire);
    slot.error = nullptr;
    try {
      (*job_)(replica);
    } catch (...) {
      slot.error = std::current_exception();
      if (on_failure_) on_failure_(replica, slot.error);
    }
    // The release publishes slot.error to run_all.
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      MutexLock lock(done_mu_);
      all_done_.notify_one();
    }
  }
}

void ReplicaThreads::run_all(const Job& job) {
  job_ = &job;
  remaining_.store(size(), std::memory_order_relaxed);
  for (auto& slot : slots_) {
    {
      MutexLock lock(slot->mu);
      ++slot->generation;
      // The release publishes job_ and remaining_ to a spinning replica.
      slot->posted.store(slot->generation, std::memory_order_release);
    }
    slot->wake.notify_one();
  }
  auto all_done = [this] { return remaining_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(all_done, kCallerSpin)) {
    // Bounded by the replicas: a failing replica aborts the collectives the
    // others wait in (on_failure_), so every replica returns.
    MutexLock lock(done_mu_);
    all_done_.wait(done_mu_, all_done);
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
