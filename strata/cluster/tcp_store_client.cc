#include "strata/cluster/tcp_store.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <tuple>
#include <utility>

#include "strata/base/coding.h"
#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/socket_util.h"
#include "strata/cluster/cluster_token.h"
#include "strata/cluster/internal/tcp_store_protocol.h"
#include "strata/cluster/socket.h"

namespace strata::cluster {

using net::Clock;
using net::Ready;
using net::wait_fd;

namespace {

// Sends the HELLO on the connected `fd` and reads the server's answer by
// `deadline`. Returns "" when accepted, else why not (for the retry loop's
// last error); throws UnauthenticatedError when the server refused the token.
std::string handshake(int fd, const std::string& token, int abort_fd, Clock::time_point deadline,
                      const std::string& address) {
  // The HELLO goes into an empty send buffer (it always fits).
  std::string hello;
  internal::put_u8(hello, internal::kHello);
  internal::put_string(hello, internal::kHelloMagic);
  internal::put_string(hello, token);
  hello = internal::frame(hello);
  const ssize_t sent = ::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
  if (sent != static_cast<ssize_t>(hello.size())) {
    return sent < 0 ? net::errno_text(errno) : "short write of the HELLO frame";
  }
  std::string in;
  size_t want = internal::kFrameHeaderBytes;
  char buf[512];
  while (in.size() < want) {
    const ssize_t n = ::recv(fd, buf, std::min(sizeof(buf), want - in.size()), MSG_DONTWAIT);
    if (n > 0) {
      in.append(buf, static_cast<size_t>(n));
      if (want == internal::kFrameHeaderBytes && in.size() == want) {
        const uint32_t len = coding::decode_fixed32(in.data());
        if (len > internal::kMaxHelloFrame) return "malformed answer to the HELLO";
        want += len;
      }
    } else if (n == 0) {
      return "the server closed the connection after the HELLO";
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      const Ready ready = wait_fd(fd, POLLIN, abort_fd, deadline);
      STRATA_CHECK(ABORTED, ready != Ready::kAborted,
                   "TcpStoreClient: aborted while connecting to ", address);
      if (ready == Ready::kTimeout) return "no answer to the HELLO";
    } else if (errno != EINTR) {
      return net::errno_text(errno);
    }
  }
  try {
    internal::Reader r(std::string_view(in).substr(internal::kFrameHeaderBytes));
    const uint8_t status = r.u8();
    if (status == internal::kOk) return "";
    if (status == internal::kError) {
      throw UnauthenticatedError(
          str_cat("TcpStoreClient: the store at ", address, " refused this task's cluster token (",
                  r.str(), "): every task of the job needs the same ", kClusterTokenEnv));
    }
  } catch (const internal::ProtocolError&) {
  }
  return "malformed answer to the HELLO";
}

}  // namespace

TcpStoreClient::TcpStoreClient(std::string address, TcpStoreClientOptions options)
    : address_(std::move(address)),
      options_(std::move(options)),
      token_(options_.token ? *options_.token : cluster_token()) {
  validate_cluster_token(token_, "TcpStoreClient");
  std::tie(abort_read_, abort_write_) = net::make_pipe();
  const auto [host, port] = split_host_port(address_);
  const auto deadline = Clock::now() + options_.connect_timeout;
  Milliseconds backoff(10);
  std::string last_error;
  while (true) {
    net::AddrInfo info;
    last_error = net::resolve(host, port, /*passive=*/false, info);
    for (addrinfo* ai = info.list; ai != nullptr; ai = ai->ai_next) {
      UniqueFd fd = net::stream_socket(*ai);
      if (!fd.valid()) {
        last_error = net::errno_text(errno);
        continue;
      }
      const net::Connected c =
          net::connect_by(fd.get(), ai->ai_addr, ai->ai_addrlen, abort_read_.get(), deadline);
      STRATA_CHECK(ABORTED, c.ready != Ready::kAborted,
                   "TcpStoreClient: aborted while connecting to ", address_);
      if (c.ready == Ready::kTimeout || !c.error.empty()) {
        last_error = c.ready == Ready::kTimeout ? "connection timed out" : c.error;
        continue;
      }
      net::set_nodelay(fd.get());
      // The HELLO goes first: the server drops connections that do not open with one.
      last_error = handshake(fd.get(), token_, abort_read_.get(), deadline, address_);
      if (!last_error.empty()) continue;
      MutexLock lock(mu_);
      socket_ = std::move(fd);
      return;
    }
    // The server may not be up yet (the chief starts it): retry until the
    // start-up deadline, backing off; the wait is on the abort pipe, so abort()
    // interrupts it.
    if (Clock::now() >= deadline) break;
    const auto next = std::min(Clock::now() + backoff, deadline);
    const Ready ready = wait_fd(-1, 0, abort_read_.get(), next);
    STRATA_CHECK(ABORTED, ready != Ready::kAborted, "TcpStoreClient: aborted while connecting to ",
                 address_);
    backoff = std::min(backoff * 2, Milliseconds(500));
  }
  throw UnavailableError(str_cat("TcpStoreClient: could not connect to the store at ", address_,
                                 " within ",
                                 strata::internal::format_duration(options_.connect_timeout),
                                 " (last error: ", last_error, ")"));
}

TcpStoreClient::~TcpStoreClient() = default;

void TcpStoreClient::abort() {
  aborted_.store(true);
  const char byte = 1;
  // The byte is never read: the pipe stays readable, so every later wait wakes too.
  [[maybe_unused]] auto n = ::write(abort_write_.get(), &byte, 1);
  // Calls waiting for their turn wake as well.
  { MutexLock lock(turn_mu_); }
  turn_cv_.notify_all();
}

Milliseconds TcpStoreClient::reply_allowance(Milliseconds wait_time) {
  return std::clamp(wait_time / 10, Milliseconds(1000), Milliseconds(5000));
}

namespace {

// What a stalled store costs the call that finds it so.
std::string no_answer(Milliseconds limit) {
  return str_cat("the store server did not answer within ",
                 strata::internal::format_duration(limit),
                 " (stopped, hung or overloaded; a later call first takes the reply this one "
                 "was owed)");
}

}  // namespace

std::string TcpStoreClient::call(const std::string& request, Milliseconds limit,
                                 const std::string& what) {
  const auto deadline = Clock::now() + std::max(limit, Milliseconds(1));
  STRATA_CHECK_ARG(request.size() <= options_.max_frame_bytes, "TcpStoreClient(", address_,
                   "): ", what, ": the request of ", request.size(),
                   " bytes is larger than the store's frame limit of ", options_.max_frame_bytes,
                   " bytes");
  {
    MutexLock lock(turn_mu_);
    const bool free = turn_cv_.wait_until(
        turn_mu_, deadline, [&]() STRATA_REQUIRES(turn_mu_) { return !busy_ || aborted_.load(); });
    STRATA_CHECK(ABORTED, !aborted_.load(), "TcpStoreClient(", address_, "): ", what,
                 ": the store was aborted");
    STRATA_CHECK(DEADLINE_EXCEEDED, free, "TcpStoreClient(", address_, "): ", what,
                 ": another call held the connection to the store for all of ",
                 strata::internal::format_duration(limit),
                 " (the store server is stopped, hung or overloaded)");
    busy_ = true;
  }
  struct TurnRelease {
    TcpStoreClient& client;
    ~TurnRelease() {
      {
        MutexLock lock(client.turn_mu_);
        client.busy_ = false;
      }
      client.turn_cv_.notify_one();
    }
  } release{*this};
  return call_in_turn(request, limit, deadline, what);
}

std::string TcpStoreClient::call_in_turn(const std::string& request, Milliseconds limit,
                                         TimePoint deadline, const std::string& what) {
  MutexLock lock(mu_);
  STRATA_CHECK(UNAVAILABLE, !broken_, "TcpStoreClient(", address_, "): ", what,
               ": the connection to the store was lost earlier");
  auto out_of_time = [&] {
    throw DeadlineExceededError(
        str_cat("TcpStoreClient(", address_, "): ", what, ": ", no_answer(limit)));
  };
  // A call that ran out of time leaves the stream in step: what it did not
  // send yet goes first, and the reply it was owed is read and dropped, by
  // this call's deadline. (A paused store host so costs the calls during the
  // pause their deadlines, and the connection serves again once it answers.)
  if (!send_pending(deadline, what) || !skip_owed_replies(deadline, what)) out_of_time();
  unsent_ = internal::frame(request);
  const size_t frame_bytes = unsent_.size();
  if (!send_pending(deadline, what)) {
    // A request the server has not seen a byte of is simply withdrawn.
    if (unsent_.size() == frame_bytes) {
      unsent_.clear();
    } else {
      ++owed_replies_;
    }
    out_of_time();
  }
  std::optional<std::string> reply = read_reply(deadline, what);
  if (!reply) {
    ++owed_replies_;
    out_of_time();
  }
  return std::move(*reply);
}

void TcpStoreClient::lose_connection(ErrorCode code, const std::string& what,
                                     const std::string& why) {
  broken_ = true;  // there is no stream to keep in step any more
  throw_error(code, str_cat("TcpStoreClient(", address_, "): ", what, ": ", why));
}

void TcpStoreClient::lose_connection_to_errno(const std::string& what) {
  lose_connection(
      ErrorCode::UNAVAILABLE, what,
      str_cat("lost the connection to the store server (", net::errno_text(errno), ")"));
}

bool TcpStoreClient::wait_ready(short events, TimePoint deadline, const std::string& what) {
  const Ready r = wait_fd(socket_.get(), events, abort_read_.get(), deadline);
  if (r == Ready::kAborted) lose_connection(ErrorCode::ABORTED, what, "aborted");
  return r != Ready::kTimeout;
}

bool TcpStoreClient::send_pending(TimePoint deadline, const std::string& what) {
  size_t sent = 0;
  while (sent < unsent_.size()) {
    const ssize_t n = ::send(socket_.get(), unsent_.data() + sent, unsent_.size() - sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(POLLOUT, deadline, what)) {
        unsent_.erase(0, sent);
        return false;
      }
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      lose_connection_to_errno(what);
    }
  }
  unsent_.clear();
  return true;
}

