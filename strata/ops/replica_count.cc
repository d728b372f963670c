#include "strata/ops/replica_count.h"

namespace strata {
namespace {
thread_local int t_num_replicas = 1;
}  // namespace

int current_num_replicas_in_sync() noexcept { return t_num_replicas; }

NumReplicasInSyncScope::NumReplicasInSyncScope(int n) : previous_(t_num_replicas) {
  t_num_replicas = n;
}
NumReplicasInSyncScope::~NumReplicasInSyncScope() { t_num_replicas = previous_; }

}  // namespace strata
