#include "strata/cluster/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "strata/base/coding.h"
#include "strata/base/errors.h"

namespace strata::cluster {
namespace internal {

// Owns a file descriptor; closes it on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint8_t kSet = 1, kGet = 2, kAdd = 3, kCheck = 4, kWait = 5;
constexpr uint8_t kOk = 0, kTimeout = 1, kError = 2;
constexpr uint32_t kMaxFrame = 1u << 30;

struct ProtocolError {
  std::string what;
};

std::string errno_text(int err) { return std::strerror(err); }

void put_u8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }
void put_bytes(std::string& out, const char* data, size_t n) {
  coding::put_fixed32(out, static_cast<uint32_t>(n));
  out.append(data, n);
}
void put_string(std::string& out, const std::string& s) { put_bytes(out, s.data(), s.size()); }
void put_keys(std::string& out, const std::vector<std::string>& keys) {
  coding::put_fixed32(out, static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) put_string(out, k);
}
// Reads the fields of one payload; throws ProtocolError past its end.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  uint8_t u8() { return static_cast<uint8_t>(take(1)[0]); }
  uint32_t u32() { return coding::decode_fixed32(take(4).data()); }
  uint64_t u64() { return coding::decode_fixed64(take(8).data()); }
  std::string str() { return std::string(take(u32())); }
  std::vector<std::string> keys() {
    const uint32_t n = u32();
    if (n > data_.size()) throw ProtocolError{"key count past the end of the frame"};
    std::vector<std::string> out;
    for (uint32_t i = 0; i < n; ++i) out.push_back(str());
    return out;
  }
  void finish() const {
    if (!data_.empty()) throw ProtocolError{"trailing bytes in frame"};
  }

 private:
  std::string_view take(size_t n) {
    if (n > data_.size()) throw ProtocolError{"frame too short"};
    auto out = data_.substr(0, n);
    data_.remove_prefix(n);
    return out;
  }
  std::string_view data_;
};

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) ::freeaddrinfo(list);
  }
};

// Resolves host:port; returns the getaddrinfo error text on failure.
std::string resolve(const std::string& host, const std::string& port, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &out.list);
  return rc == 0 ? std::string() : std::string(::gai_strerror(rc));
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::pair<UniqueFd, UniqueFd> make_pipe() {
  int fds[2];
  STRATA_CHECK(UNAVAILABLE, ::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0,
               "TcpStore: pipe2 failed: ", errno_text(errno));
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<Milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

std::string quoted(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) out += str_cat(i ? ", '" : "'", keys[i], "'");
  return out + "]";
}

}  // namespace

// --- server --------------------------------------------------------------------

struct ServerState {
  struct Conn {
    UniqueFd fd;
    std::string in, out;
    bool waiting = false;  // a GET/WAIT of this connection is pending
    bool dead = false;
  };
  struct Waiter {
    int fd;
    uint8_t op;
    std::vector<std::string> keys;
    Clock::time_point start, deadline;
  };

