#include "strata/cluster/tcp_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/base/file.h"

namespace strata::cluster {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

const TcpStoreClientOptions kFast{.connect_timeout = 10s, .timeout = 30s};

// An address on 127.0.0.1 where nothing listens (a server's port, after it closed).
std::string closed_address() {
  std::string address;
  {
    TcpStoreServer server("127.0.0.1:0");
    address = server.address();
  }
  return address;
}

TEST(TcpStoreServer, PortZeroPicksAFreePortAndReportsIt) {
  TcpStoreServer server("127.0.0.1:0");
  EXPECT_GT(server.port(), 0);
  EXPECT_EQ(server.address(), "127.0.0.1:" + std::to_string(server.port()));
}

TEST(TcpStoreServer, MalformedAddressesAreInvalid) {
  EXPECT_THROW(TcpStoreServer("127.0.0.1"), InvalidArgumentError);
  EXPECT_THROW(TcpStoreServer("127.0.0.1:http"), InvalidArgumentError);
  EXPECT_THROW(TcpStoreClient("localhost:99999", kFast), InvalidArgumentError);
}

TEST(TcpStore, ValuesSetByOneClientAreSeenByAnother) {
  TcpStoreServer server;
  TcpStoreClient a(server.address(), kFast), b(server.address(), kFast);
  a.set("rank/0", to_bytes("10.0.0.1:4000"));
  EXPECT_EQ(to_string(b.get("rank/0", 1s)), "10.0.0.1:4000");
  EXPECT_TRUE(b.check({"rank/0"}));
  EXPECT_FALSE(b.check({"rank/0", "rank/1"}));
  b.set("rank/0", {});
  EXPECT_TRUE(a.get("rank/0", 1s).empty());
}

TEST(TcpStore, GetBlocksUntilAnotherClientSets) {
  TcpStoreServer server;
  TcpStoreClient reader(server.address(), kFast);
  std::jthread writer([&] {
    TcpStoreClient client(server.address(), kFast);
    client.wait({"reader-started"}, 30s);
    client.set("key", to_bytes("value"));
  });
  reader.set("reader-started", {});
  EXPECT_EQ(to_string(reader.get("key", 30s)), "value");
}

TEST(TcpStore, ManyClientsOnThreadsShareOneAtomicCounter) {
  TcpStoreServer server;
  constexpr int kThreads = 16, kAdds = 50;
  std::vector<int64_t> last(kThreads);
  {
    std::vector<std::jthread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        TcpStoreClient client(server.address(), kFast);
        for (int i = 0; i < kAdds; ++i) last[t] = client.add("arrived", 1);
        // A barrier: every client waits for the last one's key.
        if (client.add("done", 1) == kThreads) client.set("all-done", {});
        client.wait({"all-done"}, 30s);
      });
    }
  }
  TcpStoreClient client(server.address(), kFast);
  EXPECT_EQ(client.add("arrived", 0), kThreads * kAdds);
  EXPECT_EQ(*std::max_element(last.begin(), last.end()), kThreads * kAdds);
  EXPECT_EQ(to_string(client.get("arrived", 0ms)), std::to_string(kThreads * kAdds));
}

TEST(TcpStore, LargeValuesRoundTrip) {
  TcpStoreServer server;
  TcpStoreClient client(server.address(), kFast);
  Bytes big(8 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  client.set("big", big);
  EXPECT_EQ(client.get("big", 1s), big);
}

TEST(TcpStore, GetTimeoutNamesTheKeyAndTheTimeWaited) {
  TcpStoreServer server;
  TcpStoreClient client(server.address(), kFast);
  try {
    client.get("rank/7", 50ms);
    FAIL();
  } catch (const DeadlineExceededError& e) {
    EXPECT_THAT(e.what(), HasSubstr("key 'rank/7' was not set after waiting"));
    EXPECT_THAT(e.what(), HasSubstr("(timeout 50ms)"));
    EXPECT_THAT(e.what(), HasSubstr(server.address()));
  }
  // The connection stays usable after a timeout.
  client.set("rank/7", to_bytes("x"));
  EXPECT_EQ(to_string(client.get("rank/7", 1s)), "x");
}

TEST(TcpStore, WaitTimeoutListsTheMissingKeys) {
  TcpStoreServer server;
  TcpStoreClient client(server.address(), kFast);
  client.set("a", {});
  try {
    client.wait({"a", "b", "c"}, 30ms);
    FAIL();
  } catch (const DeadlineExceededError& e) {
    EXPECT_THAT(e.what(), HasSubstr("keys ['b', 'c'] still missing"));
  }
}

TEST(TcpStore, AddOnBytesThatAreNotACounterIsInvalid) {
  TcpStoreServer server;
  TcpStoreClient client(server.address(), kFast);
  client.set("k", to_bytes("abc"));
  try {
    client.add("k", 1);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("key 'k'"));
  }
  EXPECT_EQ(client.add("n", 5), 5);
}

