#pragma once
// Private to GlooCollectives (not installed), and the only header that includes
// Gloo: the shims between Gloo and Strata. StoreAdapter lets Gloo's rendezvous
// use a strata::Store; MeshContext is a full-mesh Gloo context whose operations
// abort() can interrupt from another thread.
//
//   auto ctx = std::make_shared<MeshContext>(rank, size);
//   StoreAdapter adapter(store, "strata/gloo/0/", Clock::now() + timeout, rank, size, name_of);
//   ctx->connect(adapter, device, timeout); // Gloo's connectFullMesh
//   ctx->abort("worker 1 failed");          // wakes every wait, resets every connection
//
// Thread-safety: MeshContext::abort may be called from any thread; the rest
// follows Gloo's contexts (one call at a time).

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/unbound_buffer.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/base/store.h"
#include "strata/base/str_cat.h"
#include "strata/base/thread_annotations.h"

namespace strata::collective::internal {

using Milliseconds = std::chrono::milliseconds;

// gloo::rendezvous::Store over a strata::Store, with this epoch's key prefix.
// Every call ends by the rendezvous deadline: it gets what remains of it (at
// least 1 ms, so a call past the deadline fails at once).
//
// A rank whose part of the rendezvous fails says so (abandon: the key
// "abandoned/<rank>" holds why), and every wait of the others ends soon
// after with UnavailableError naming it: a rank that failed never publishes
// what the later steps wait for (its direct-mesh address, say), and its
// peers would otherwise wait for it until the deadline while it has moved on
// to the next attempt. Waits look for that key between slices of
// kAbandonPoll; throw_if_abandoned() looks once (for waits outside the store).
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Milliseconds kAbandonPoll{200};

  // `rank` of `size` ranks; name(p) names rank p in errors.
  StoreAdapter(strata::Store& store, std::string prefix, Clock::time_point deadline, int rank,
               int size, std::function<std::string(int)> name)
      : store_(store),
        prefix_(std::move(prefix)),
        deadline_(deadline),
        rank_(rank),
        size_(size),
        name_(std::move(name)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, data, remaining());
  }
  std::vector<char> get(const std::string& key) override {
    std::vector<char> value;
    sliced([&](Milliseconds slice) { value = store_.get(prefix_ + key, slice); });
    return value;
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, remaining()); }
  // Gloo passes its context's timeout, which MeshContext shortens while
  // connecting (see GlooCollectives' connect): the deadline governs instead.
  void wait(const std::vector<std::string>& keys, const Milliseconds& /*timeout*/) override {
    std::vector<std::string> prefixed;
    prefixed.reserve(keys.size());
    for (const auto& k : keys) prefixed.push_back(prefix_ + k);
    sliced([&](Milliseconds slice) { store_.wait(prefixed, slice); });
  }

  // Tells the other ranks that this rank gave up the rendezvous because of
  // `why`. Best effort (the store may be what failed): never throws.
  void abandon(const std::string& why) noexcept {
    try {
      const Milliseconds left = std::min(remaining(), Milliseconds(2000));
      store_.set(abandoned_key(rank_), std::vector<char>(why.begin(), why.end()), left);
    } catch (...) {  // NOLINT(bugprone-empty-catch): the caller's own error stands
    }
  }

  // UnavailableError when another rank abandoned the rendezvous.
  void throw_if_abandoned() {
    for (int p = 0; p < size_; ++p) {
      if (p == rank_ || !store_.check({abandoned_key(p)}, remaining())) continue;
      const std::vector<char> why = store_.get(abandoned_key(p), remaining());
      throw UnavailableError(
          str_cat(name_(p), " gave up this rendezvous: ", std::string(why.begin(), why.end())));
    }
  }

 private:
  Milliseconds remaining() const {
    return std::max(std::chrono::duration_cast<Milliseconds>(deadline_ - Clock::now()),
                    Milliseconds(1));
  }
  std::string abandoned_key(int p) const { return str_cat(prefix_, "abandoned/", p); }

  // Runs `wait_for(slice)` in slices of at most kAbandonPoll until it
  // returns, looking for an abandoned peer after each slice that timed out;
  // past the deadline the last slice's DeadlineExceededError stands.
  template <typename WaitFor>
  void sliced(WaitFor&& wait_for) {
    for (;;) {
      const Milliseconds left = remaining();
      try {
        wait_for(std::min(left, kAbandonPoll));
        return;
      } catch (const DeadlineExceededError&) {
        if (left <= kAbandonPoll) throw;
      }
      throw_if_abandoned();
    }
  }

  strata::Store& store_;
  const std::string prefix_;
  const Clock::time_point deadline_;
  const int rank_;
  const int size_;
  const std::function<std::string(int)> name_;
};

