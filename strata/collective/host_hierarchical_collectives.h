#pragma once
// HostHierarchicalCollectives: one rank per process (a worker) in a cluster
// where some processes share a host: shared memory among the processes of each
// host (ShmCollectives), Gloo over TCP among one process per host (its
// leader: the host's lowest rank). MultiWorkerMirroredStrategy uses it for a
// cluster whose workers are spread over several hosts, some of which run
// several workers (multi_worker_mirrored_strategy.h).
//
//   // rank r of 3: ranks 0 and 2 on host A, rank 1 on host B
//   std::vector<int> host_of_rank = {0, 1, 0};
//   auto intra = ...;    // ShmCollectives of host A's 2 ranks (null on host B: alone there)
//   auto leaders = ...;  // GlooCollectives of ranks 0 and 1 (null on rank 2)
//   HostHierarchicalCollectives group(r, host_of_rank, intra, leaders);
//   Tensor sum = group.all_reduce(r, grad, ReduceOp::SUM);
//
// Hosts are numbered by their lowest rank (host_of_rank must name them so:
// host h's first rank comes before host h+1's); within a host the ranks keep
// their order (intra rank = position among the host's ranks); the leaders'
// group rank is the host number.
//   * all_reduce: reduce within the host (MEAN as SUM), the leaders all-reduce
//     the hosts' partial results, every leader broadcasts the result within
//     its host (MEAN divides once, by size()). Every step is deterministic and
//     ends in a copy of one result (Gloo's and ShmCollectives' all-reduces give
//     every rank the same bits), so every rank gets the same bits.
//   * all_gather: the ranks' dimension 0 first (the same three steps), then
//     the data: gathered within each host, across the leaders, broadcast within
//     the host, and the blocks put back in rank order.
//   * reduce_scatter: all_reduce, then rank r keeps block r of size().
//   * broadcast: within the root's host from the root, across the leaders from
//     the root host's leader, then within every other host from its leader.
//   * barrier: within the host, across the leaders, within the host.
// Failures: a step that fails on a leader (its Gloo call: a dead or stopped
// host, a schedule mismatch) is handed to the ranks of its host waiting for
// its outcome (ShmCollectives::fail: the same type and message); while the
// leader is in its cross-host step it is marked away until that step's
// timeout (ShmCollectives::set_away_until), so its host's ranks report the
// cross-host verdict, not the leader as late. A step that fails within a host
// makes its leader abort the leaders' group, so the other hosts fail at once
// (UnavailableError naming that leader, as for a worker that died) instead of
// waiting out their timeout; the ranks of the failing host report the
// original failure (naming the dead or stopped process).
// Every failure breaks the group until reset(), a mismatch (FailedPrecondition
// or InvalidArgumentError) too, unlike ShmCollectives and GlooCollectives on
// their own: the ranks of the other hosts must not wait for a leader that left.
// abort() aborts both groups; reset() resets both (collective, as theirs).
// Thread-safety: thread-safe; calls of one object are serialised.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "strata/base/mutex.h"
#include "strata/collective/collectives.h"

namespace strata::collective {

class ShmCollectives;

class HostHierarchicalCollectives final : public Collectives {
 public:
  // `intra`: the ShmCollectives of this rank's host (null when the rank is
  // alone on its host); `leaders`: the group of the hosts' leaders (null
  // unless this rank leads its host and there are several hosts);
  // `leader_timeout`: the leaders' call timeout (how long a leader may be away
  // on a cross-host step). InvalidArgumentError for a rank outside
  // host_of_rank, hosts not numbered by their lowest rank, or groups whose
  // sizes do not match the hosts.
  HostHierarchicalCollectives(int rank, std::vector<int> host_of_rank,
                              std::shared_ptr<ShmCollectives> intra,
                              std::shared_ptr<Collectives> leaders,
                              std::chrono::milliseconds leader_timeout);

  int size() const override { return static_cast<int>(host_of_rank_.size()); }
  int num_hosts() const { return num_hosts_; }
  using Collectives::all_reduce;
  std::vector<Tensor> all_reduce(int rank, const std::vector<Tensor>& tensors,
                                 ReduceOp op) override;
  Tensor all_gather(int rank, const Tensor& tensor) override;
  Tensor reduce_scatter(int rank, const Tensor& tensor, ReduceOp op) override;
  Tensor broadcast(int rank, const Tensor& tensor, int root) override;
  void barrier(int rank) override;
  void abort(const std::string& reason) override;
  void reset() override;

 private:
  void check_rank(int rank) const;
  bool leader() const { return intra_rank_ == 0; }
  // Runs the leaders' step `fn` on the leader, marked away for its duration;
  // a failure is handed to the host's other ranks (ShmCollectives::fail).
  template <typename Fn>
  auto across_hosts(Fn&& fn);
  // Runs a step within the host; on a leader a failure aborts the leaders' group.
  template <typename Fn>
  auto within_host(Fn&& fn);
  // Within the host: every rank gets the leader's `t` (`like` states the shape
  // and dtype on the others).
  Tensor from_leader(const Tensor& t);
  // The ranks' `t` (one block each) concatenated in host order (hosts in
  // order, ranks within each host in order); `rows`: the total of dimension 0.
  Tensor gather_in_host_order(const Tensor& t, int64_t rows);

  const int rank_;
  const std::vector<int> host_of_rank_;
  const std::shared_ptr<ShmCollectives> intra_;
  const std::shared_ptr<Collectives> leaders_;
  const std::chrono::milliseconds leader_timeout_;
  int num_hosts_ = 0;
  int host_ = 0;
  int intra_rank_ = 0;
  std::vector<int> host_order_;  // the ranks, hosts in order, ranks within a host in order

  Mutex call_mu_;  // serialises calls
};

}  // namespace strata::collective
