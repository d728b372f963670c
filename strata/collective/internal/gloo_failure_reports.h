#pragma once
// Private to GlooCollectives: what a rank of a Gloo group reports when a call
// fails, and the store records through which the ranks that see one failure
// agree on one verdict (gloo_collectives.h quotes the messages).
//
//   GlooFailureReports reports(0, 3, store, {.prefix = "strata/gloo", .timeout = 500ms});
//   reports.not_entered("GlooCollectives: collective #3 barrier() on ...", reports.names({2}));
//   // "...: rank 2 never entered it within 500ms (reported by rank 0)"
//
// Gloo's TCP transport closes every connection of a rank whose wait times out,
// so a peer still waiting in the same call sees "connection closed" instead of
// a timeout. Before it fails, a rank that timed out (or found the schedules
// differ) leaves a record under a key of the call; a peer that lost its
// connection looks for such a record (peer_record) and then reports the same
// verdict. Without one the connection loss is real (a peer died). A store that
// is gone too (its host died) leaves every rank with its own local message.
//
// Immutable after construction; thread-safe (the store is).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/base/store.h"

namespace strata::collective::internal {

struct GlooFailureReportsOptions {
  std::string prefix;                        // the group's key prefix (GlooOptions.prefix)
  std::chrono::milliseconds timeout{};       // GlooOptions.timeout
  std::vector<std::string> rank_names = {};  // GlooOptions.rank_names
};

class GlooFailureReports {
 public:
  GlooFailureReports(int rank, int size, std::shared_ptr<Store> store,
                     GlooFailureReportsOptions options);

  // "rank 0 of 2".
  std::string me() const;
  // "rank 2" or, with rank names, "rank 2 (/job:worker/task:2)".
  std::string name(int r) const;
  // "rank 1", "rank 1 and rank 2", "rank 1, rank 2 and rank 3".
  std::string names(const std::vector<int>& ranks) const;
  // "group <prefix> of <size> ranks": the group part of every call's description.
  std::string group() const;

  // How long a rank waits for the records of its peers: a tenth of the
  // timeout, 0.1-2 s.
  std::chrono::milliseconds grace() const;
  // The bound on the store calls that record or read one report: a tenth of
  // the timeout, 1-5 s. The store may be served by the rank that failed (a
  // stopped chief): a report then costs this rank at most this long (the
  // calls of one report share the bound).
  std::chrono::milliseconds store_timeout() const;

  // Leaves this rank's record `value` under `key` (the rank's number is
  // appended), waiting for the store until `until` (by default
  // store_timeout() from now); a store that is gone loses it.
  void leave_record(const std::string& key, const std::string& value) const;
  void leave_record(const std::string& key, const std::string& value,
                    std::chrono::steady_clock::time_point until) const;

  struct PeerRecord {
    size_t key = 0;  // index into the keys looked for
    int rank = -1;   // the peer that left it
    std::string value;
  };
  // The first record another rank left under one of `keys`, waiting up to
  // grace() for one to appear; nullopt without one (or without a store).
  std::optional<PeerRecord> peer_record(const std::vector<std::string>& keys) const;

  // After a data-phase timeout of collective #call (`what` describes it):
  // records the timeout under `key`, waits up to grace() for the other ranks
  // that timed out, and names those that did not (they never finished the
  // call). "" when the store cannot tell.
  std::string unfinished_verdict(const std::string& what, uint64_t call,
                                 const std::string& key) const;

  // Publishes this rank's progress `text` under its progress key, stamped with
  // the wall clock, for last_heard(); a store that is gone loses it.
  void publish_progress(const std::string& text) const;
  // What `ranks` last published with publish_progress, one sentence each
  // ("; rank 1 was last heard from 0.8 s before: <text>"), or "" where a rank
  // published nothing or the store cannot tell. Waits until `until` (by
  // default store_timeout() from now).
  std::string last_heard(const std::vector<int>& ranks) const;
  std::string last_heard(const std::vector<int>& ranks,
                         std::chrono::steady_clock::time_point until) const;

  // The message for schedules that differ between this rank and rank `peer`.
  std::string schedules_differ(uint64_t call, const std::string& description, int peer,
                               uint64_t their_call, const std::string& their_description) const;
  // The header-phase verdict: `missing` never entered `collective`; `heard`
  // (from last_heard) follows.
  std::string not_entered(const std::string& collective, const std::string& missing,
                          const std::string& heard = "") const;
  // A call that Gloo failed with `gloo_message`: a timeout or a transport failure.
  std::string gloo_failure(const std::string& what, uint64_t call, bool timed_out,
                           const std::string& gloo_message) const;

 private:
  std::string progress_key(int r) const;  // "<prefix>/progress/<r>"
  const int rank_;
  const int size_;
  const std::shared_ptr<Store> store_;
  const GlooFailureReportsOptions options_;
};

// `gloo_message` with every "[address]:port" in host byte order. Gloo's TCP
// transport prints a peer's address with the port as stored in the socket
// address, in network byte order ("[127.0.0.1]:14640" for port 12345 on a
// little-endian host); every Gloo message that Strata passes on goes through
// this first.
std::string with_host_order_ports(const std::string& gloo_message);

}  // namespace strata::collective::internal
