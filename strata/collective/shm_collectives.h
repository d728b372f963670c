#pragma once
// ShmCollectives: the ranks of one host (processes, or threads of one process)
// exchanging through a POSIX shared-memory segment instead of TCP
// (ARCHITECTURE.md "Collectives"). Each rank owns one ShmCollectives object.
//
//   // every rank r of n on this host, with a store all of them reach:
//   auto group = std::make_shared<strata::collective::ShmCollectives>(
//       r, n, store, strata::collective::ShmOptions{.timeout = std::chrono::seconds(60)});
//   Tensor g = group->all_reduce(r, local_grad, ReduceOp::SUM);   // rank == r
//
// Rendezvous (the constructor, and reset()) is collective: rank 0 creates a
// segment under a fresh unique name (shm_open, ftruncate, mmap) and publishes
// the name under `<prefix>/<epoch>/` in the store; the other ranks map it and
// report so; once every rank has mapped it, rank 0 removes the name
// (shm_unlink). From then on the segment exists only as long as a process maps
// it: a rank killed by SIGKILL leaves nothing behind in /dev/shm. (Only rank 0
// dying inside the rendezvous itself, between creating the segment and the
// last rank mapping it, leaves the name behind; a rendezvous that fails any
// other way removes it.)
//
// The segment holds a control line per rank (its pid, the step it has posted,
// the step it has reduced, and the header of its current call: call number,
// fingerprint and description of the call, dimension 0) and a data slot per
// rank (two halves, alternating between consecutive steps, of
// ShmOptions::slot_bytes each). A call moves its data in rounds of at most
// slot_bytes:
//   * all_reduce (and reduce_scatter, which keeps its block of the result):
//     small data (up to ShmOptions::one_pass_bytes): every rank copies its
//     (packed) input into its slot and posts, then reduces all of it straight
//     from the slots (one synchronisation). Larger data, reduce-scatter then
//     all-gather, the work divided among the ranks: every rank copies into its
//     slot only the blocks the other ranks reduce and posts; each rank reduces
//     its 1/size block from its own tensors and the others' slots into its
//     result and into its slot where its input would have been, posts that it
//     reduced, and copies the others' reduced blocks out of their slots.
//     Every element is reduced by one rank over the ranks in rank order: every
//     rank gets the same bits.
//   * all_gather and broadcast: the ranks (the root) copy their data into their
//     slots, post, and every rank copies what it needs out of the slots.
//   * barrier: a post and the wait for everyone's.
// The first round of every call compares the ranks' headers before any data is
// used: ranks whose collective schedules differ fail with
// FailedPreconditionError on every rank, showing both sides (as GlooCollectives)
// e.g. "ShmCollectives: collective schedules differ across ranks: this rank, rank
// 0, issued collective #3 all_reduce(SUM, [float32[2]]) but rank 1 issued
// collective #3 all_reduce(SUM, [float32[3]])"; the group stays usable.
//
// Waiting: a rank polls the peers' counters spinning on pause instructions (a
// short burst, then up to ShmOptions::spin), then sleeps on a futex in the
// segment (shared between processes) that a post wakes; it never yields its
// core. The spinning adapts to the machine: a rank that finds it lost its
// core while spinning (every core is taken, and spinning would steal time
// from the peer) spins the short burst alone for the next 250 ms, and a wait
// that spun its budget out and slept anyway halves the budget for the next
// one (down to a quarter of `spin`; a wait that spinning caught doubles it
// back). Every wait is bounded by the call's timeout.
//
// Errors: see collectives.h. Failures are shared through the segment, so every
// rank of the group (those waiting, and those that come later) gets the same one:
//   * DeadlineExceededError on a timeout, naming the ranks that did not arrive:
//     "ShmCollectives: collective #3 all_reduce(SUM, [float32[4]]): rank 2 never
//     entered it within 500ms (reported by rank 0)" ("never finished it" once the
//     call had started), then what each of them was last heard doing (as
//     GlooCollectives): "; rank 2 was last heard from 1.2 s before: completed
//     collective #2 barrier(); step 7, phase input". Every rank writes its
//     progress into its control line every ShmOptions::progress_interval from its
//     own thread (a steady-clock stamp, shared by the processes of a host, and
//     set_activity()'s text), so a stopped or hung rank's last words stay there;
//     its last completed call comes from its control line.
//   * UnavailableError when a rank waited for has exited (every rank publishes
//     its pid; a waiting rank checks the pids of the missing ranks a few times a
//     second): "... rank 1 (pid 4242) exited before it finished".
//   * AbortedError(reason) after abort(reason) on any rank's object; the error
//     given to fail() (its type kept) after fail(error).
// All of them break the group until reset(). With ShmOptions::rank_names the
// ranks are named after their tasks: "rank 1 (/job:worker/task:1)", "rank 1
// (/job:worker/task:1, pid 4242)", and schedules that differ read
// "collective schedules differ across workers: this worker, rank 0
// (/job:worker/task:0), issued ..." (GlooCollectives' wording).
//
// reset() is collective: every rank of the group must call it; it drops the
// segment and runs a new rendezvous under the next epoch (same store and options).
//
// Thread-safety: thread-safe; calls of one object are serialised. `rank`
// arguments must equal the object's rank (InvalidArgumentError). abort() may be
// called from any thread at any time.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/store.h"
#include "strata/collective/collectives.h"