// --- abort support -------------------------------------------------------------
// Gloo's public API cannot interrupt an operation in flight from another
// thread. Its transport can: an unbound buffer's wait returns false after
// abortWaitRecv()/abortWaitSend(). Every buffer Gloo's algorithms (and the
// header exchange) create goes through the context's transport context, so the
// connected context's transport context is wrapped: the wrapper hands out
// buffers that register themselves, and abort() aborts the waits of every live
// buffer (the waiter then throws) and closes every connection (so the peers'
// reads fail instead of waiting out their timeouts).

class AbortRegistry;

class AbortableBuffer final : public gloo::transport::UnboundBuffer {
 public:
  AbortableBuffer(std::unique_ptr<gloo::transport::UnboundBuffer> inner,
                  std::shared_ptr<AbortRegistry> registry);
  ~AbortableBuffer() override;

  bool waitRecv(int* rank, Milliseconds timeout) override;
  bool waitSend(int* rank, Milliseconds timeout) override;
  void abortWaitRecv() override { inner_->abortWaitRecv(); }
  void abortWaitSend() override { inner_->abortWaitSend(); }
  void send(int dst, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->send(dst, slot, offset, nbytes);
  }
  void recv(int src, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->recv(src, slot, offset, nbytes);
  }
  void recv(std::vector<int> srcs, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->recv(std::move(srcs), slot, offset, nbytes);
  }

 private:
  const std::unique_ptr<gloo::transport::UnboundBuffer> inner_;
  const std::shared_ptr<AbortRegistry> registry_;
};

// The live buffers of one context and whether it was aborted. Thread-safe.
class AbortRegistry {
 public:
  // False (and the abort message) when already aborted.
  bool add(AbortableBuffer* b) {
    MutexLock lock(mu_);
    live_.push_back(b);
    return !aborted_;
  }
  void remove(AbortableBuffer* b) {
    MutexLock lock(mu_);
    live_.erase(std::find(live_.begin(), live_.end(), b));
  }
  void abort(const std::string& message) {
    MutexLock lock(mu_);
    if (!aborted_) {
      aborted_ = true;
      message_ = message;
    }
    for (AbortableBuffer* b : live_) {
      b->abortWaitRecv();
      b->abortWaitSend();
    }
  }
  [[noreturn]] void throw_aborted() {
    MutexLock lock(mu_);
    throw gloo::IoException(message_.empty() ? std::string("aborted") : message_);
  }
  bool aborted() {
    MutexLock lock(mu_);
    return aborted_;
  }
  // The connection to the only peer broke (MeshContext::lose): wakes every
  // wait; a wait whose operation already completed still returns it, the
  // others throw `message` (throw_lost).
  void lose(const std::string& message) {
    MutexLock lock(mu_);
    if (lost_) return;
    lost_ = true;
    lost_message_ = message;
    for (AbortableBuffer* b : live_) {
      b->abortWaitRecv();
      b->abortWaitSend();
    }
  }
  bool lost() {
    MutexLock lock(mu_);
    return lost_;
  }
  [[noreturn]] void throw_lost() {
    MutexLock lock(mu_);
    throw gloo::IoException(lost_message_);
  }

 private:
  Mutex mu_;
  std::vector<AbortableBuffer*> live_ STRATA_GUARDED_BY(mu_);
  bool aborted_ STRATA_GUARDED_BY(mu_) = false;
  std::string message_ STRATA_GUARDED_BY(mu_);
  bool lost_ STRATA_GUARDED_BY(mu_) = false;
  std::string lost_message_ STRATA_GUARDED_BY(mu_);
};

class AbortableTransport final : public gloo::transport::Context {
 public:
  AbortableTransport(std::shared_ptr<gloo::transport::Context> inner,
                     std::shared_ptr<AbortRegistry> registry)
      : gloo::transport::Context(inner->rank, inner->size),
        inner_(std::move(inner)),
        registry_(std::move(registry)) {
    setTimeout(inner_->getTimeout());
  }
  // Parameters are named peer/bytes: Gloo's Context has members rank and size.
  std::unique_ptr<gloo::transport::Pair>& getPair(int peer) override {
    return inner_->getPair(peer);
  }
  std::unique_ptr<gloo::transport::Pair>& createPair(int peer) override {
    return inner_->createPair(peer);
  }
  std::unique_ptr<gloo::transport::UnboundBuffer> createUnboundBuffer(void* ptr,
                                                                      size_t bytes) override {
    return std::make_unique<AbortableBuffer>(inner_->createUnboundBuffer(ptr, bytes), registry_);
  }

 private:
  const std::shared_ptr<gloo::transport::Context> inner_;
  const std::shared_ptr<AbortRegistry> registry_;
};

