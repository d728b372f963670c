#include "strata/collective/internal/direct_mesh.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "strata/base/coding.h"
#include "strata/base/errors.h"
#include "strata/base/socket_util.h"
#include "strata/base/str_cat.h"

namespace strata::collective::internal {
namespace {

constexpr uint32_t kHelloMagic = 0x4d445453;  // "STDM"
constexpr size_t kHelloBytes = 16;            // magic, rank, check
// How long an accepted connection may take to send its hello before it is
// closed as a stray.
constexpr auto kHelloPatience = std::chrono::seconds(2);

std::string hello_of(int rank, uint64_t check) {
  std::string out;
  coding::put_fixed32(out, kHelloMagic);
  coding::put_fixed32(out, static_cast<uint32_t>(rank));
  coding::put_fixed64(out, check);
  return out;
}

// Reads exactly `n` bytes from non-blocking `fd` by `deadline`: "" when
// done, else why not. Throws AbortedError when `abort_fd` becomes readable.
std::string read_exactly(int fd, char* out, size_t n, int abort_fd,
                         DirectMesh::Clock::time_point deadline) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(fd, out + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return "the connection was closed";
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return net::errno_text(errno);
    const net::Ready ready = net::wait_fd(fd, POLLIN, abort_fd, deadline);
    STRATA_CHECK(ABORTED, ready != net::Ready::kAborted, "direct mesh: aborted while connecting");
    if (ready == net::Ready::kTimeout) return "no answer in time";
  }
  return "";
}

// Writes all of `bytes` to non-blocking `fd` by `deadline` (a hello: it fits
// an empty send buffer); "" when done, else why not.
std::string write_all(int fd, const std::string& bytes) {
  const ssize_t w = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w == static_cast<ssize_t>(bytes.size())) return "";
  return w < 0 ? net::errno_text(errno) : "short write";
}

std::string split_port(const std::string& address, std::string* host) {
  const size_t colon = address.rfind(':');
  STRATA_CHECK_ARG(colon != std::string::npos, "direct mesh: malformed address '", address, "'");
  *host = address.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return address.substr(colon + 1);
}

}  // namespace

DirectMesh::DirectMesh(int rank, int size, const std::string& hostname)
    : rank_(rank), size_(size), peers_(static_cast<size_t>(size)) {
  std::tie(abort_read_, abort_write_) = net::make_pipe();
  net::AddrInfo info;
  const std::string error = net::resolve(hostname, "0", /*passive=*/true, info);
  STRATA_CHECK(UNAVAILABLE, error.empty(), "direct mesh: cannot resolve '", hostname, "': ", error);
  std::string last = "no address";
  for (addrinfo* ai = info.list; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd = net::stream_socket(*ai);
    if (!fd.valid()) {
      last = net::errno_text(errno);
      continue;
    }
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), 64) != 0) {
      last = net::errno_text(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
    const int port =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    address_ = hostname.find(':') != std::string::npos ? str_cat("[", hostname, "]:", port)
                                                       : str_cat(hostname, ":", port);
    listen_ = std::move(fd);
    return;
  }
  throw UnavailableError(str_cat("direct mesh: cannot listen on ", hostname, ": ", last));
}

DirectMesh::~DirectMesh() = default;

void DirectMesh::abort() {
  const char byte = 1;
  // Never read: the pipe stays readable, so every later wait wakes too.
  [[maybe_unused]] const ssize_t n = ::write(abort_write_.get(), &byte, 1);
  // The peers learn at once (their exchanges end with the connection lost)
  // instead of waiting out their timeouts. shutdown, not close: an exchange
  // in progress on another thread may still use the descriptors.
  for (const Peer& peer : peers_) {
    if (peer.fd.valid()) ::shutdown(peer.fd.get(), SHUT_RDWR);
  }
}

void DirectMesh::connect(const std::vector<std::string>& addresses,
                         const std::vector<uint64_t>& checks, Clock::time_point deadline,
                         const std::function<void()>& between_waits) {
  STRATA_CHECK_ARG(addresses.size() == size_t(size_) && checks.size() == size_t(size_),
                   "direct mesh: expected ", size_, " addresses and checks, got ", addresses.size(),
                   " and ", checks.size());
  for (int q = 0; q < rank_; ++q) connect_to(q, addresses[size_t(q)], checks, deadline);
  accept_from_higher_ranks(checks, deadline, between_waits);
  listen_.reset();
}