namespace strata::collective {

struct ShmOptions {
  // Bound on each collective call, and on the rendezvous unless rendezvous_timeout is set.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  // Bound on the rendezvous (the constructor and reset()). 0: `timeout`.
  std::chrono::milliseconds rendezvous_timeout{0};
  // Namespace of this group's keys in the store (several groups may share one store).
  std::string prefix = "strata/shm";
  // Bytes one rank moves per round (each rank's slot holds two such halves; the
  // segment is about 2 * size * slot_bytes). Rounded up to 4 KiB. Rounds small
  // enough for the slots to stay in the shared cache are the fastest for large
  // tensors (measured: 1 MiB beat 256 KiB and 4 MiB).
  size_t slot_bytes = size_t{1} << 20;
  // All-reduces up to this many bytes are reduced in full by every rank in one
  // pass (one synchronisation instead of two).
  size_t one_pass_bytes = size_t{64} << 10;
  // The longest a waiting rank spins polling before it sleeps on the futex;
  // adapted per wait (see "Waiting" above). 0: no polling, sleep at once.
  std::chrono::microseconds spin{50};
  // Names of the ranks for error messages ("/job:worker/task:1"); empty, or one per rank.
  std::vector<std::string> rank_names = {};
  // How often this rank writes its progress into the segment (a timestamp and
  // set_activity()'s text): a peer that times out waiting for this rank says
  // what it was last doing, even when this rank is stopped or hung. 0: never.
  std::chrono::milliseconds progress_interval = std::chrono::milliseconds(500);
};

// Who can share a segment with this process: "<hostname> boot <boot id> shm
// <device>:<inode of /dev/shm> uid <effective uid>". Two processes with the
// same identity run on one booted machine, see one /dev/shm file system (not
// two containers with their own) and may open each other's segments (which
// are made 0600). The environment variable STRATA_HOST_ID, when set and not
// empty, replaces it (processes whose STRATA_HOST_ID agree must then be able
// to map each other's segments).
std::string shm_host_identity();

namespace internal {
struct ShmState;
}  // namespace internal

class ShmCollectives final : public Collectives {
 public:
  // Rendezvous with the other size-1 ranks (blocking). InvalidArgumentError for
  // a rank outside [0, size), a null store or a non-positive timeout;
  // DeadlineExceededError when peers do not arrive; UnavailableError when the
  // segment cannot be created or mapped.
  ShmCollectives(int rank, int size, std::shared_ptr<Store> store, ShmOptions options = {});
  ~ShmCollectives() override;
  ShmCollectives(const ShmCollectives&) = delete;
  ShmCollectives& operator=(const ShmCollectives&) = delete;

  // This object's rank.
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

  // Breaks the group with `error`: every rank's waiting and later calls throw
  // an error of the same code and message until reset() (abort() with the
  // error's type kept). For a step taken outside this group whose outcome the
  // other ranks wait for here (HostHierarchicalCollectives' cross-host step).
  // The first failure of the group wins. Never blocks on other ranks.
  void fail(const Error& error);

  // Says that this rank is busy outside the group until `until` (a step
  // elsewhere bounded by its own timeout): a rank of the group whose call
  // times out waiting only for ranks that are away keeps waiting until the
  // earliest of their `until`s instead of reporting them. A default
  // time_point clears it. The liveness check still applies.
  void set_away_until(std::chrono::steady_clock::time_point until);

  // What this rank is doing besides collectives ("step 41, phase input"),
  // published with its progress; called on the progress thread, so it must be
  // thread-safe. nullptr (the default) publishes the collectives alone; set it
  // back to nullptr before what `activity` reads goes away (this waits for a
  // call in progress).
  void set_activity(std::function<std::string()> activity);

  // The name the segment had while the rendezvous was under way (removed from
  // /dev/shm once every rank mapped it); for tests and diagnostics.
  std::string segment_name() const;

 private:
  std::unique_ptr<internal::ShmState> state_;
};

}  // namespace strata::collective