  UniqueFd listen;
  UniqueFd wake_read, wake_write;
  std::map<int, Conn> conns;
  std::unordered_map<std::string, Bytes> data;
  std::list<Waiter> waiters;

  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& k : keys) {
      if (!data.contains(k)) out.push_back(k);
    }
    return out;
  }

  void flush(Conn& c) {
    while (!c.out.empty() && !c.dead) {
      const ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out.erase(0, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;  // the rest goes out on POLLOUT
      } else {
        c.dead = true;
      }
    }
  }

  void reply(Conn& c, const std::string& payload) {
    coding::put_fixed32(c.out, static_cast<uint32_t>(payload.size()));
    c.out += payload;
    flush(c);
  }

  void reply_waiter(Conn& c, const Waiter& w, bool timed_out) {
    std::string payload;
    if (timed_out) {
      put_u8(payload, kTimeout);
      put_keys(payload, missing(w.keys));
    } else {
      put_u8(payload, kOk);
      if (w.op == kGet) {
        const Bytes& v = data.at(w.keys.front());
        put_bytes(payload, v.data(), v.size());
      }
    }
    c.waiting = false;
    reply(c, payload);
  }

  // Answers waiters whose keys are all set (or, with `now`, whose deadline passed),
  // then resumes those connections' buffered requests.
  void resolve_waiters(std::optional<Clock::time_point> now) {
    std::vector<int> resumed;
    for (auto it = waiters.begin(); it != waiters.end();) {
      const bool ready = missing(it->keys).empty();
      const bool expired = now && it->deadline <= *now;
      if (ready || expired) {
        auto c = conns.find(it->fd);
        if (c != conns.end()) {
          reply_waiter(c->second, *it, !ready);
          resumed.push_back(it->fd);
        }
        it = waiters.erase(it);
      } else {
        ++it;
      }
    }
    for (int fd : resumed) {
      auto c = conns.find(fd);
      if (c != conns.end()) process(c->second);
    }
  }

  void handle(Conn& c, std::string_view payload) {
    Reader r(payload);
    const uint8_t op = r.u8();
    std::string out;
    switch (op) {
      case kSet: {
        std::string key = r.str();
        std::string value = r.str();
        r.finish();
        data[key] = Bytes(value.begin(), value.end());
        put_u8(out, kOk);
        reply(c, out);
        resolve_waiters(std::nullopt);
        return;
      }
      case kGet:
      case kWait: {
        std::vector<std::string> keys;
        if (op == kGet) {
          keys.push_back(r.str());
        } else {
          keys = r.keys();
        }
        const uint64_t timeout_ms = std::min<uint64_t>(r.u64(), uint64_t{1} << 40);
        r.finish();
        const auto start = Clock::now();
        Waiter w{c.fd.get(), op, std::move(keys), start, start + Milliseconds(timeout_ms)};
        const bool ready = missing(w.keys).empty();
        if (ready || timeout_ms == 0) {
          reply_waiter(c, w, !ready);
        } else {
          c.waiting = true;
          waiters.push_back(std::move(w));
        }
        return;
      }
      case kAdd: {
        const std::string key = r.str();
        const auto delta = static_cast<int64_t>(r.u64());
        r.finish();
        try {
          const int64_t value = add_to_counter("TcpStoreServer", key, data[key], delta);
          put_u8(out, kOk);
          coding::put_fixed64(out, static_cast<uint64_t>(value));
        } catch (const InvalidArgumentError& e) {
          out.clear();
          put_u8(out, kError);
          put_string(out, e.what());
        }
        reply(c, out);
        resolve_waiters(std::nullopt);
        return;
      }
      case kCheck: {
        const auto keys = r.keys();
        r.finish();
        put_u8(out, kOk);
        put_u8(out, missing(keys).empty() ? 1 : 0);
        reply(c, out);
        return;
      }
      default: throw ProtocolError{str_cat("unknown op ", static_cast<int>(op))};
    }
  }

  // Handles the complete frames buffered on `c`, one at a time.
  void process(Conn& c) {
    while (!c.dead && !c.waiting && c.in.size() >= 4) {
      const uint32_t len = coding::decode_fixed32(c.in.data());
      if (len > kMaxFrame) {
        c.dead = true;
        return;
      }
      if (c.in.size() < 4 + static_cast<size_t>(len)) return;
      const std::string payload = c.in.substr(4, len);
      c.in.erase(0, 4 + static_cast<size_t>(len));
      try {
        handle(c, payload);
      } catch (const ProtocolError&) {
        c.dead = true;  // a malformed request: drop this client only
      }
    }
  }

  void read_from(Conn& c) {
    char buf[65536];
    while (!c.dead) {
      const ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        c.dead = true;  // orderly close or error
      }
    }
    process(c);
  }

  void accept_all() {
    while (true) {
      const int fd = ::accept4(listen.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a transient error; poll tells us again
      set_nodelay(fd);
      conns[fd].fd = UniqueFd(fd);
    }
  }

  void drop_dead() {
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->second.dead) {
        const int fd = it->first;
        waiters.remove_if([fd](const Waiter& w) { return w.fd == fd; });
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
  }
};

}  // namespace internal

using internal::UniqueFd;