void DirectMesh::connect_to(int peer, const std::string& address,
                            const std::vector<uint64_t>& checks, Clock::time_point deadline) {
  std::string host;
  const std::string port = split_port(address, &host);
  std::string last = "no address";
  // The peer listens before it publishes its address: a refused connection
  // is a failure, not a peer that is not up yet.
  net::AddrInfo info;
  const std::string error = net::resolve(host, port, /*passive=*/false, info);
  STRATA_CHECK(UNAVAILABLE, error.empty(), "direct mesh: cannot resolve rank ", peer, "'s '",
               address, "': ", error);
  for (addrinfo* ai = info.list; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd = net::stream_socket(*ai);
    if (!fd.valid()) {
      last = net::errno_text(errno);
      continue;
    }
    const net::Connected c =
        net::connect_by(fd.get(), ai->ai_addr, ai->ai_addrlen, abort_read_.get(), deadline);
    STRATA_CHECK(ABORTED, c.ready != net::Ready::kAborted, "direct mesh: aborted while connecting");
    STRATA_CHECK(DEADLINE_EXCEEDED, c.ready != net::Ready::kTimeout,
                 "direct mesh: connecting to rank ", peer, " at ", address, " timed out");
    if (!c.error.empty()) {
      last = c.error;
      continue;
    }
    net::set_nodelay(fd.get());
    std::string why = write_all(fd.get(), hello_of(rank_, checks[size_t(rank_)]));
    char answer[8];
    if (why.empty())
      why = read_exactly(fd.get(), answer, sizeof(answer), abort_read_.get(), deadline);
    STRATA_CHECK(DEADLINE_EXCEEDED, why != "no answer in time", "direct mesh: rank ", peer, " at ",
                 address, " did not answer the hello in time");
    STRATA_CHECK(UNAVAILABLE, why.empty(), "direct mesh: the connection to rank ", peer, " at ",
                 address, " failed: ", why);
    STRATA_CHECK(UNAVAILABLE, coding::decode_fixed64(answer) == checks[size_t(peer)],
                 "direct mesh: the connection to rank ", peer, " at ", address,
                 " failed the mesh check: what answered is not what rank ", peer, " published");
    peers_[size_t(peer)].fd = std::move(fd);
    return;
  }
  throw UnavailableError(
      str_cat("direct mesh: cannot connect to rank ", peer, " at ", address, ": ", last));
}

void DirectMesh::accept_from_higher_ranks(const std::vector<uint64_t>& checks,
                                          Clock::time_point deadline,
                                          const std::function<void()>& between_waits) {
  int missing = size_ - 1 - rank_;
  while (missing > 0) {
    const Clock::time_point until =
        between_waits ? std::min(deadline, Clock::now() + kPollInterval) : deadline;
    const net::Ready ready = net::wait_fd(listen_.get(), POLLIN, abort_read_.get(), until);
    STRATA_CHECK(ABORTED, ready != net::Ready::kAborted, "direct mesh: aborted while connecting");
    if (ready == net::Ready::kTimeout && until < deadline) {
      between_waits();
      continue;
    }
    if (ready == net::Ready::kTimeout) {
      std::vector<int> absent;
      for (int p = rank_ + 1; p < size_; ++p) {
        if (!peers_[size_t(p)].fd.valid()) absent.push_back(p);
      }
      throw DeadlineExceededError(str_cat("direct mesh: rank ", rank_, " waited in vain for ranks ",
                                          absent, " to connect"));
    }
    UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) continue;
    char hello[kHelloBytes];
    const Clock::time_point patience = std::min(deadline, Clock::now() + kHelloPatience);
    if (!read_exactly(fd.get(), hello, sizeof(hello), abort_read_.get(), patience).empty()) {
      continue;  // a stray: silent or gone
    }
    const uint32_t magic = coding::decode_fixed32(hello);
    const auto peer = static_cast<int32_t>(coding::decode_fixed32(hello + 4));
    if (magic != kHelloMagic || peer <= rank_ || peer >= size_ || peers_[size_t(peer)].fd.valid() ||
        coding::decode_fixed64(hello + 8) != checks[size_t(peer)]) {
      continue;  // a stray, or a stranger claiming a rank
    }
    std::string answer;
    coding::put_fixed64(answer, checks[size_t(rank_)]);
    if (!write_all(fd.get(), answer).empty()) continue;
    net::set_nodelay(fd.get());
    peers_[size_t(peer)].fd = std::move(fd);
    --missing;
  }
}

