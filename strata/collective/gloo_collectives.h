#pragma once
// GlooCollectives: one rank per process (a worker), talking to the other
// processes over Gloo's TCP transport (ARCHITECTURE.md "Collectives", gloo).
//
//   // every worker w of W, with a store all of them reach (the chief's TCP store,
//   // or a strata::InMemoryStore when the ranks are threads of one process):
//   std::shared_ptr<strata::Store> store =
//   std::make_shared<strata::cluster::TcpStoreClient>(chief); auto group =
//   std::make_shared<strata::collective::GlooCollectives>(
//       w, W, store, strata::collective::GlooOptions{.timeout = std::chrono::seconds(60),
//                                                    .hostname = "10.0.0.7"});
//   Tensor g = group->all_reduce(w, local_grad, ReduceOp::SUM);   // rank == w
//
// The constructor is collective: it publishes this rank's listening addresses
// under `<prefix>/<epoch>/` in the store and connects a full mesh to the others
// (DeadlineExceededError if they do not all arrive within the rendezvous
// timeout: options.rendezvous_timeout, else options.timeout).
//
// Every call first exchanges a small fixed-size header with every peer (call
// sequence number, fingerprint of the call: collective, op, dtypes, shapes,
// root and group; dimension 0 for all_gather). It detects workers whose
// collective schedules differ before any data moves: FailedPreconditionError
// on every rank, showing both sides, e.g.
//   "GlooCollectives: collective schedules differ across workers: this worker,
//    rank 0, issued collective #3 all_reduce(SUM, [float32[2]]) on group
//    strata/gloo of 2 ranks but rank 1 issued collective #3 all_reduce(SUM,
//    [float32[3]]) on group strata/gloo of 2 ranks"
// (the group stays usable). A call whose data fits the receive area every rank
// keeps for each peer (4 MiB / (size - 1), at least 256 KiB: all_reduce inputs,
// the block of a reduce_scatter input that goes to that peer, the root's
// broadcast tensor, each rank's all_gather part) sends that data with its
// header: up to 64 KiB inside the header's own message, more as a second
// message right behind it over Gloo. The headers (with the data they carry)
// go over a direct mesh of the group's own (collective/internal/direct_mesh.h:
// one TCP connection per pair, formed at the rendezvous, each side proving
// itself with the number it published in the store) that the calling thread
// writes and reads itself, waiting in poll() on every peer at once: one
// one-way trip and one wake-up per call, where a message over Gloo's pairs
// also woke Gloo's device thread first. Each rank keeps Gloo's receives for
// the next call's larger payloads posted while the current one runs (two
// alternating sets of receive areas, registered once per connection), so
// those go out at once too. The header is still checked before the data is
// used, and every rank then reduces (or assembles) locally in rank order, so
// all ranks get the same bits.
// On a timeout it gives every rank that waited the
// same verdict, "collective #3 <what>: rank 2 never entered it within 500ms"
// (then "reported by rank 0"), followed by what each missing rank last
// published of its progress (GlooOptions::progress_interval): "rank 2 was last
// heard from 1.2 s before: completed collective #2 <what>; step 7, phase input". When the data
// phase times out instead, the ranks that timed out record it in the store and wait briefly for
// each other (a tenth of the timeout, 0.1-2 s): every one of them then reports the same "rank 2
// never finished it" for the ranks that did not. The header exchange is the whole of barrier().
// Larger data moves after the headers: all_reduce and reduce_scatter by direct exchange in 512 KiB
// segments (every rank sends block p of its input to rank p and reduces its own block from all
// ranks' blocks in rank order as the segments arrive; all_reduce then sends each reduced segment
// on to every peer), so a reduce_scatter rank receives only its block, about half the traffic of
// an all_reduce; all_gather and broadcast use Gloo's allgatherv and broadcast. A list of tensors
// is packed into one buffer per dtype.
//
// Errors: see collectives.h. A transport failure (a peer died, a connection
// closed) is UnavailableError naming the peer's rank where Gloo reports its
// address; a timeout is DeadlineExceededError. Both, like abort(), break the
// group: later calls rethrow the error until reset().
//
// abort(reason) fails every connection of this rank, which wakes this rank's
// waiting call (AbortedError) and makes the peers' calls fail with
// UnavailableError instead of waiting out their timeouts.
//
// reset() is collective: every rank of the group must call it (it runs a new
// rendezvous under the next epoch, with the same store and options).
//
// SIGPIPE: the first GlooCollectives sets SIGPIPE to SIG_IGN when it still
// has the default disposition (a closed peer socket must fail a call with
// UnavailableError, not kill the process); a handler the program installed is
// left alone.
//
// ThreadSanitizer builds: this file supplies a default TSan suppression (a
// weak __tsan_default_suppressions, so a program's own definition wins) for a
// report inside uninstrumented libgloo that is not a race; gloo_collectives.cc
// explains it.
//
// Thread-safety: thread-safe; calls are serialised (one rank per process).
// `rank` arguments must equal this process's rank (InvalidArgumentError).

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/base/store.h"
#include "strata/collective/collectives.h"

