#include "strata/collective/hierarchical_collectives.h"

#include <cstring>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/collective/internal/reduce.h"
#include "strata/core/device.h"

namespace strata::collective {

namespace {

constexpr const char* kWho = "HierarchicalCollectives";

// t / divisor as a new tensor (t itself is immutable).
Tensor divided(const Tensor& t, int64_t divisor) {
  Tensor out = Tensor::allocate(t.dtype(), t.shape(), &t.placement());
  if (t.size_bytes() > 0) std::memcpy(out.mutable_raw_data(), t.raw_data(), t.size_bytes());
  internal::divide_in_place(t.dtype(), out.mutable_raw_data(), t.num_elements(), divisor);
  return out;
}

}  // namespace

HierarchicalCollectives::HierarchicalCollectives(int local_size, std::shared_ptr<Collectives> local,
                                                 std::shared_ptr<Collectives> cross,
                                                 int process_index)
    : local_size_(local_size),
      local_(std::move(local)),
      cross_(std::move(cross)),
      process_index_(process_index) {
  STRATA_CHECK_ARG(local_ != nullptr && cross_ != nullptr, kWho,
                   ": expected a local and a cross-process group, got nullptr");
  STRATA_CHECK_ARG(local_size_ >= 1 && local_->size() == local_size_, kWho,
                   ": expected a local group of local_size ", local_size_, " ranks, got ",
                   local_->size());
  STRATA_CHECK_ARG(process_index_ >= 0 && process_index_ < cross_->size(), kWho,
                   ": expected process_index in [0, ", cross_->size(), "), got ", process_index_);
  calls_.assign(local_size_, 0);
}

int HierarchicalCollectives::size() const { return local_size_ * cross_->size(); }

int HierarchicalCollectives::local_rank(int rank) const {
  const int first = process_index_ * local_size_;
  STRATA_CHECK_ARG(rank >= first && rank < first + local_size_, kWho, ": process ", process_index_,
                   " holds ranks [", first, ", ", first + local_size_, "), got rank ", rank);
  return rank - first;
}

uint64_t HierarchicalCollectives::next_call(int lr) {
  MutexLock lock(mu_);
  return calls_[lr]++;
}

void HierarchicalCollectives::publish(uint64_t call, Outcome outcome) {
  MutexLock lock(mu_);
  outcomes_[call % 2] = std::move(outcome);
}

HierarchicalCollectives::Outcome HierarchicalCollectives::take(uint64_t call) {
  MutexLock lock(mu_);
  return outcomes_[call % 2];
}

std::vector<Tensor> HierarchicalCollectives::all_reduce(int rank,
                                                        const std::vector<Tensor>& tensors,
                                                        ReduceOp op) {
  const int lr = local_rank(rank);
  // One replica per process: the cross-process group is the whole group (no
  // local copy, no local barrier, MEAN divided by the cross group itself).
  if (local_size_ == 1) return cross_->all_reduce(process_index_, tensors, op);
  const uint64_t call = next_call(lr);
  const ReduceOp inner = op == ReduceOp::MEAN ? ReduceOp::SUM : op;
  std::vector<Tensor> partial = local_->all_reduce(lr, tensors, inner);
  if (lr == 0) {
    Outcome outcome;
    try {
      outcome.tensors = cross_->all_reduce(process_index_, partial, inner);
      if (op == ReduceOp::MEAN) {
        for (Tensor& t : outcome.tensors) t = divided(t, size());
      }
    } catch (...) {
      outcome.error = std::current_exception();
    }
    publish(call, outcome);
    local_->barrier(lr);
    rethrow_if(outcome.error);
    return outcome.tensors;
  }
  local_->barrier(lr);
  Outcome outcome = take(call);
  rethrow_if(outcome.error);
  std::vector<Tensor> out;
  out.reserve(outcome.tensors.size());
  for (size_t i = 0; i < outcome.tensors.size(); ++i) {
    out.push_back(outcome.tensors[i].on_device(tensors[i].placement()));
  }
  return out;
}

Tensor HierarchicalCollectives::all_gather(int rank, const Tensor& tensor) {
  const int lr = local_rank(rank);
  if (local_size_ == 1) return cross_->all_gather(process_index_, tensor);
  const uint64_t call = next_call(lr);
  Tensor block = local_->all_gather(lr, tensor);
  if (lr == 0) {
    Outcome outcome;
    try {
      outcome.tensors = {cross_->all_gather(process_index_, block)};
    } catch (...) {
      outcome.error = std::current_exception();
    }
    publish(call, outcome);
    local_->barrier(lr);
    rethrow_if(outcome.error);
    return outcome.tensors[0];
  }
  local_->barrier(lr);
  Outcome outcome = take(call);
  rethrow_if(outcome.error);
  return outcome.tensors[0].on_device(tensor.placement());
}

Tensor HierarchicalCollectives::reduce_scatter(int rank, const Tensor& tensor, ReduceOp op) {
  return internal::block_of_rank(all_reduce(rank, tensor, op), rank, size(), kWho);
}

Tensor HierarchicalCollectives::broadcast(int rank, const Tensor& tensor, int root) {
  const int lr = local_rank(rank);
  STRATA_CHECK_ARG(root >= 0 && root < size(), kWho, ": broadcast: expected root in [0, ", size(),
                   "), got ", root);
  if (local_size_ == 1) return cross_->broadcast(process_index_, tensor, root);
  const uint64_t call = next_call(lr);
  const int root_process = root / local_size_;
  if (process_index_ == root_process) {
    // Within the root's process first; then local rank 0 serves the others.
    Tensor x = local_->broadcast(lr, tensor, root % local_size_);
    if (lr == 0) {
      Outcome outcome;
      try {
        cross_->broadcast(process_index_, x, root_process);
      } catch (...) {
        outcome.error = std::current_exception();
      }
      publish(call, outcome);
      local_->barrier(lr);
      rethrow_if(outcome.error);
      return x;
    }
    local_->barrier(lr);
    rethrow_if(take(call).error);
    return x;
  }
  Outcome outcome;
  if (lr == 0) {
    try {
      outcome.tensors = {cross_->broadcast(process_index_, tensor, root_process)};
    } catch (...) {
      outcome.error = std::current_exception();
    }
    publish(call, outcome);
  }
  // The local broadcast also checks every local rank's shape and dtype against
  // local rank 0's. After a cross failure local rank 0 still takes part (with
  // its own tensor) so that nobody waits; the result is then discarded.
  const bool have = lr == 0 && !outcome.error;
  Tensor y = local_->broadcast(lr, have ? outcome.tensors[0] : tensor, 0);
  if (lr != 0) outcome = take(call);
  rethrow_if(outcome.error);
  return y;
}

void HierarchicalCollectives::barrier(int rank) {
  const int lr = local_rank(rank);
  if (local_size_ == 1) return cross_->barrier(process_index_);
  const uint64_t call = next_call(lr);
  local_->barrier(lr);
  if (lr == 0) {
    Outcome outcome;
    try {
      cross_->barrier(process_index_);
    } catch (...) {
      outcome.error = std::current_exception();
    }
    publish(call, outcome);
    local_->barrier(lr);
    rethrow_if(outcome.error);
    return;
  }
  local_->barrier(lr);
  rethrow_if(take(call).error);
}

void HierarchicalCollectives::abort(const std::string& reason) {
  local_->abort(reason);
  cross_->abort(reason);
}

void HierarchicalCollectives::reset() {
  local_->reset();
  cross_->reset();
  MutexLock lock(mu_);
  calls_.assign(local_size_, 0);
  outcomes_ = {};
}

}  // namespace strata::collective