DirectMesh::Outcome DirectMesh::exchange(const std::function<std::string_view(int)>& message_for,
                                         char* in, size_t stride, Clock::time_point deadline) {
  Outcome out;
  out.arrived.assign(size_t(size_), 0);
  out.arrived[size_t(rank_)] = 1;
  {
    pollfd aborted{abort_read_.get(), POLLIN, 0};
    if (::poll(&aborted, 1, 0) > 0 && (aborted.revents & POLLIN)) {
      out.status = Status::kAborted;
      return out;
    }
  }
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    Peer& peer = peers_[size_t(p)];
    peer.out = message_for(p);
    peer.out_length = static_cast<uint32_t>(peer.out.size());
    peer.out_done = 0;
    peer.in_done = 0;
  }
  auto lose = [&](int p, std::string why) {
    out.status = Status::kLost;
    out.lost = p;
    out.why = std::move(why);
    return out;
  };
  std::vector<pollfd>& fds = poll_fds_;
  for (;;) {
    // Moves what the sockets take and give without waiting.
    int pending = 0;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      Peer& peer = peers_[size_t(p)];
      const size_t out_total = 4 + size_t(peer.out_length);
      while (peer.out_done < out_total) {
        char length[4];
        coding::encode_fixed32(length, peer.out_length);
        iovec iov[2];
        int count = 0;
        if (peer.out_done < 4) {
          iov[count++] = {length + peer.out_done, 4 - peer.out_done};
        }
        const size_t body_done = peer.out_done > 4 ? peer.out_done - 4 : 0;
        iov[count++] = {const_cast<char*>(peer.out.data()) + body_done,
                        size_t(peer.out_length) - body_done};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = size_t(count);
        const ssize_t w = ::sendmsg(peer.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
          peer.out_done += size_t(w);
        } else if (w < 0 && errno == EINTR) {
          continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          break;
        } else {
          return lose(p, net::errno_text(errno));
        }
      }
      while (!out.arrived[size_t(p)]) {
        size_t want;
        char* into;
        if (peer.in_done < 4) {
          want = 4 - peer.in_done;
          into = peer.in_header + peer.in_done;
        } else {
          const uint32_t length = coding::decode_fixed32(peer.in_header);
          STRATA_CHECK(DATA_LOSS, length <= stride, "direct mesh: a message of ", length,
                       " bytes from rank ", p, " (at most ", stride, " expected)");
          want = 4 + size_t(length) - peer.in_done;
          into = in + size_t(p) * stride + (peer.in_done - 4);
          if (want == 0) {
            out.arrived[size_t(p)] = 1;
            break;
          }
        }
        const ssize_t r = ::recv(peer.fd.get(), into, want, MSG_DONTWAIT);
        if (r > 0) {
          peer.in_done += size_t(r);
        } else if (r == 0) {
          return lose(p, "the connection was closed");
        } else if (errno == EINTR) {
          continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
          break;
        } else {
          return lose(p, net::errno_text(errno));
        }
      }
      if (peer.out_done < out_total || !out.arrived[size_t(p)]) ++pending;
    }
    if (pending == 0) return out;
    // Waits for any socket to move, the abort pipe or the deadline.
    fds.clear();
    fds.push_back({abort_read_.get(), POLLIN, 0});
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      const Peer& peer = peers_[size_t(p)];
      short events = 0;
      if (peer.out_done < 4 + size_t(peer.out_length)) events |= POLLOUT;
      if (!out.arrived[size_t(p)]) events |= POLLIN;
      if (events != 0) fds.push_back({peer.fd.get(), events, 0});
    }
    const int n = ::poll(fds.data(), fds.size(), net::ms_until(deadline));
    if (n < 0 && errno != EINTR) {
      throw UnavailableError(str_cat("direct mesh: poll failed: ", net::errno_text(errno)));
    }
    if (fds[0].revents & POLLIN) {
      out.status = Status::kAborted;
      return out;
    }
    if (n == 0 && Clock::now() >= deadline) {
      out.status = Status::kTimeout;
      return out;
    }
  }
}

}  // namespace strata::collective::internal
