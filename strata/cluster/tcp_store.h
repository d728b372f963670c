#pragma once
// A rendezvous store served over TCP: the chief runs a TcpStoreServer at its
// address, every task (the chief included) talks to it through a TcpStoreClient.
//
//   strata::cluster::TcpStoreServer server("127.0.0.1:0");          // 0 = pick a free port
//   strata::cluster::TcpStoreClient client(server.address(),
//       {.connect_timeout = std::chrono::seconds(30), .timeout = std::chrono::seconds(60)});
//   client.set("rank/0", strata::to_bytes("10.0.0.1:4000"));
//   auto peer = client.get("rank/1", std::chrono::seconds(30));      // blocks until set
//
// Wire protocol (all integers little-endian, encoded byte by byte):
//   frame    := u32 length, then `length` bytes of payload
//   string   := u32 n, then n bytes (keys and values alike)
//   request payload := u8 op, then
//     SET   (1): string key, string value
//     GET   (2): string key, u64 timeout_ms          (waits on the server until set)
//     ADD   (3): string key, i64 delta
//     CHECK (4): u32 count, count x string key
//     WAIT  (5): u32 count, count x string key, u64 timeout_ms
//     HELLO (6): string "strata-store/2", string token  (first frame; OK or ERROR)
//   reply payload := u8 status, then
//     OK        (0): GET: string value | ADD: i64 new value | CHECK: u8 0/1 | SET, WAIT: nothing
//     TIMEOUT   (1): u32 count, count x string missing key   (GET, WAIT)
//     ERROR     (2): string message                           (e.g. ADD on a non-counter)
//     EXHAUSTED (3): string message                           (SET past the memory limit)
// A client sends HELLO right after connecting and waits for its reply, then one request at a time,
// reading its reply before the next (no pipelining); the server answers each
// connection's requests in order.
//
// Nobody is trusted: unknown peers are dropped. A connection whose first frame
// is not a HELLO is closed at once; a HELLO whose cluster token differs from
// the server's (compared in constant time; strata/cluster/cluster_token.h) is
// answered ERROR and closed (the client's UnauthenticatedError says the tokens
// differ, never what either is); a connection that sends
// no complete HELLO within the server's handshake_timeout (a stray or idle
// connection, a port scanner) is closed then; before its HELLO a connection
// may announce no frame over 512 bytes. After it, a frame over max_frame_bytes,
// an unknown op or a malformed payload close the connection, so one peer holds
// at most one frame of memory. A SET that would take the data past
// max_memory_bytes is refused (ResourceExhaustedError at the client naming the
// key, the sizes and the limit) and the store is left as it was. None of this
// disturbs the other connections.
//
// Errors: a server that cannot be reached within connect_timeout, or that goes
// away during a call, is UnavailableError naming the address; a wait that the
// server reports expired is DeadlineExceededError naming the missing keys and the
// time waited; a server that does not answer within the call's deadline is
// DeadlineExceededError too. The connection survives that: the next call
// first finishes sending what the late call had not sent and reads and drops
// the reply it was owed, all within its own deadline (when it cannot, it
// fails the same way without sending its own request), so a store host that
// pauses (stopped, swapping, overloaded) costs the calls made during the
// pause their deadlines and serves again once it answers. A late call may
// still take effect on the server. A connection that closes or breaks is
// gone: later calls are UnavailableError at once.
//
// Deadlines: set/add/check(t) give up after t; get/wait(t) let the server wait
// t and give its reply a further allowance of t/10, at least 1 s and at most
// 5 s (reply_allowance), so a stopped or hung server holds a caller at most
// t + allowance. Callers inside a larger operation pass what remains of it. After abort() every
// pending and later call throws AbortedError. Everything is poll()-based with a deadline; nothing
// blocks without one.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/mutex.h"
#include "strata/base/store.h"
#include "strata/base/thread_annotations.h"
#include "strata/cluster/socket.h"  // split_host_port: addresses are host:port

