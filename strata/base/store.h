#pragma once
// The rendezvous key-value store (STYLE §10): how the ranks of a group find
// each other before collectives exist. One interface for every layer: the
// cluster layer serves it over TCP (strata/cluster/tcp_store.h), the collective
// layer's Gloo groups meet through it, and InMemoryStore below serves ranks that
// are threads of one process. A key, once set, holds bytes; readers block (with
// a timeout) until it appears. Counters (add) are stored as the decimal text of
// their value, so get() of a counter returns e.g. "3".
//
//   strata::InMemoryStore store;
//   std::jthread peer([&] { store.set("addr/1", to_bytes("10.0.0.2:5555")); });
//   auto address = store.get("addr/1", std::chrono::seconds(30));   // blocks until set
//   int64_t arrived = store.add("barrier/0", 1);                     // atomic counter
//   store.wait({"addr/0", "addr/1"}, std::chrono::seconds(30));
//
// Deadlines: every call is bounded. get() and wait() wait up to their timeout
// for the keys; set(), add() and check() take a timeout too, the bound on the
// whole call (a store served by another process may not answer: its host is
// stopped or gone). A caller inside a larger operation passes what remains of
// the operation's deadline; the overloads without a timeout use timeout().
//
// Errors: a wait that expires is DeadlineExceededError naming the key(s) still
// missing and the time waited; after abort() every pending and later wait throws
// AbortedError; add() on a key that holds non-counter bytes is
// InvalidArgumentError. The byte type is std::vector<char>, as Gloo's store.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "strata/base/mutex.h"
#include "strata/base/thread_annotations.h"

namespace strata {

using Bytes = std::vector<char>;
using Milliseconds = std::chrono::milliseconds;

Bytes to_bytes(std::string_view s);
std::string to_string(const Bytes& b);

// Interface. Implementations are thread-safe.
class Store {
 public:
  virtual ~Store() = default;

  // Sets (or overwrites) `key` and wakes its waiters, within `timeout`.
  virtual void set(const std::string& key, const Bytes& value, Milliseconds timeout) = 0;
  // The value of `key`, waiting up to `timeout` for it to be set.
  virtual Bytes get(const std::string& key, Milliseconds timeout) = 0;
  // Returns once every key is set; DeadlineExceededError after `timeout` lists the missing ones.
  virtual void wait(const std::vector<std::string>& keys, Milliseconds timeout) = 0;
  // Adds `delta` to the counter `key` (missing = 0) and returns the new value,
  // atomically, within `timeout`.
  virtual int64_t add(const std::string& key, int64_t delta, Milliseconds timeout) = 0;
  // True when every key is set; never waits for keys (one round trip within `timeout`).
  virtual bool check(const std::vector<std::string>& keys, Milliseconds timeout) = 0;
  // Wakes every waiter of this store object with AbortedError; later waits fail too.
  virtual void abort() = 0;

  // The timeout used by the overloads without one.
  virtual Milliseconds timeout() const = 0;
  void set(const std::string& key, const Bytes& value) { set(key, value, timeout()); }
  Bytes get(const std::string& key) { return get(key, timeout()); }
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  int64_t add(const std::string& key, int64_t delta) { return add(key, delta, timeout()); }
  bool check(const std::vector<std::string>& keys) { return check(keys, timeout()); }
};

struct InMemoryStoreOptions {
  Milliseconds timeout = std::chrono::seconds(300);  // as torch.distributed's default
};

// A store inside one process (for replica threads and tests). Thread-safe.
class InMemoryStore : public Store {
 public:
  explicit InMemoryStore(InMemoryStoreOptions options = {});

  // set(), add() and check() never block beyond the store's mutex: their timeout is unused.
  void set(const std::string& key, const Bytes& value, Milliseconds timeout) override;
  Bytes get(const std::string& key, Milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta, Milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys, Milliseconds timeout) override;
  void abort() override;
  Milliseconds timeout() const override { return options_.timeout; }
  using Store::add;
  using Store::check;
  using Store::get;
  using Store::set;
  using Store::wait;

 private:
  const InMemoryStoreOptions options_;
  Mutex mu_;
  CondVar cv_;
  std::map<std::string, Bytes, std::less<>> data_ STRATA_GUARDED_BY(mu_);
  bool aborted_ STRATA_GUARDED_BY(mu_) = false;
};

namespace internal {
// Shared by the stores: the counter arithmetic and the error messages.
int64_t add_to_counter(const std::string& who, const std::string& key, Bytes& value, int64_t delta);
std::string format_duration(Milliseconds d);
}  // namespace internal

}  // namespace strata
