#include "strata/distribute/replicated_strategy.h"

#include <chrono>

#include "strata/base/errors.h"
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
  for (const Device* d : devices) names.push_back(d->name());
  return names;
}

ReplicatedStrategy::ReplicatedStrategy(std::vector<const Device*> devices, int replica_id_offset,
                                       int num_replicas_in_sync)
    : devices_(std::move(devices)),
      replica_id_offset_(replica_id_offset),
      num_replicas_in_sync_(num_replicas_in_sync) {
  STRATA_INTERNAL_CHECK(!devices_.empty() && replica_id_offset_ >= 0 &&
                        replica_id_offset_ + num_local_replicas() <= num_replicas_in_sync_);
  for (int i = 0; i < num_local_replicas(); ++i) {
    contexts_.push_back(std::make_unique<ReplicaContext>(*this, global_replica_id(i), i));
  }
  merge_barrier_ = std::make_unique<internal::MergeBarrier>(num_local_replicas(), kMergeTimeout);
  threads_ = std::make_unique<internal::ReplicaThreads>(
      devices_, [this](int replica, std::exception_ptr error) { on_replica_failure(replica, error); });
}

ReplicatedStrategy::~ReplicatedStrategy() = default;

void ReplicatedStrategy::on_replica_failure(int local_replica, const std::exception_ptr&) {
  merge_barrier_->abort(
      std::make_exception_ptr(AbortedError(str_cat("replica ", global_replica_id(local_replica), " failed"))));
}

void ReplicatedStrategy::run_on_replicas(const std::function<void(int)>& body) {
  merge_barrier_->reset();
  threads_->run_all([&](int local) {
    internal::ReplicaModeGuard guard(*contexts_[local]);
    // Layers built lazily inside `run` create their variables here.
    VariableCreatorScope creator([this](const NextVariableCreator& next, VariableArgs args) {
      return create_variable(next, std::move(args));
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
        [](Strategy& strategy, const PerReplica<VariableArgs>& all) {
          return internal::make_distributed_variable(strategy, all.values().front());
        },
        args);
  }
  return internal::make_distributed_variable(*this, std::move(args));
}

std::shared_ptr<void> ReplicatedStrategy::merge_replicas(int local_replica, const void* payload,
                                                         const MergeFn& merge) {
  return merge_barrier_->arrive(local_replica, payload, merge);
}

}  // namespace strata::distribute