namespace strata::cluster {

namespace internal {
struct ServerState;
}  // namespace internal

struct TcpStoreServerOptions {
  // How long a new connection may take to send its HELLO frame before it is
  // closed as an unknown peer.
  Milliseconds handshake_timeout = std::chrono::seconds(5);
  // The cluster token every client must present ("" accepts only clients
  // presenting none). The default is $STRATA_CLUSTER_TOKEN (cluster_token()).
  std::optional<std::string> token = std::nullopt;
  // The largest request frame (payload bytes); a larger one closes its connection.
  uint32_t max_frame_bytes = 64u << 20;
  // The most bytes of keys and values the store holds; a SET beyond is refused.
  uint64_t max_memory_bytes = uint64_t{512} << 20;
};

// Serves the store on a background thread (one poll() loop for all clients),
// joined on destruction; destruction closes every client connection. Thread-safe
// (address()/port() are immutable).
class TcpStoreServer {
 public:
  // `address` is "host:port" ("127.0.0.1:0", "0.0.0.0:2222", "[::1]:0"); port 0
  // picks a free port. Throws UnavailableError naming the address if it cannot
  // be bound, InvalidArgumentError if it is malformed, an option is not
  // positive or the token is malformed.
  explicit TcpStoreServer(const std::string& address = "127.0.0.1:0",
                          TcpStoreServerOptions options = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // "host:port" with the bound port.
  const std::string& address() const noexcept { return address_; }
  int port() const noexcept { return port_; }

 private:
  void serve(const std::stop_token& stop);

  std::string address_;
  int port_ = 0;
  std::unique_ptr<internal::ServerState> state_;
  std::jthread thread_;  // last: started after, and joined before, the state it uses
};

struct TcpStoreClientOptions {
  // How long the constructor keeps retrying to connect (the start-up deadline).
  Milliseconds connect_timeout = std::chrono::seconds(60);
  // The timeout of the calls that give none (Store::timeout()).
  Milliseconds timeout = std::chrono::seconds(300);
  // The cluster token presented in the HELLO; the default is
  // $STRATA_CLUSTER_TOKEN (cluster_token()).
  std::optional<std::string> token = std::nullopt;
  // The largest request frame sent; a larger SET is InvalidArgumentError
  // naming the key and its size, before anything is sent.
  uint32_t max_frame_bytes = 64u << 20;
};

// One connection to a TcpStoreServer. Thread-safe: calls from several threads
// are serialised on the connection; abort() may be called from any thread and
// wakes a call in progress.
class TcpStoreClient : public Store {
 public:
  // Connects, retrying until options.connect_timeout; then UnavailableError
  // naming `address` and the last socket error. UnauthenticatedError at once
  // when the server refuses this client's cluster token.
  explicit TcpStoreClient(std::string address, TcpStoreClientOptions options = {});
  ~TcpStoreClient() override;
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

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

  // How long after a wait of `wait_time` the client still waits for the
  // server's reply: wait_time / 10, clamped to [1 s, 5 s].
  static Milliseconds reply_allowance(Milliseconds wait_time);

  const std::string& address() const noexcept { return address_; }

 private:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Sends `request`, returns the reply payload; DeadlineExceededError when no
  // reply came within `limit`. `what` names the call in errors.
  std::string call(const std::string& request, Milliseconds limit, const std::string& what);
  std::string call_in_turn(const std::string& request, Milliseconds limit, TimePoint deadline,
                           const std::string& what);
  // Marks the connection lost and throws `code` naming the call.
  [[noreturn]] void lose_connection(ErrorCode code, const std::string& what, const std::string& why)
      STRATA_REQUIRES(mu_);
  [[noreturn]] void lose_connection_to_errno(const std::string& what) STRATA_REQUIRES(mu_);
  // Waits for the socket to be ready for `events`: false at the deadline,
  // AbortedError after abort().
  bool wait_ready(short events, TimePoint deadline, const std::string& what) STRATA_REQUIRES(mu_);
  // Sends unsent_: false at the deadline, unsent_ then holding the rest.
  bool send_pending(TimePoint deadline, const std::string& what) STRATA_REQUIRES(mu_);
  // The next reply frame's payload: nullopt at the deadline, partial_reply_
  // then holding what arrived of it.
  std::optional<std::string> read_reply(TimePoint deadline, const std::string& what)
      STRATA_REQUIRES(mu_);
  // Reads and drops the replies owed to calls that ran out of time: false at
  // the deadline.
  bool skip_owed_replies(TimePoint deadline, const std::string& what) STRATA_REQUIRES(mu_);

  const std::string address_;
  const TcpStoreClientOptions options_;
  const std::string token_;
  UniqueFd abort_read_, abort_write_;
  std::atomic<bool> aborted_{false};
  // One call at a time uses the connection; a call waits for its turn only
  // until its own deadline (a call stuck on a slow server does not extend
  // the calls queued behind it).
  Mutex turn_mu_;
  CondVar turn_cv_;
  bool busy_ STRATA_GUARDED_BY(turn_mu_) = false;
  // The connection's state, held by the call whose turn it is.
  Mutex mu_;
  UniqueFd socket_ STRATA_GUARDED_BY(mu_);
  bool broken_ STRATA_GUARDED_BY(mu_) = false;
  // The stream state a call that ran out of time leaves for the next: the
  // rest of its request frame, the replies still to come before the next
  // call's own, and the bytes of the next reply received so far.
  std::string unsent_ STRATA_GUARDED_BY(mu_);
  int owed_replies_ STRATA_GUARDED_BY(mu_) = 0;
  std::string partial_reply_ STRATA_GUARDED_BY(mu_);
};

}  // namespace strata::cluster
