#include "strata/collective/rendezvous_store.h"

#include "strata/base/errors.h"
#include "strata/base/mutex.h"

namespace strata::collective {

void InMemoryRendezvousStore::set(const std::string& key, const std::vector<char>& value) {
  {
    MutexLock lock(mu_);
    values_[key] = value;
  }
  cv_.notify_all();
}

std::vector<char> InMemoryRendezvousStore::get(const std::string& key,
                                               std::chrono::milliseconds timeout) {
  wait({key}, timeout);
  MutexLock lock(mu_);
  return values_.at(key);
}

void InMemoryRendezvousStore::wait(const std::vector<std::string>& keys,
                                   std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  auto all_set = [&]() STRATA_REQUIRES(mu_) {
    for (const auto& k : keys) {
      if (values_.find(k) == values_.end()) return false;
    }
    return true;
  };
  if (cv_.wait_for(mu_, timeout, all_set)) return;
  std::vector<std::string> missing;
  for (const auto& k : keys) {
    if (values_.find(k) == values_.end()) missing.push_back(k);
  }
  throw DeadlineExceededError(
      str_cat("InMemoryRendezvousStore: waited ", timeout.count(), "ms for keys ", missing));
}

}  // namespace strata::collective