// The buffer of MeshContext's connection watch, in a type of its own so that
// the ThreadSanitizer suppressions of Gloo's buffer teardown
// (gloo_collectives.cc) can name its destructor.
class ConnectionWatch {
 public:
  explicit ConnectionWatch(std::unique_ptr<gloo::transport::UnboundBuffer> buffer)
      : buffer_(std::move(buffer)) {}
  ~ConnectionWatch();
  ConnectionWatch(const ConnectionWatch&) = delete;
  ConnectionWatch& operator=(const ConnectionWatch&) = delete;
  gloo::transport::UnboundBuffer& buffer() { return *buffer_; }

 private:
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
};

// A full-mesh context whose operations abort() can interrupt.
class MeshContext final : public gloo::rendezvous::Context {
 public:
  MeshContext(int this_rank, int num_ranks) : gloo::rendezvous::Context(this_rank, num_ranks) {}

  // Connects with this context's current timeout (Gloo waits five times it
  // for each pair), then sets `timeout` as the default of every later wait
  // and posts the connection watch on `watch_slot` (see connection_lost).
  void connect(gloo::rendezvous::Store& store, std::shared_ptr<gloo::transport::Device>& device,
               Milliseconds timeout, uint64_t watch_slot) {
    connectFullMesh(store, device);
    setTimeout(timeout);
    transportContext_->setTimeout(timeout);
    {
      MutexLock lock(watch_mu_);
      watch_ = std::make_unique<ConnectionWatch>(
          transportContext_->createUnboundBuffer(&watch_byte_, 1));
      for (int r = 0; r < size; ++r) {
        if (r != rank) watch_->buffer().recv(r, watch_slot, 0, 1);
      }
    }
    transportContext_ = std::make_shared<AbortableTransport>(transportContext_, registry_);
  }

  // Whether a connection of this context has failed, and Gloo's message for
  // it. Gloo's TCP pair, when its connection breaks, fails the operations it
  // has queued but not the send or receive it is in the middle of (nor a send
  // whose write the reset cut short), so a rank whose peer died during a
  // large transfer would wait out its timeout. The watch is a receive posted on every connection at
  // connect time that no peer ever sends to: it stays queued, so a broken connection always fails
  // it. Looking costs nothing and disturbs nothing (the wait is interrupted before it starts; it
  // throws only when the watch has failed).
  bool connection_lost(std::string* why) {
    MutexLock lock(watch_mu_);
    if (watch_ == nullptr) return false;
    watch_->buffer().abortWaitRecv();
    try {
      watch_->buffer().waitRecv(nullptr, Milliseconds(1));
    } catch (const gloo::Exception& e) {
      *why = e.what();
      return true;
    }
    return false;
  }

  void abort(const std::string& message) {
    registry_->abort(message);
    close_pairs();
  }

  // The IP address this rank's connections use (that of its pair to any
  // peer): where it listens for connections of its own. Needs a peer.
  std::string local_host() {
    for (int r = 0; r < size; ++r) {
      if (r == rank || !getPair(r)) continue;
      const auto* tcp = dynamic_cast<const gloo::transport::tcp::Address*>(&getPair(r)->address());
      if (tcp == nullptr) break;
      const sockaddr_storage& ss = tcp->getSockaddr();
      char text[INET6_ADDRSTRLEN] = {};
      const void* ip =
          ss.ss_family == AF_INET6
              ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr)
              : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr);
      if (::inet_ntop(ss.ss_family, ip, text, sizeof(text)) != nullptr) return text;
    }
    throw UnavailableError("GlooCollectives: no TCP connection to tell this rank's address");
  }

  // The connection to the peer of a two-rank context broke (connection_lost):
  // nothing more can arrive, so every wait that has not completed fails with
  // `message` instead of waiting out its timeout.
  void lose(const std::string& message) { registry_->lose(message); }

  // Resets every connection (Gloo's hard close: SO_LINGER 0), so peers fail at
  // once. Only for abort(): a reset discards what this rank wrote but the
  // kernel has not sent yet (a small write can sit corked behind the previous
  // one), so a peer still reading this rank's last message would lose it.
  void close_pairs() {
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      auto& pair = getPair(r);
      if (pair) pair->close();
    }
  }

 private:
  const std::shared_ptr<AbortRegistry> registry_ = std::make_shared<AbortRegistry>();
  Mutex watch_mu_;
  char watch_byte_ = 0;
  // Destroyed before the transport context (a base-class member) it uses.
  std::unique_ptr<ConnectionWatch> watch_ STRATA_GUARDED_BY(watch_mu_);
};

}  // namespace strata::collective::internal
