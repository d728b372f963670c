#pragma once
// Private to GlooCollectives: one TCP connection per pair of ranks that the
// calling thread reads and writes itself. The small calls' header exchange
// (every call's header, with its data when it is small) goes over it: over
// Gloo's pairs each message took a hop through Gloo's device thread (the
// device thread wakes on the socket, reads, then wakes the caller), and on
// loopback that hop was most of a small call's time. The larger payloads and
// the data of large calls stay on Gloo.
//
//   DirectMesh mesh(rank, size, "127.0.0.1");            // listens
//   store.set("direct/<rank>", mesh.address());           // published, then
//   mesh.connect(addresses, checks, deadline);            // every pair connected
//   DirectMesh::Outcome out = mesh.exchange(message_for, in, stride, deadline);
//
// Who is who: a rank connects to every lower rank and accepts every higher
// one. The connecting side sends a hello (a magic number, its rank and its
// check: the random number it published in the authenticated store before the
// mesh formed); the accepting side takes a connection only when the check is
// the one that rank published, answers with its own, and the connecting side
// verifies that. A stray connection (a port scanner, a health check) is
// closed: one that sends anything else at once, one that sends nothing after
// two seconds, and the accepting side keeps waiting for the real peer.
//
// Messages are framed (a little-endian u32 length, then the bytes). An
// exchange sends one message to every peer and reads exactly one from every
// peer, both directions at once on non-blocking sockets, waiting in poll()
// on all of them with the deadline and the abort pipe. It reports the peers
// whose message arrived, and why it stopped: a timeout, a connection lost
// (closed or reset: a peer that died or failed), or abort().
//
// Thread-safety: one exchange at a time (the caller serialises calls);
// abort() may be called from any thread at any time and wakes an exchange in
// progress; every later exchange ends aborted at once.

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/base/file.h"

namespace strata::collective::internal {

class DirectMesh {
 public:
  using Clock = std::chrono::steady_clock;

  // Listens on `hostname` (a port the OS picks). UnavailableError when it
  // cannot.
  DirectMesh(int rank, int size, const std::string& hostname);
  ~DirectMesh();
  DirectMesh(const DirectMesh&) = delete;
  DirectMesh& operator=(const DirectMesh&) = delete;

  // "host:port" where this rank listens, for the peers.
  const std::string& address() const noexcept { return address_; }

  // Connects every pair by `deadline`: `addresses[p]` is where rank p
  // listens, `checks[p]` the number rank p published (this rank's own
  // included). UnavailableError naming the rank that could not be connected
  // or failed the check; DeadlineExceededError at the deadline; AbortedError
  // after abort(). While it waits for higher ranks to connect it calls
  // `between_waits` (when given) every kPollInterval, which may throw to stop
  // waiting for a peer known to have given up.
  static constexpr std::chrono::milliseconds kPollInterval{200};
  void connect(const std::vector<std::string>& addresses, const std::vector<uint64_t>& checks,
               Clock::time_point deadline, const std::function<void()>& between_waits = {});

  enum class Status { kDone, kTimeout, kLost, kAborted };
  struct Outcome {
    Status status = Status::kDone;
    std::vector<char> arrived;  // per rank: its message is in (this rank's own: 1)
    int lost = -1;              // kLost: the peer whose connection went
    std::string why;            // kLost: how it went
  };
  // Sends `message_for(p)` to every peer p (each view must stay valid until
  // the exchange returns) and receives one message from every peer into
  // `in + p * stride` (at most `stride` bytes: a longer one is
  // DataLossError), by `deadline`.
  Outcome exchange(const std::function<std::string_view(int)>& message_for, char* in, size_t stride,
                   Clock::time_point deadline);

  // Wakes an exchange in progress; every later one ends aborted at once.
  // The connections are shut down, so the peers' exchanges end at once too
  // (the connection lost).
  void abort();

 private:
  struct Peer {
    UniqueFd fd;
    // The message in flight each way: frame header and body.
    std::string_view out;
    uint32_t out_length = 0;
    size_t out_done = 0;  // bytes of the 4 + out_length sent
    char in_header[4] = {};
    size_t in_done = 0;  // bytes of the 4 + length received
  };
  void connect_to(int peer, const std::string& address, const std::vector<uint64_t>& checks,
                  Clock::time_point deadline);
  void accept_from_higher_ranks(const std::vector<uint64_t>& checks, Clock::time_point deadline,
                                const std::function<void()>& between_waits);

  const int rank_;
  const int size_;
  std::string address_;
  UniqueFd listen_;
  UniqueFd abort_read_, abort_write_;
  std::vector<Peer> peers_;       // by rank; this rank's own is unused
  std::vector<pollfd> poll_fds_;  // an exchange's wait set, kept for the next
};

}  // namespace strata::collective::internal
