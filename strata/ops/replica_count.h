#pragma once
// The number of replicas in sync of the current replica context, as seen by
// ops (nn::compute_average_loss). The distribute layer (above ops) sets it on
// each replica thread with NumReplicasInSyncScope; it is 1 outside any
// strategy. Thread-local, set and restored by the RAII scope.

namespace strata {

int current_num_replicas_in_sync() noexcept;

class NumReplicasInSyncScope {
 public:
  explicit NumReplicasInSyncScope(int n);
  ~NumReplicasInSyncScope();
  NumReplicasInSyncScope(const NumReplicasInSyncScope&) = delete;
  NumReplicasInSyncScope& operator=(const NumReplicasInSyncScope&) = delete;

 private:
  int previous_;
};

}  // namespace strata