std::optional<std::string> TcpStoreClient::read_reply(TimePoint deadline, const std::string& what) {
  char buf[65536];
  for (;;) {
    size_t want = internal::kFrameHeaderBytes;
    if (partial_reply_.size() >= internal::kFrameHeaderBytes) {
      const uint32_t len = coding::decode_fixed32(partial_reply_.data());
      if (len > internal::kMaxReplyFrame) {
        lose_connection(ErrorCode::DATA_LOSS, what, str_cat("reply frame of ", len, " bytes"));
      }
      want += len;
      if (partial_reply_.size() == want) break;
    }
    const ssize_t n = ::recv(socket_.get(), buf,
                             std::min(sizeof(buf), want - partial_reply_.size()), MSG_DONTWAIT);
    if (n > 0) {
      partial_reply_.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      lose_connection(ErrorCode::UNAVAILABLE, what, "the store server closed the connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(POLLIN, deadline, what)) return std::nullopt;
    } else if (errno != EINTR) {
      lose_connection_to_errno(what);
    }
  }
  std::string payload = partial_reply_.substr(internal::kFrameHeaderBytes);
  partial_reply_.clear();
  return payload;
}

bool TcpStoreClient::skip_owed_replies(TimePoint deadline, const std::string& what) {
  while (owed_replies_ > 0) {
    if (!read_reply(deadline, what)) return false;
    --owed_replies_;
  }
  return true;
}

namespace {

// Parses a reply's status; throws for ERROR and malformed replies. Returns the
// status (OK or TIMEOUT).
uint8_t reply_status(internal::Reader& r, const std::string& who) {
  try {
    const uint8_t status = r.u8();
    if (status == internal::kError) throw InvalidArgumentError(r.str());
    if (status == internal::kExhausted) throw ResourceExhaustedError(str_cat(who, ": ", r.str()));
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

void TcpStoreClient::set(const std::string& key, const Bytes& value, Milliseconds timeout) {
  std::string req;
  internal::put_u8(req, internal::kSet);
  internal::put_string(req, key);
  internal::put_bytes(req, value.data(), value.size());
  const std::string what = str_cat("set('", key, "')");
  const std::string reply = call(req, timeout, what);
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
  const std::string reply = call(req, timeout + reply_allowance(timeout), what);
  internal::Reader r(reply);
  if (reply_status(r, who) == internal::kTimeout) {
    const auto waited = std::chrono::duration_cast<Milliseconds>(Clock::now() - start);
    throw DeadlineExceededError(str_cat(who, ": key '", key, "' was not set after waiting ",
                                        strata::internal::format_duration(waited), " (timeout ",
                                        strata::internal::format_duration(timeout), ")"));
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
  const std::string reply = call(req, timeout + reply_allowance(timeout), what);
  internal::Reader r(reply);
  if (reply_status(r, who) == internal::kTimeout) {
    const auto missing = parse_reply(who, [&] { return r.keys(); });
    const auto waited = std::chrono::duration_cast<Milliseconds>(Clock::now() - start);
    throw DeadlineExceededError(str_cat(who, ": keys ", internal::quoted(missing),
                                        " still missing after waiting ",
                                        strata::internal::format_duration(waited), " (timeout ",
                                        strata::internal::format_duration(timeout), ")"));
  }
}

int64_t TcpStoreClient::add(const std::string& key, int64_t delta, Milliseconds timeout) {
  std::string req;
  internal::put_u8(req, internal::kAdd);
  internal::put_string(req, key);
  coding::put_fixed64(req, static_cast<uint64_t>(delta));
  const std::string what = str_cat("add('", key, "', ", delta, ")");
  const std::string who = str_cat("TcpStoreClient(", address_, "): ", what);
  const std::string reply = call(req, timeout, what);
  internal::Reader r(reply);
  reply_status(r, who);
  return parse_reply(who, [&] { return static_cast<int64_t>(r.u64()); });
}

bool TcpStoreClient::check(const std::vector<std::string>& keys, Milliseconds timeout) {
  std::string req;
  internal::put_u8(req, internal::kCheck);
  internal::put_keys(req, keys);
  const std::string what = str_cat("check(", internal::quoted(keys), ")");
  const std::string who = str_cat("TcpStoreClient(", address_, "): ", what);
  const std::string reply = call(req, timeout, what);
  internal::Reader r(reply);
  reply_status(r, who);
  return parse_reply(who, [&] { return r.u8() != 0; });
}

}  // namespace strata::cluster
