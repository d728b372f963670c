#include "strata/base/socket_util.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "strata/base/errors.h"

namespace strata::net {

std::string errno_text(int err) { return std::strerror(err); }

AddrInfo::~AddrInfo() {
  if (list) ::freeaddrinfo(list);
}

std::string resolve(const std::string& host, const std::string& port, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &out.list);
  return rc == 0 ? std::string() : std::string(::gai_strerror(rc));
}

UniqueFd stream_socket(const addrinfo& ai) {
  return UniqueFd(
      ::socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol));
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::pair<UniqueFd, UniqueFd> make_pipe() {
  int fds[2];
  STRATA_CHECK(UNAVAILABLE, ::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0,
               "pipe2 failed: ", errno_text(errno));
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

Ready wait_fd(int fd, short events, int abort_fd, Clock::time_point deadline) {
  while (true) {
    pollfd fds[2] = {{abort_fd, POLLIN, 0}, {fd, events, 0}};
    const nfds_t count = fd >= 0 ? 2 : 1;
    const int n = ::poll(fds, count, ms_until(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (fds[0].revents & POLLIN) return Ready::kAborted;
    if (n > 0 && count == 2 && fds[1].revents) return Ready::kYes;
    if (Clock::now() >= deadline) return Ready::kTimeout;
  }
}

Connected connect_by(int fd, const sockaddr* address, socklen_t length, int abort_fd,
                     Clock::time_point deadline) {
  if (::connect(fd, address, length) == 0) return {};
  if (errno != EINPROGRESS) return {.error = errno_text(errno)};
  const Ready ready = wait_fd(fd, POLLOUT, abort_fd, deadline);
  if (ready != Ready::kYes) return {.ready = ready, .error = ""};
  int err = 0;
  socklen_t len = sizeof(err);
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return {.error = err == 0 ? std::string() : errno_text(err)};
}

}  // namespace strata::net
