#pragma once
// HierarchicalCollectives: the ranks of several processes, each with
// `local_size` replica threads, composed from an in-process group (the local
// ranks of this process) and a cross-process group (one rank per process).
// This is the multi-worker shape of ARCHITECTURE.md: local reduce -> one
// cross-process all-reduce per process -> local hand-out.
//
//   // in process p of P, with L replica threads:
//   auto local = std::make_shared<LocalCollectives>(L, options);
//   auto cross = std::make_shared<GlooCollectives>(p, P, store, gloo_options);
//   auto group = std::make_shared<HierarchicalCollectives>(L, local, cross, p);
//   // on replica thread l:
//   Tensor sum = group->all_reduce(p * L + l, grad, ReduceOp::SUM);   // Σ over P*L ranks
//
// Ranks are global: rank = process_index * local_size + local_rank, size() =
// local_size * cross->size(); this object accepts the ranks of its process only
// (InvalidArgumentError otherwise). Local rank 0 of each process is the one that
// talks to the other processes:
//   * all_reduce: local all_reduce (SUM for MEAN), local rank 0 all-reduces the
//     partial result across processes (MEAN divides once, by size()), and the
//     other local ranks take that result (shared memory, no copy).
//   * all_gather: local all_gather, then a cross all_gather of the local blocks
//     (global rank order = process order, then local order).
//   * reduce_scatter: all_reduce, then each rank keeps its block of size().
//   * broadcast: to local rank 0 of the root's process, across processes, then
//     within each process (every rank's shape/dtype is checked).
//   * barrier: local barrier, cross barrier by local rank 0, local barrier.
// With local_size 1 every call goes straight to the cross-process group (the
// local steps would only copy the data and pass a barrier of one rank).
// A failure of the cross-process step (mismatch, timeout, a dead peer) is
// rethrown on every local rank with its original type and message.
//
// abort() aborts both groups; reset() resets both (so it is collective if the
// cross group's reset is, as GlooCollectives'). Thread-safety: thread-safe.

#include <array>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "strata/base/mutex.h"
#include "strata/collective/collectives.h"

namespace strata::collective {

class HierarchicalCollectives final : public Collectives {
 public:
  // `local` must have local_size ranks; this process is rank `process_index`
  // of `cross`. InvalidArgumentError otherwise (or for null groups).
  HierarchicalCollectives(int local_size, std::shared_ptr<Collectives> local,
                          std::shared_ptr<Collectives> cross, int process_index);

  int size() const override;
  int local_size() const { return local_size_; }
  int process_index() const { return process_index_; }
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
  // What local rank 0 hands the other local ranks after its cross-process
  // step: the result, or the error. Two slots (by call parity) suffice, since
  // local rank 0 cannot finish call k+2's local step before every local rank
  // has read call k's outcome.
  struct Outcome {
    std::vector<Tensor> tensors;
    std::exception_ptr error;
  };

  int local_rank(int rank) const;
  uint64_t next_call(int local_rank);
  void publish(uint64_t call, Outcome outcome);
  Outcome take(uint64_t call);

  const int local_size_;
  const std::shared_ptr<Collectives> local_;
  const std::shared_ptr<Collectives> cross_;
  const int process_index_;

  Mutex mu_;
  std::vector<uint64_t> calls_ STRATA_GUARDED_BY(mu_);  // per local rank
  std::array<Outcome, 2> outcomes_ STRATA_GUARDED_BY(mu_);
};

}  // namespace strata::collective
