#include "strata/distribute/replicated_strategy.h"

#include <chrono>

#include "strata/base/errors.h"
#include "strata/collective/local_collectives.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/internal/merge_barrier.h"
#include "strata/distribute/internal/replica_threads.h"

namespace strata::distribute {

namespace {
// merge_call waits on other replicas' user code between two merge points; a
// failed replica aborts the barrier, so this deadline only catches a replica
// stuck in user code.
constexpr std::chrono::minutes kMergeTimeout{30};
}  // namespace

std::vector<std::string> device_names(const std::vector<const Device*>& devices) {
  std::vector<std::string> names;
  names.reserve(devices.size());
  for (const Device* d : devices) names.push_back(d->name());
  return names;
}

ReplicatedStrategy::ReplicatedStrategy(std::vector<const Device*> devices, int replica_id_offset,
                                       int num_replicas_in_sync,
                                       CommunicationOptions communication_options)
    : devices_(std::move(devices)),
      replica_id_offset_(replica_id_offset),
      num_replicas_in_sync_(num_replicas_in_sync),
      communication_options_(communication_options) {
  validate(communication_options_);
  STRATA_INTERNAL_CHECK(!devices_.empty() && replica_id_offset_ >= 0 &&
                        replica_id_offset_ + num_local_replicas() <= num_replicas_in_sync_);
  for (int i = 0; i < num_local_replicas(); ++i) {
    contexts_.push_back(std::make_unique<ReplicaContext>(*this, global_replica_id(i), i));
  }
  merge_barrier_ = std::make_unique<internal::MergeBarrier>(num_local_replicas(), kMergeTimeout);
  if (num_local_replicas() == num_replicas_in_sync_) {
    collectives_ = std::make_shared<collective::LocalCollectives>(
        num_local_replicas(),
        collective::CollectiveOptions{
            .timeout = std::chrono::milliseconds(collective_timeout_ms(communication_options_))});
  }
  threads_ = std::make_unique<internal::ReplicaThreads>(
      devices_,
      [this](int replica, const std::exception_ptr& error) { on_replica_failure(replica, error); });
}

ReplicatedStrategy::~ReplicatedStrategy() = default;

void ReplicatedStrategy::set_collectives(std::shared_ptr<collective::Collectives> collectives) {
  STRATA_INTERNAL_CHECK(collectives != nullptr && collectives->size() == num_replicas_in_sync_);
  collectives_ = std::move(collectives);
}

void ReplicatedStrategy::on_replica_failure(int local_replica, const std::exception_ptr&) {
  const std::string reason = str_cat("replica ", global_replica_id(local_replica), " failed");
  merge_barrier_->abort(std::make_exception_ptr(AbortedError(reason)));
  if (collectives_) {
    collectives_->abort(reason);
    collectives_need_reset_ = true;
  }
}

void ReplicatedStrategy::run_on_replicas(const std::function<void(int)>& body) {
  merge_barrier_->reset();
  // Every replica thread is idle between runs, so a group aborted by the last
  // run's failure can be made usable again (a cross-process reset is itself
  // collective, so only after a failure).
  if (collectives_ && collectives_need_reset_) {
    collectives_->reset();
    collectives_need_reset_ = false;
  }
  threads_->run_all([&](int local) {
    internal::ReplicaModeGuard guard(*contexts_[local]);
    // Layers built lazily inside `run` create their variables here.
    VariableCreatorScope creator([this](const NextVariableCreator& next, VariableArgs args) {
      Variable v = create_variable(next, std::move(args));
      internal::note_variable_created(*this, v);
      return v;
    });
    body(local);
    merge_barrier_->replica_finished(local);
  });
}

Variable ReplicatedStrategy::create_variable(const NextVariableCreator&, VariableArgs args) {
  args = internal::check_distributed_variable_args(std::move(args));
  ReplicaContext* ctx = in_cross_replica_context() ? nullptr : get_replica_context();
  if (ctx != nullptr && &ctx->strategy() == this && num_local_replicas() > 1) {
    return ctx->merge_call(
        [this](Strategy& strategy, const PerReplica<VariableArgs>& all) {
          Variable v = internal::make_distributed_variable(strategy, all.values().front());
          initialize_distributed_variable(v);
          return v;
        },
        args);
  }
  Variable v = internal::make_distributed_variable(*this, args);
  initialize_distributed_variable(v);
  return v;
}

std::vector<Tensor> ReplicatedStrategy::all_reduce_in_replica(ReplicaContext& ctx, ReduceOp op,
                                                              const std::vector<Tensor>& values) {
  if (num_replicas_in_sync_ == 1) return values;
  if (!collectives_) return Strategy::all_reduce_in_replica(ctx, op, values);
  const collective::ReduceOp cop = to_collective(op);
  const int rank = ctx.replica_id_in_sync_group();
  {
    // Under a step profile the barrier's time is this replica's wait for the
    // slowest peer; what follows, every peer present, is the transfer.
    const ScopedStepPhase wait(StepPhase::kCollectiveWait);
    if (wait.active()) collectives_->barrier(rank);
  }
  ScopedStepPhase transfer(StepPhase::kCollectiveTransfer);
  const int64_t pack_limit = communication_options_.bytes_per_pack;
  if (pack_limit == 0) return collectives_->all_reduce(rank, values, cop);
  std::vector<Tensor> out;
  out.reserve(values.size());
  size_t begin = 0;
  while (begin < values.size()) {
    size_t end = begin;
    int64_t bytes = 0;
    // Greedy packs in order; every replica computes the same split from the same shapes.
    while (end < values.size() &&
           (end == begin || bytes + int64_t(values[end].size_bytes()) <= pack_limit)) {
      bytes += int64_t(values[end].size_bytes());
      ++end;
    }
    std::vector<Tensor> pack(values.begin() + begin, values.begin() + end);
    for (Tensor& t : collectives_->all_reduce(rank, pack, cop)) out.push_back(std::move(t));
    begin = end;
  }
  return out;
}

std::shared_ptr<void> ReplicatedStrategy::merge_replicas(int local_replica, const void* payload,
                                                         const MergeFn& merge) {
  return merge_barrier_->arrive(local_replica, payload, merge);
}

}  // namespace strata::distribute