TEST(TcpStoreClient, UnreachableAddressIsUnavailableWithinTheDeadline) {
  const std::string address = closed_address();
  const auto start = std::chrono::steady_clock::now();
  try {
    TcpStoreClient client(address, {.connect_timeout = 300ms, .timeout = 1s});
    FAIL();
  } catch (const UnavailableError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("could not connect to the store at " + address + " within 300ms"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(TcpStoreClient, RetriesUntilTheServerStarts) {
  const std::string address = closed_address();
  std::optional<TcpStoreServer> server;
  std::jthread starter([&] { server.emplace(address); });
  TcpStoreClient client(address, kFast);
  starter.join();
  client.set("k", to_bytes("v"));
  EXPECT_EQ(to_string(client.get("k", 1s)), "v");
}

TEST(TcpStoreClient, ServerShutdownWhileWaitingIsUnavailableNamingTheAddress) {
  auto server = std::make_unique<TcpStoreServer>();
  const std::string address = server->address();
  TcpStoreClient waiter(address, kFast);
  TcpStoreClient observer(address, kFast);
  TcpStoreClient signal(address, kFast);
  std::jthread stopper([&] {
    observer.wait({"waiter-started"}, 30s);
    server.reset();
  });
  // Signalled through another client: the server may go away right after.
  signal.set("waiter-started", {});
  try {
    waiter.get("never", 60s);
    FAIL();
  } catch (const UnavailableError& e) {
    EXPECT_THAT(e.what(), StartsWith("TcpStoreClient(" + address + "): get('never')"));
  }
  stopper.join();
  EXPECT_THROW(waiter.set("k", {}), UnavailableError);
}

TEST(TcpStoreClient, AbortWakesAWaitingGet) {
  TcpStoreServer server;
  TcpStoreClient client(server.address(), kFast);
  TcpStoreClient observer(server.address(), kFast);
  TcpStoreClient signal(server.address(), kFast);
  std::jthread aborter([&] {
    observer.wait({"waiting"}, 30s);
    client.abort();
  });
  // Signalled through another client: the abort may come before get() starts.
  signal.set("waiting", {});
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(client.get("never", 60s), AbortedError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_THROW(client.check({"waiting"}), AbortedError);
}

// A store server that answers each connection's HELLO and then nothing more:
// the clients connect, and their calls are never answered (the store of a
// process stopped with SIGSTOP after the job met looks like this).
class SilentServer {
 public:
  SilentServer() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_.get(), 16), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    thread_ = std::jthread([this](const std::stop_token& stop) {
      while (!stop.stop_requested()) {
        pollfd p{fd_.get(), POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        UniqueFd conn(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!conn.valid()) continue;
        // The OK to the HELLO (a one-byte frame), whatever the HELLO said.
        const char ok[] = {1, 0, 0, 0, 0};
        ::send(conn.get(), ok, sizeof(ok), MSG_NOSIGNAL);
        std::lock_guard<std::mutex> lock(mu_);
        conns_.push_back(std::move(conn));
      }
    });
  }
  const std::string& address() const { return address_; }

  // The unread bytes of the newest connection.
  size_t newest_unread() {
    std::lock_guard<std::mutex> lock(mu_);
    int unread = 0;
    if (conns_.empty() || ::ioctl(conns_.back().get(), FIONREAD, &unread) != 0) return 0;
    return size_t(unread);
  }
  // Waits up to `limit` until the newest connection holds more than
  // `bytes` unread bytes (what its client sent: the HELLO, then requests).
  bool newest_holds_more_than(size_t bytes, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        int unread = 0;
        if (!conns_.empty() && ::ioctl(conns_.back().get(), FIONREAD, &unread) == 0 &&
            size_t(unread) > bytes) {
          return true;
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(1ms);
    }
  }

 private:
  UniqueFd fd_;
  std::string address_;
  std::mutex mu_;
  std::vector<UniqueFd> conns_;  // held open, never read again
  std::jthread thread_;          // last: stopped before the descriptors close
};

// A plain TCP connection to `port` on 127.0.0.1 (a stray peer).
UniqueFd raw_connection(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// True when the peer closed `fd` within `limit` (recv returns 0 or an error).
bool closed_within(int fd, std::chrono::milliseconds limit) {
  // Whatever the server sent before closing (its reply to a HELLO) is read
  // and dropped; the end of the stream or a reset is the close.
  const auto deadline = std::chrono::steady_clock::now() + limit;
  char buf[256];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return true;
  }
}

// Runs `call` (a store call) on a thread; if it is still running after
// `limit`, aborts `client` so the test ends, and reports the overrun.
template <typename Fn>
std::chrono::milliseconds time_call(TcpStoreClient& client, Fn call,
                                    std::chrono::milliseconds limit, std::string* error) {
  const auto start = std::chrono::steady_clock::now();
  auto done = std::async(std::launch::async, [&] {
    try {
      call();
    } catch (const Error& e) {
      *error = e.what();
    }
  });
  if (done.wait_for(limit) != std::future_status::ready) {
    client.abort();
    done.wait();
    *error = "still waiting after " + std::to_string(limit.count()) + "ms (aborted)";
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

TEST(TcpStoreClient, AStoppedServerCostsEachWaitItsOwnDeadlineNotTheClientsDefault) {
  // The client's default timeout is long (as in a job with a long collective
  // timeout); the calls' own deadlines must bound them.
  SilentServer stopped;
  {
    TcpStoreClient client(stopped.address(), {.connect_timeout = 5s, .timeout = 300s});
    std::string error;
    const auto took = time_call(
        client, [&] { client.get("k", 200ms); }, 10s, &error);
    // 200 ms of waiting plus the reply allowance (1 s for so short a wait).
    EXPECT_EQ(TcpStoreClient::reply_allowance(200ms), 1s);
    EXPECT_LT(took, 1200ms + 1500ms) << error;
    EXPECT_THAT(error, HasSubstr("did not answer within 1200ms"));
    // A later call waits for the reply still owed, by its own deadline.
    const auto again = time_call(
        client, [&] { client.set("k", {}, 300ms); }, 10s, &error);
    EXPECT_LT(again, 300ms + 1500ms) << error;
    EXPECT_THAT(error, HasSubstr("set('k'): the store server did not answer within 300ms"));
  }
  {
    TcpStoreClient client(stopped.address(), {.connect_timeout = 5s, .timeout = 300s});
    std::string error;
    const auto took = time_call(
        client, [&] { client.set("k", to_bytes("v"), 300ms); }, 10s, &error);
    EXPECT_LT(took, 300ms + 1500ms) << error;
    EXPECT_THAT(error, HasSubstr("set('k'): the store server did not answer within 300ms"));
  }
  {
    // A call queued behind another thread's call keeps its own deadline.
    TcpStoreClient client(stopped.address(), {.connect_timeout = 5s, .timeout = 300s});
    // The server holds the HELLO so far; the first call's request follows it
    // once that call holds the connection.
    ASSERT_TRUE(stopped.newest_holds_more_than(0, 5s));
    const size_t hello_bytes = stopped.newest_unread();
    std::string first_error, error;
    auto first = std::async(std::launch::async, [&] {
      time_call(
          client, [&] { client.get("k", 3s); }, 10s, &first_error);
    });
    ASSERT_TRUE(stopped.newest_holds_more_than(hello_bytes, 5s));
    const auto took = time_call(
        client, [&] { client.set("k", to_bytes("v"), 300ms); }, 10s, &error);
    EXPECT_LT(took, 300ms + 1500ms) << error;
    EXPECT_THAT(error, HasSubstr("set('k'): another call held the connection to the store for "
                                 "all of 300ms"));
    client.abort();  // ends the first call early
    first.wait();
    EXPECT_THAT(first_error, HasSubstr("aborted"));
  }
}

// Forwards one client connection to `target` and back; while paused it
// moves no byte either way, as a store host that is stopped (the kernel
// still accepts what fits in the socket buffers).
class PausableProxy {
 public:
  explicit PausableProxy(std::string target) : target_(std::move(target)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(listen_.get(), 1), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    thread_ = std::jthread([this](const std::stop_token& stop) { forward(stop); });
  }
  const std::string& address() const { return address_; }
  void pause() { paused_.store(true); }
  void resume() { paused_.store(false); }

 private:
  void forward(const std::stop_token& stop) {
    pollfd p{listen_.get(), POLLIN, 0};
    while (!stop.stop_requested() && ::poll(&p, 1, 20) <= 0) {
    }
    if (stop.stop_requested()) return;
    UniqueFd client(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    UniqueFd server = raw_connection(std::stoi(target_.substr(target_.rfind(':') + 1)));
    std::vector<char> buf(1 << 16);
    while (!stop.stop_requested()) {
      if (paused_.load()) {
        std::this_thread::sleep_for(2ms);
        continue;
      }
      pollfd fds[2] = {{client.get(), POLLIN, 0}, {server.get(), POLLIN, 0}};
      if (::poll(fds, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const ssize_t n = ::recv(fds[i].fd, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n <= 0) return;  // either side gone: the proxy closes both
        const int to = i == 0 ? server.get() : client.get();
        for (ssize_t sent = 0; sent < n;) {
          const ssize_t m = ::send(to, buf.data() + sent, size_t(n - sent), MSG_NOSIGNAL);
          if (m <= 0) return;
          sent += m;
        }
      }
    }
  }

  std::string target_;
  UniqueFd listen_{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  std::string address_;
  std::atomic<bool> paused_{false};
  std::jthread thread_;  // last: stopped before the descriptors close
};

TEST(TcpStoreClient, AStoreThatPausesServesTheConnectionAgainOnceItAnswers) {
  TcpStoreServer server;
  PausableProxy host(server.address());
  TcpStoreClient client(host.address(), {.connect_timeout = 5s, .timeout = 300s});
  client.set("before", to_bytes("1"));
  host.pause();
  // Calls during the pause cost their own deadlines. The first, a set too
  // large for the socket buffers, is left half sent and its reply owed; the
  // next two cannot send it on, so they withdraw their own requests unsent.
  std::string error;
  const Bytes big(48u << 20, 'x');
  time_call(
      client, [&] { client.set("big", big, 300ms); }, 10s, &error);
  EXPECT_THAT(error, HasSubstr("set('big'): the store server did not answer within 300ms"));
  time_call(
      client, [&] { client.get("never", 200ms); }, 10s, &error);
  EXPECT_THAT(error, HasSubstr("get('never'): the store server did not answer within 1200ms"));
  time_call(
      client, [&] { client.set("during", to_bytes("2"), 300ms); }, 10s, &error);
  EXPECT_THAT(error, HasSubstr("set('during'): the store server did not answer within 300ms"));
  host.resume();
  // The same connection serves again; every reply read is the call's own.
  client.set("after", to_bytes("3"), 10s);
  EXPECT_EQ(to_string(client.get("after", 1s)), "3");
  EXPECT_EQ(client.add("counter", 5, 1s), 5);
  EXPECT_EQ(client.add("counter", 1, 1s), 6);
  // A call that ran out of time may still take effect (as over any network);
  // one withdrawn unsent never does.
  EXPECT_EQ(to_string(client.get("before", 1s)), "1");
  EXPECT_EQ(client.get("big", 1s).size(), big.size());
  EXPECT_FALSE(client.check({"during"}));
  EXPECT_THROW(client.get("never", 100ms), DeadlineExceededError);
}

TEST(TcpStoreServer, AnIdleConnectionIsDroppedAfterTheHandshakeTimeout) {
  TcpStoreServer server("127.0.0.1:0", {.handshake_timeout = 300ms});
  const auto start = std::chrono::steady_clock::now();
  UniqueFd idle = raw_connection(server.port());
  EXPECT_TRUE(closed_within(idle.get(), 5s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  // A client that connected meanwhile and stays quiet longer is not a stranger.
  TcpStoreClient client(server.address(), kFast);
  std::this_thread::sleep_for(600ms);  // past the handshake timeout, on purpose
  client.set("k", to_bytes("v"));
  EXPECT_EQ(to_string(client.get("k", 1s)), "v");
}

TEST(TcpStoreServer, AFirstFrameThatIsNotAHelloClosesTheConnectionAtOnce) {
  TcpStoreServer server("127.0.0.1:0", {.handshake_timeout = 30s});
  // A SET frame without the HELLO (an unauthenticated write), then a frame
  // header that announces 1 GiB: neither is read as a request.
  for (const std::string& bytes :
       {std::string("\x0a\x00\x00\x00\x01\x01\x00\x00\x00k\x00\x00\x00\x00", 14),
        std::string("\x00\x00\x00\x40", 4)}) {
    UniqueFd stray = raw_connection(server.port());
    ASSERT_EQ(::send(stray.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
    EXPECT_TRUE(closed_within(stray.get(), 5s));
  }
  TcpStoreClient client(server.address(), kFast);
  EXPECT_FALSE(client.check({"k"}));
}

TEST(TcpStoreServer, IdleStrayConnectionsDoNotDisturbTheClients) {
  TcpStoreServer server("127.0.0.1:0", {.handshake_timeout = 500ms});
  std::vector<UniqueFd> strays;
  strays.reserve(8);
  for (int i = 0; i < 8; ++i) strays.push_back(raw_connection(server.port()));
  TcpStoreClient a(server.address(), kFast);
  TcpStoreClient b(server.address(), kFast);
  std::jthread setter([&] { a.set("ready", to_bytes("1")); });
  EXPECT_EQ(to_string(b.get("ready", 5s)), "1");
  for (const UniqueFd& fd : strays) EXPECT_TRUE(closed_within(fd.get(), 5s));
  EXPECT_EQ(b.add("n", 2), 2);
}

// A HELLO frame offering `token`, as a client sends it.
std::string hello_frame(const std::string& token) {
  std::string payload("\x06", 1);
  const std::string magic = "strata-store/2";
  for (const std::string* field : {&magic, &token}) {
    const auto n = static_cast<uint32_t>(field->size());
    for (int i = 0; i < 4; ++i) payload += static_cast<char>((n >> (8 * i)) & 0xff);
    payload += *field;
  }
  std::string frame;
  const auto n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) frame += static_cast<char>((n >> (8 * i)) & 0xff);
  return frame + payload;
}

// A SET of key "k" to "v", framed.
const std::string kSetFrame("\x0b\x00\x00\x00\x01\x01\x00\x00\x00k\x01\x00\x00\x00v", 15);

void send_all(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

TEST(TcpStoreServer, AClientWithoutTheClusterTokenIsRefusedAndCannotWrite) {
  TcpStoreServer server("127.0.0.1:0", {.handshake_timeout = 30s, .token = "token-of-the-job"});
  // A client with another token, or with none, fails at once (not after its
  // connect timeout) saying why, and never names either token.
  for (const std::string& wrong : {std::string("token-of-another"), std::string()}) {
    const auto start = std::chrono::steady_clock::now();
    try {
      TcpStoreClient client(server.address(), {.connect_timeout = 20s, .token = wrong});
      ADD_FAILURE() << "connected with token '" << wrong << "'";
    } catch (const UnauthenticatedError& e) {
      EXPECT_THAT(e.what(), HasSubstr("refused this task's cluster token"));
      EXPECT_THAT(e.what(), HasSubstr("STRATA_CLUSTER_TOKEN"));
      EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("token-of-the-job")));
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  }
  // A raw peer that sends a wrong HELLO and a SET right behind it is closed
  // and its SET never applied; nor is a SET with no HELLO at all.
  for (const std::string& bytes : {hello_frame("token-of-the-joc") + kSetFrame, kSetFrame}) {
    UniqueFd stray = raw_connection(server.port());
    send_all(stray.get(), bytes);
    char buf[256];
    ssize_t n = 0;
    pollfd p{stray.get(), POLLIN, 0};
    while (::poll(&p, 1, 5000) > 0 && (n = ::recv(stray.get(), buf, sizeof(buf), 0)) > 0) {
    }
    EXPECT_EQ(n, 0) << "the server did not close the connection";
  }
  TcpStoreClient client(server.address(), {.connect_timeout = 10s, .token = "token-of-the-job"});
  EXPECT_FALSE(client.check({"k"}));
  client.set("k", to_bytes("mine"));
  EXPECT_EQ(to_string(client.get("k", 1s)), "mine");
  // The server without a token refuses a client that offers one.
  TcpStoreServer open("127.0.0.1:0", {.token = ""});
  EXPECT_THROW(TcpStoreClient(open.address(), {.connect_timeout = 10s, .token = "x"}),
               UnauthenticatedError);
  TcpStoreClient plain(open.address(), {.connect_timeout = 10s, .token = ""});
  EXPECT_FALSE(plain.check({"k"}));
}

TEST(TcpStoreServer, AnOversizeFrameClosesOnlyItsConnection) {
  TcpStoreServer server("127.0.0.1:0", {.token = "t", .max_frame_bytes = 4096});
  TcpStoreClient bystander(server.address(), {.connect_timeout = 10s, .token = "t"});
  // An authenticated peer announcing 1 GiB: closed at the header, before
  // anything of the payload is kept.
  UniqueFd giant = raw_connection(server.port());
  send_all(giant.get(), hello_frame("t") + std::string("\x00\x00\x00\x40", 4));
  // The payload goes out only as far as the server reads it: it closes the
  // connection at the header, so this send may stop part-way.
  const std::string payload(1 << 20, 'x');
  (void)::send(giant.get(), payload.data(), payload.size(), MSG_NOSIGNAL);
  EXPECT_TRUE(closed_within(giant.get(), 5s));
  // A client whose own limit lets it send more than the server takes loses
  // its connection; the client with the default limit refuses before sending.
  TcpStoreClient big(server.address(),
                     {.connect_timeout = 10s, .token = "t", .max_frame_bytes = 1u << 20});
  EXPECT_THROW(big.set("big", Bytes(8192, 'x')), UnavailableError);
  try {
    TcpStoreClient limited(server.address(),
                           {.connect_timeout = 10s, .token = "t", .max_frame_bytes = 4096});
    limited.set("big", Bytes(8192, 'x'));
    ADD_FAILURE() << "an 8 KiB SET went out past a 4 KiB frame limit";
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("set('big')"));
    EXPECT_THAT(e.what(), HasSubstr("frame limit of 4096 bytes"));
  }
  bystander.set("after", to_bytes("1"));
  EXPECT_FALSE(bystander.check({"big"}));
  EXPECT_EQ(to_string(bystander.get("after", 1s)), "1");
}

TEST(TcpStoreServer, AWritePastTheMemoryLimitIsRefusedWithAClearError) {
  TcpStoreServer server("127.0.0.1:0", {.token = "t", .max_memory_bytes = 1000});
  TcpStoreClient client(server.address(), {.connect_timeout = 10s, .token = "t"});
  client.set("a", Bytes(600, 'a'));  // 601 bytes held
  try {
    client.set("b", Bytes(600, 'b'));
    ADD_FAILURE() << "the store took 1202 bytes under a 1000-byte limit";
  } catch (const ResourceExhaustedError& e) {
    EXPECT_THAT(e.what(), HasSubstr("set('b')"));
    EXPECT_THAT(e.what(), HasSubstr("memory limit of 1000 bytes"));
    EXPECT_THAT(e.what(), HasSubstr("holds 601 bytes"));
  }
  EXPECT_FALSE(client.check({"b"}));
  // The connection still works, and replacing a value counts only the new one.
  client.set("a", Bytes(900, 'c'));
  EXPECT_EQ(client.get("a", 1s).size(), 900u);
  const std::string counter(100, 'n');  // 901 + 100 + 1 bytes would pass the limit
  EXPECT_THROW(client.add(counter, 1), ResourceExhaustedError);
  client.set("a", Bytes(10, 'd'));
  EXPECT_EQ(client.add(counter, 5), 5);
}

}  // namespace
}  // namespace strata::cluster
