#pragma once
// LocalCollectives: a group of `size` ranks that are threads of this process
// (one replica thread per local device), communicating through shared memory.
//
//   auto group = std::make_shared<strata::collective::LocalCollectives>(
//       4, strata::collective::CollectiveOptions{.timeout = std::chrono::seconds(30)});
//   std::vector<std::jthread> replicas;
//   for (int r = 0; r < 4; ++r) {
//     replicas.emplace_back([&, r] {
//       Tensor sum = group->all_reduce(r, local_grad[r], ReduceOp::SUM);
//     });
//   }
//
// Algorithm (ARCHITECTURE.md "Collectives", local): each rank publishes its
// inputs; the last rank to arrive checks that all calls match and allocates one
// shared output buffer per dtype; then every rank reduces ITS 1/size slice of
// the (flattened, concatenated) elements across all inputs straight into that
// buffer (reduce-scatter), and once all slices are written every rank returns
// views of the buffer (the all-gather is implicit). The work is spread over all
// rank threads and each input byte is read once, so an all-reduce runs at
// memory bandwidth. broadcast copies root's tensor in slices the same way;
// all_gather has each rank copy its own part.
//
// Synchronisation is a generation-counted barrier (two per data call): waiters
// spin briefly, then block on a condition variable with the call's deadline.
// The contract, errors and thread-safety are those of Collectives
// (collectives.h). reset() throws FailedPreconditionError while a rank is inside
// a call.

#include <memory>
#include <string>
#include <vector>

#include "strata/collective/collectives.h"

namespace strata::collective {

namespace internal {
struct LocalState;
}  // namespace internal

class LocalCollectives final : public Collectives {
 public:
  // InvalidArgumentError unless size >= 1 and options.timeout > 0.
  explicit LocalCollectives(int size, CollectiveOptions options = {});
  ~LocalCollectives() override;
  LocalCollectives(const LocalCollectives&) = delete;
  LocalCollectives& operator=(const LocalCollectives&) = delete;

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

 private:
  std::unique_ptr<internal::LocalState> state_;
};

}  // namespace strata::collective
