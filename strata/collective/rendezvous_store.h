#pragma once
// RendezvousStore: the key-value store through which the ranks of a
// cross-process group exchange their addresses before any collective runs
// (STYLE §10: a store only for rendezvous). The collective layer defines the
// interface it needs; the distribute layer adapts cluster::Store (the TCP store
// the chief serves) to it, and tests use InMemoryRendezvousStore.
//
//   auto store = std::make_shared<strata::collective::InMemoryRendezvousStore>();
//   // one GlooCollectives per rank (process or thread), all on the same store:
//   strata::collective::GlooCollectives group(rank, 2, store);
//
// Keys, once set, hold bytes; readers block (up to a timeout) until a key
// appears. Implementations are thread-safe.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "strata/base/mutex.h"

namespace strata::collective {

class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  // Sets (or overwrites) `key` and wakes its waiters.
  virtual void set(const std::string& key, const std::vector<char>& value) = 0;
  // The value of `key`, waiting up to `timeout` for it to be set;
  // DeadlineExceededError naming the key when it is not.
  virtual std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Returns once every key is set; DeadlineExceededError listing the missing
  // keys after `timeout`.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
};

// A store inside one process (ranks on threads, tests). Thread-safe.
class InMemoryRendezvousStore final : public RendezvousStore {
 public:
  void set(const std::string& key, const std::vector<char>& value) override;
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

 private:
  Mutex mu_;
  CondVar cv_;
  std::map<std::string, std::vector<char>> values_ STRATA_GUARDED_BY(mu_);
};

}  // namespace strata::collective