namespace strata::collective {

struct GlooOptions {
  // Bound on each collective call, and on the rendezvous unless rendezvous_timeout is set.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  // Bound on the rendezvous (the constructor and reset()): every store call
  // and every connection of the mesh ends by it. 0: `timeout`.
  std::chrono::milliseconds rendezvous_timeout{0};
  // Address this rank listens on; other ranks must reach it. Loopback by default.
  std::string hostname = "127.0.0.1";
  // Network interface to listen on ("eth0"); when set it takes precedence over hostname.
  std::string iface = "";
  // Namespace of this group's keys in the store (several groups may share one store).
  // Part of every call's fingerprint.
  std::string prefix = "strata/gloo";
  // Names of the ranks for error messages ("/job:worker/task:1"); empty, or one per rank.
  std::vector<std::string> rank_names = {};
  // How often this rank publishes its progress to the store (its last
  // completed collective and set_activity()'s text): a peer that times out
  // waiting for this rank says what it was last doing, even when this rank is
  // stopped or hung. 0: never.
  std::chrono::milliseconds progress_interval = std::chrono::milliseconds(500);
  // Tests only: called with the call's sequence number once the headers agree,
  // before the data moves (a test stalls one rank there). While it is set this
  // rank sends no data with its headers, so every call has a data phase.
  std::function<void(uint64_t call)> before_data_for_testing = nullptr;
};

namespace internal {
struct GlooState;
}  // namespace internal

class GlooCollectives final : public Collectives {
 public:
  // Rendezvous with the other size-1 ranks (blocking). InvalidArgumentError for
  // a rank outside [0, size) or a non-positive timeout; DeadlineExceededError
  // when peers do not arrive; UnavailableError when connecting fails.
  GlooCollectives(int rank, int size, std::shared_ptr<Store> store, GlooOptions options = {});
  ~GlooCollectives() override;
  GlooCollectives(const GlooCollectives&) = delete;
  GlooCollectives& operator=(const GlooCollectives&) = delete;

  // This process's rank.
  int rank() const;
  int size() const override;
  using Collectives::all_reduce;
  std::vector<Tensor> all_reduce(int rank, const std::vector<Tensor>& tensors,
                                 ReduceOp op) override;
  Tensor all_gather(int rank, const Tensor& tensor) override;
  Tensor reduce_scatter(int rank, const Tensor& tensor, ReduceOp op) override;
  Tensor broadcast(int rank, const Tensor& tensor, int root) override;
  void barrier(int rank) override;
  void abort(const std::string& reason) override;
  void reset() override;

  // What this rank is doing besides collectives ("step 41, phase input"),
  // published with its progress; called on the progress thread, so it must be
  // thread-safe. nullptr (the default) publishes the collectives alone; set it
  // back to nullptr before what `activity` reads goes away (this waits for a
  // call in progress).
  void set_activity(std::function<std::string()> activity);

 private:
  std::unique_ptr<internal::GlooState> state_;
};

}  // namespace strata::collective
