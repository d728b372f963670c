#include "strata/cluster/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <list>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "strata/base/coding.h"
#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/socket_util.h"
#include "strata/cluster/cluster_token.h"
#include "strata/cluster/internal/tcp_store_protocol.h"
#include "strata/cluster/socket.h"

namespace strata::cluster {
namespace internal {

using net::Clock;

// Everything the server thread owns: the listening socket, the connections, the
// data and the pending GET/WAIT requests. Once the thread runs, only it touches
// them (the destructor only writes a byte to wake_write).
struct ServerState {
  struct Conn {
    UniqueFd fd;
    std::string in, out;
    bool waiting = false;  // a GET/WAIT of this connection is pending
    bool dead = false;
    bool greeted = false;              // its HELLO arrived
    bool closing = false;              // refused: closed once `out` is sent
    Clock::time_point hello_deadline;  // when an unknown peer is dropped
  };
  struct Waiter {
    int fd;
    uint8_t op;
    std::vector<std::string> keys;
    Clock::time_point start, deadline;
  };

  Milliseconds handshake_timeout{};
  std::string token;
  uint32_t max_frame_bytes = 0;
  uint64_t max_memory_bytes = 0;
  uint64_t data_bytes = 0;  // keys and values held in `data`
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
        const auto old = data.find(key);
        const uint64_t freed = old == data.end() ? 0 : key.size() + old->second.size();
        const uint64_t after = data_bytes - freed + key.size() + value.size();
        if (after > max_memory_bytes) {
          put_u8(out, kExhausted);
          put_string(out, str_cat("the store's memory limit of ", max_memory_bytes,
                                  " bytes is reached: it holds ", data_bytes, " bytes and set('",
                                  key, "') of ", value.size(), " bytes would take it to ", after,
                                  "; the write was refused"));
          reply(c, out);
          return;
        }
        data_bytes = after;
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
          const auto it = data.find(key);
          Bytes counter = it == data.end() ? Bytes() : it->second;
          const int64_t value =
              strata::internal::add_to_counter("TcpStoreServer", key, counter, delta);
          const uint64_t freed = it == data.end() ? 0 : key.size() + it->second.size();
          const uint64_t after = data_bytes - freed + key.size() + counter.size();
          if (after > max_memory_bytes) {
            put_u8(out, kExhausted);
            put_string(out, str_cat("the store's memory limit of ", max_memory_bytes,
                                    " bytes is reached: it holds ", data_bytes, " bytes; add('",
                                    key, "') was refused"));
            reply(c, out);
            return;
          }
          data_bytes = after;
          data[key] = std::move(counter);
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

  // Accepts `c` when its first frame is a HELLO with the server's token
  // (answered OK); a HELLO with another token is answered ERROR and closed
  // once that is sent; anything else closes `c` at once.
  void greet(Conn& c, std::string_view payload) {
    bool hello = false;
    std::string offered;
    try {
      Reader r(payload);
      const uint8_t op = r.u8();
      if (op == kHello && r.str() == kHelloMagic) {
        offered = r.str();
        r.finish();
        hello = true;
      }
    } catch (const ProtocolError&) {
    }
    if (!hello) {
      c.dead = true;
      return;
    }
    std::string out;
    if (tokens_equal(offered, token)) {
      c.greeted = true;
      put_u8(out, kOk);
      reply(c, out);
      return;
    }
    put_u8(out, kError);
    put_string(out, token.empty() ? "this store takes no cluster token but the client sent one"
                                  : "the client's cluster token is not this store's");
    reply(c, out);
    c.closing = true;
  }

  // Handles the complete frames buffered on `c`, one at a time.
  void process(Conn& c) {
    while (!c.dead && !c.closing && !c.waiting && c.in.size() >= 4) {
      const uint32_t len = coding::decode_fixed32(c.in.data());
      if (len > (c.greeted ? max_frame_bytes : kMaxHelloFrame)) {
        c.dead = true;
        return;
      }
      if (c.in.size() < 4 + static_cast<size_t>(len)) return;
      const std::string payload = c.in.substr(4, len);
      c.in.erase(0, 4 + static_cast<size_t>(len));
      if (!c.greeted) {
        greet(c, payload);
        continue;
      }
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
        if (c.closing) continue;  // refused: its input is discarded
        c.in.append(buf, static_cast<size_t>(n));
        // A client never sends more than one frame ahead of its reply: more
        // than the largest frame it may send is not a client's, and is not
        // buffered.
        const size_t limit = kFrameHeaderBytes + (c.greeted ? max_frame_bytes : kMaxHelloFrame);
        if (c.in.size() > limit) c.dead = true;
        process(c);
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
      net::set_nodelay(fd);
      Conn& c = conns[fd];
      c.fd = UniqueFd(fd);
      c.hello_deadline = Clock::now() + handshake_timeout;
    }
  }

  // Unknown peers whose HELLO is overdue.
  void expire_handshakes(Clock::time_point now) {
    for (auto& [fd, c] : conns) {
      if (!c.greeted && c.hello_deadline <= now) c.dead = true;
    }
  }

  void drop_dead() {
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->second.dead || (it->second.closing && it->second.out.empty())) {
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

TcpStoreServer::TcpStoreServer(const std::string& address, TcpStoreServerOptions options)
    : state_(std::make_unique<internal::ServerState>()) {
  STRATA_CHECK_ARG(options.handshake_timeout.count() > 0,
                   "TcpStoreServerOptions.handshake_timeout must be > 0, got ",
                   options.handshake_timeout.count(), "ms");
  STRATA_CHECK_ARG(options.max_frame_bytes > 0,
                   "TcpStoreServerOptions.max_frame_bytes must be > 0");
  STRATA_CHECK_ARG(options.max_memory_bytes > 0,
                   "TcpStoreServerOptions.max_memory_bytes must be > 0");
  state_->handshake_timeout = options.handshake_timeout;
  state_->token = options.token ? *options.token : cluster_token();
  validate_cluster_token(state_->token, "TcpStoreServer");
  state_->max_frame_bytes = options.max_frame_bytes;
  state_->max_memory_bytes = options.max_memory_bytes;
  const auto [host, port] = split_host_port(address);
  net::AddrInfo info;
  const std::string err = net::resolve(host, port, /*passive=*/true, info);
  STRATA_CHECK(UNAVAILABLE, err.empty(), "TcpStoreServer: cannot resolve '", address, "': ", err);
  std::string last_error = "no addresses";
  for (addrinfo* ai = info.list; ai; ai = ai->ai_next) {
    UniqueFd fd = net::stream_socket(*ai);
    if (!fd.valid()) {
      last_error = net::errno_text(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), 1024) != 0) {
      last_error = net::errno_text(errno);
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
  std::tie(state_->wake_read, state_->wake_write) = net::make_pipe();
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
    // Wake for the earliest waiter or handshake deadline; at most once a second regardless.
    int timeout_ms = 1000;
    for (const auto& w : s.waiters) timeout_ms = std::min(timeout_ms, net::ms_until(w.deadline));
    for (const auto& [fd, c] : s.conns) {
      if (!c.greeted) timeout_ms = std::min(timeout_ms, net::ms_until(c.hello_deadline));
    }
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
    const auto now = net::Clock::now();
    s.resolve_waiters(now);
    s.expire_handshakes(now);
    s.drop_dead();
  }
}

}  // namespace strata::cluster