TcpStoreServer::TcpStoreServer(const std::string& address)
    : state_(std::make_unique<internal::ServerState>()) {
  const auto [host, port] = split_host_port(address);
  internal::AddrInfo info;
  const std::string err = internal::resolve(host, port, /*passive=*/true, info);
  STRATA_CHECK(UNAVAILABLE, err.empty(), "TcpStoreServer: cannot resolve '", address, "': ", err);
  std::string last_error = "no addresses";
  for (addrinfo* ai = info.list; ai; ai = ai->ai_next) {
    UniqueFd fd(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_error = internal::errno_text(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), 1024) != 0) {
      last_error = internal::errno_text(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    state_->listen = std::move(fd);
    break;
  }
  STRATA_CHECK(UNAVAILABLE, state_->listen.valid(), "TcpStoreServer: cannot listen on ", address,
               ": ", last_error);
  address_ = host.find(':') != std::string::npos ? str_cat("[", host, "]:", port_)
                                                 : str_cat(host, ":", port_);
  std::tie(state_->wake_read, state_->wake_write) = internal::make_pipe();
  thread_ = std::jthread([this](const std::stop_token& stop) { serve(stop); });
}

TcpStoreServer::~TcpStoreServer() {
  thread_.request_stop();
  const char byte = 1;
  [[maybe_unused]] auto n = ::write(state_->wake_write.get(), &byte, 1);
  if (thread_.joinable()) thread_.join();
  // state_ closes every connection: clients waiting on them see the close.
}

void TcpStoreServer::serve(const std::stop_token& stop) {
  auto& s = *state_;
  std::vector<pollfd> fds;
  while (!stop.stop_requested()) {
    fds.clear();
    fds.push_back({s.wake_read.get(), POLLIN, 0});
    fds.push_back({s.listen.get(), POLLIN, 0});
    for (auto& [fd, c] : s.conns) {
      fds.push_back({fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    }
    // Wake for the earliest waiter deadline; at most once a second regardless.
    int timeout_ms = 1000;
    for (const auto& w : s.waiters)
      timeout_ms = std::min(timeout_ms, internal::ms_until(w.deadline));
    const int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) break;
    if (n > 0) {
      if (fds[0].revents & POLLIN) {
        char buf[64];
        while (::read(s.wake_read.get(), buf, sizeof(buf)) > 0) {
        }
      }
      if (fds[1].revents & POLLIN) s.accept_all();
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        auto it = s.conns.find(fds[i].fd);
        if (it == s.conns.end()) continue;
        auto& c = it->second;
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) s.read_from(c);
        if (fds[i].revents & POLLOUT) s.flush(c);
      }
    }
    s.resolve_waiters(internal::Clock::now());
    s.drop_dead();
  }
}

// --- client --------------------------------------------------------------------

