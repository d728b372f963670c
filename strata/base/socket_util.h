#pragma once
// The poll()-based socket plumbing of Strata's own TCP connections (the
// rendezvous store's server and client, the collectives' direct mesh):
// address resolution, pipes that wake a wait, waits with a deadline. Every
// wait takes a deadline; an abort pipe wakes it.

#include <netdb.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <utility>

#include "strata/base/file.h"

namespace strata::net {

using Clock = std::chrono::steady_clock;

// strerror(err) as a string.
std::string errno_text(int err);

// getaddrinfo's result list, freed on destruction.
struct AddrInfo {
  addrinfo* list = nullptr;
  AddrInfo() = default;
  AddrInfo(const AddrInfo&) = delete;
  AddrInfo& operator=(const AddrInfo&) = delete;
  ~AddrInfo();
};

// Resolves host:port for a TCP stream socket (passive: for bind). Returns the
// getaddrinfo error text, empty on success.
std::string resolve(const std::string& host, const std::string& port, bool passive, AddrInfo& out);

// A non-blocking, close-on-exec stream socket for `ai`; invalid (errno set)
// when the OS refuses.
UniqueFd stream_socket(const addrinfo& ai);

// Disables Nagle's algorithm: small, latency-bound messages.
void set_nodelay(int fd);

// A non-blocking, close-on-exec pipe (read end, write end); UnavailableError if
// the OS refuses.
std::pair<UniqueFd, UniqueFd> make_pipe();

// Milliseconds from now until `deadline`, clamped to [0, 2^30] for poll().
int ms_until(Clock::time_point deadline);

enum class Ready { kYes, kTimeout, kAborted };

// Waits until `fd` (ignored when < 0) has `events`, the deadline passes, or
// `abort_fd` is readable (checked first).
Ready wait_fd(int fd, short events, int abort_fd, Clock::time_point deadline);

// Connects the non-blocking socket `fd` to `address` by `deadline`, waking
// for `abort_fd` too. `ready` is kTimeout or kAborted when the wait ended
// so; otherwise kYes, and `error` says why the connection failed (refused,
// unreachable), empty once connected.
struct Connected {
  Ready ready = Ready::kYes;
  std::string error;
};
Connected connect_by(int fd, const sockaddr* address, socklen_t length, int abort_fd,
                     Clock::time_point deadline);

}  // namespace strata::net