namespace {

using internal::Clock;

enum class Ready { kYes, kTimeout, kAborted };

// Waits until `fd` (ignored when < 0) has `events`, the deadline passes, or the
// abort pipe is readable.
Ready wait_fd(int fd, short events, int abort_fd, Clock::time_point deadline) {
  while (true) {
    pollfd fds[2] = {{abort_fd, POLLIN, 0}, {fd, events, 0}};
    const nfds_t count = fd >= 0 ? 2 : 1;
    const int n = ::poll(fds, count, internal::ms_until(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (fds[0].revents & POLLIN) return Ready::kAborted;
    if (n > 0 && count == 2 && fds[1].revents) return Ready::kYes;
    if (Clock::now() >= deadline) return Ready::kTimeout;
  }
}

}  // namespace

TcpStoreClient::TcpStoreClient(std::string address, TcpStoreClientOptions options)
    : address_(std::move(address)), options_(options) {
  auto [r, w] = internal::make_pipe();
  abort_read_ = std::make_unique<UniqueFd>(std::move(r));
  abort_write_ = std::make_unique<UniqueFd>(std::move(w));
  const auto [host, port] = split_host_port(address_);
  const auto deadline = Clock::now() + options_.connect_timeout;
  Milliseconds backoff(10);
  std::string last_error;
  while (true) {
    internal::AddrInfo info;
    last_error = internal::resolve(host, port, /*passive=*/false, info);
    for (addrinfo* ai = info.list; ai != nullptr; ai = ai->ai_next) {
      UniqueFd fd(
          ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
      if (!fd.valid()) {
        last_error = internal::errno_text(errno);
        continue;
      }
      int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        const Ready ready = wait_fd(fd.get(), POLLOUT, abort_read_->get(), deadline);
        STRATA_CHECK(ABORTED, ready != Ready::kAborted,
                     "TcpStoreClient: aborted while connecting to ", address_);
        if (ready == Ready::kTimeout) {
          last_error = "connection timed out";
          continue;
        }
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      }
      if (rc != 0) {
        last_error = internal::errno_text(errno);
        continue;
      }
      internal::set_nodelay(fd.get());
      std::lock_guard lock(mu_);
      socket_ = std::make_unique<UniqueFd>(std::move(fd));
      return;
    }
    // The server may not be up yet (the chief starts it): retry until the
    // start-up deadline, backing off; the wait is on the abort pipe, so abort()
    // interrupts it.
    if (Clock::now() >= deadline) break;
    const auto next = std::min(Clock::now() + backoff, deadline);
    const Ready ready = wait_fd(-1, 0, abort_read_->get(), next);
    STRATA_CHECK(ABORTED, ready != Ready::kAborted, "TcpStoreClient: aborted while connecting to ",
                 address_);
    backoff = std::min(backoff * 2, Milliseconds(500));
  }
  throw UnavailableError(str_cat("TcpStoreClient: could not connect to the store at ", address_,
                                 " within ", internal::format_duration(options_.connect_timeout),
                                 " (last error: ", last_error, ")"));
}

TcpStoreClient::~TcpStoreClient() = default;

void TcpStoreClient::abort() {
  aborted_.store(true);
  const char byte = 1;
  // The byte is never read: the pipe stays readable, so every later wait wakes too.
  [[maybe_unused]] auto n = ::write(abort_write_->get(), &byte, 1);
}

std::string TcpStoreClient::call(const std::string& request, Milliseconds wait_time,
                                 const std::string& what) {
  std::lock_guard lock(mu_);
  STRATA_CHECK(ABORTED, !aborted_.load(), "TcpStoreClient(", address_, "): ", what,
               ": the store was aborted");
  STRATA_CHECK(UNAVAILABLE, !broken_, "TcpStoreClient(", address_, "): ", what,
               ": the connection to the store was lost earlier");
  const auto deadline = Clock::now() + wait_time + options_.timeout;
  const int fd = socket_->get();
  auto fail = [&](ErrorCode code, const std::string& why) {
    broken_ = true;  // the stream is out of step with the server now
    throw_error(code, str_cat("TcpStoreClient(", address_, "): ", what, ": ", why));
  };
  auto wait_or_fail = [&](short events) {
    const Ready r = wait_fd(fd, events, abort_read_->get(), deadline);
    if (r == Ready::kAborted) fail(ErrorCode::ABORTED, "aborted");
    if (r == Ready::kTimeout) {
      fail(ErrorCode::DEADLINE_EXCEEDED,
           str_cat("the store server did not answer within ",
                   internal::format_duration(
                       std::chrono::duration_cast<Milliseconds>(wait_time + options_.timeout))));
    }
  };

  std::string frame;
  coding::put_fixed32(frame, static_cast<uint32_t>(request.size()));
  frame += request;
  size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n =
        ::send(fd, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_or_fail(POLLOUT);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      fail(ErrorCode::UNAVAILABLE,
           str_cat("lost the connection to the store server (", internal::errno_text(errno), ")"));
    }
  }

  std::string in;
  size_t want = 4;
  bool have_header = false;
  char buf[65536];
  while (in.size() < want) {
    const ssize_t n = ::recv(fd, buf, std::min(sizeof(buf), want - in.size()), MSG_DONTWAIT);
    if (n > 0) {
      in.append(buf, static_cast<size_t>(n));
      if (!have_header && in.size() == 4) {
        have_header = true;
        const uint32_t len = coding::decode_fixed32(in.data());
        if (len > internal::kMaxFrame)
          fail(ErrorCode::DATA_LOSS, str_cat("reply frame of ", len, " bytes"));
        want = 4 + len;
      }
    } else if (n == 0) {
      fail(ErrorCode::UNAVAILABLE, "the store server closed the connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_or_fail(POLLIN);
    } else if (errno != EINTR) {
      fail(ErrorCode::UNAVAILABLE,
           str_cat("lost the connection to the store server (", internal::errno_text(errno), ")"));
    }
  }
  return in.substr(4);
}

namespace {

// Parses a reply's status; throws for ERROR and malformed replies. Returns the
// status (OK or TIMEOUT).
uint8_t reply_status(internal::Reader& r, const std::string& who) {
  try {
    const uint8_t status = r.u8();
    if (status == internal::kError) throw InvalidArgumentError(r.str());
    if (status != internal::kOk && status != internal::kTimeout) {
      throw DataLossError(str_cat(who, ": unknown reply status ", static_cast<int>(status)));
    }
    return status;
  } catch (const internal::ProtocolError& e) {
    throw DataLossError(str_cat(who, ": malformed reply: ", e.what));
  }
}

template <typename Fn>
auto parse_reply(const std::string& who, Fn fn) {
  try {
    return fn();
  } catch (const internal::ProtocolError& e) {
    throw DataLossError(str_cat(who, ": malformed reply: ", e.what));
  }
}

}  // namespace

void TcpStoreClient::set(const std::string& key, const Bytes& value) {
  std::string req;
  internal::put_u8(req, internal::kSet);
  internal::put_string(req, key);
  internal::put_bytes(req, value.data(), value.size());
  const std::string what = str_cat("set('", key, "')");
  const std::string reply = call(req, Milliseconds(0), what);
  internal::Reader r(reply);
  reply_status(r, str_cat("TcpStoreClient(", address_, "): ", what));
}

Bytes TcpStoreClient::get(const std::string& key, Milliseconds timeout) {
  std::string req;
  internal::put_u8(req, internal::kGet);
  internal::put_string(req, key);
  coding::put_fixed64(req, static_cast<uint64_t>(std::max<int64_t>(timeout.count(), 0)));
  const std::string what = str_cat("get('", key, "')");
  const std::string who = str_cat("TcpStoreClient(", address_, "): ", what);
  const auto start = Clock::now();
  const std::string reply = call(req, timeout, what);
  internal::Reader r(reply);
  if (reply_status(r, who) == internal::kTimeout) {
    const auto waited = std::chrono::duration_cast<Milliseconds>(Clock::now() - start);
    throw DeadlineExceededError(str_cat(who, ": key '", key, "' was not set after waiting ",
                                        internal::format_duration(waited), " (timeout ",
                                        internal::format_duration(timeout), ")"));
  }
  return parse_reply(who, [&] {
    std::string v = r.str();
    return Bytes(v.begin(), v.end());
  });
}

void TcpStoreClient::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  std::string req;
  internal::put_u8(req, internal::kWait);
  internal::put_keys(req, keys);
  coding::put_fixed64(req, static_cast<uint64_t>(std::max<int64_t>(timeout.count(), 0)));
  const std::string what = str_cat("wait(", internal::quoted(keys), ")");
  const std::string who = str_cat("TcpStoreClient(", address_, "): ", what);
  const auto start = Clock::now();
  const std::string reply = call(req, timeout, what);
  internal::Reader r(reply);
  if (reply_status(r, who) == internal::kTimeout) {
    const auto missing = parse_reply(who, [&] { return r.keys(); });
    const auto waited = std::chrono::duration_cast<Milliseconds>(Clock::now() - start);
    throw DeadlineExceededError(str_cat(
        who, ": keys ", internal::quoted(missing), " still missing after waiting ",
        internal::format_duration(waited), " (timeout ", internal::format_duration(timeout), ")"));
  }
}

int64_t TcpStoreClient::add(const std::string& key, int64_t delta) {
  std::string req;
  internal::put_u8(req, internal::kAdd);
  internal::put_string(req, key);
  coding::put_fixed64(req, static_cast<uint64_t>(delta));
  const std::string what = str_cat("add('", key, "', ", delta, ")");
  const std::string who = str_cat("TcpStoreClient(", address_, "): ", what);
  const std::string reply = call(req, Milliseconds(0), what);
  internal::Reader r(reply);
  reply_status(r, who);
  return parse_reply(who, [&] { return static_cast<int64_t>(r.u64()); });
}

bool TcpStoreClient::check(const std::vector<std::string>& keys) {
  std::string req;
  internal::put_u8(req, internal::kCheck);
  internal::put_keys(req, keys);
  const std::string what = str_cat("check(", internal::quoted(keys), ")");
  const std::string who = str_cat("TcpStoreClient(", address_, "): ", what);
  const std::string reply = call(req, Milliseconds(0), what);
  internal::Reader r(reply);
  reply_status(r, who);
  return parse_reply(who, [&] { return r.u8() != 0; });
}

std::pair<std::string, std::string> split_host_port(const std::string& address) {
  std::string host, port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    STRATA_CHECK_ARG(
        close != std::string::npos && close + 1 < address.size() && address[close + 1] == ':',
        "TcpStore: expected an address like [::1]:2222, got '", address, "'");
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    STRATA_CHECK_ARG(colon != std::string::npos && colon > 0,
                     "TcpStore: expected an address like host:port, got '", address, "'");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  STRATA_CHECK_ARG(
      !port.empty() && port.size() <= 5 &&
          std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
          std::stoi(port) <= 65535,
      "TcpStore: expected a port number 0-65535 in '", address, "', got '", port, "'");
  return {host, port};
}

}  // namespace strata::cluster
