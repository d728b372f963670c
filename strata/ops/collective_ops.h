#pragma once
// Collectives across the replicas of the current replica context, as ops the
// gradient tape records (TensorFlow's CollectiveReduceV2 / CollectiveGatherV2
// under ReplicaContext.all_reduce / all_gather's custom gradients).
//
//   // on a replica thread of a strategy (the distribute layer installs the
//   // replicas' collectives with ReplicaCollectivesScope):
//   Tensor total = collective_all_reduce({x}, /*mean=*/false)[0];   // SUM over replicas
//   Tensor all = collective_all_gather({x}, /*axis=*/0)[0];         // concat over replicas
//
// Outside every replica context (no ReplicaCollectivesScope on the thread)
// there is one replica: all_reduce and all_gather give their input.
// Gradients (strata/autodiff/gradients.cc), as TensorFlow registers them: the
// gradient of an all-reduce is the same all-reduce of the upstream gradient;
// the gradient of an all-gather is the SUM all-reduce of the upstream gradient
// sliced to this replica's part along the axis.
//
// Thread-safety: the installed collectives are thread-local (one per replica
// thread), set and restored by the RAII scope.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "strata/core/tensor.h"

namespace strata {

// What a GradientTape tells the replica's collectives while its backward pass
// runs, so they can start reducing gradients before the pass ends (the
// distribute layer's CommunicationOptions.overlap_gradient_reduction). The
// tape calls gradient_final once per source, as soon as no later step of the
// walk can add to that source's gradient, with the very tensor gradient()
// will return for it (undefined for an unconnected source under
// UnconnectedGradients::NONE). The order is the backward walk's (the
// sources whose last use in the forward pass came last come first), the same
// on every replica that ran the same ops. A tape whose backward pass throws
// destroys its sink without reporting every source.
// Thread-safety: used by the one thread that runs the tape.
class GradientSink {
 public:
  virtual ~GradientSink() = default;
  virtual void gradient_final(size_t source, const Tensor& gradient) = 0;
};

// The replicas' collectives as ops see them; implemented by the distribute
// layer over its strategy. Every replica makes the same calls in the same order.
class ReplicaCollectives {
 public:
  virtual ~ReplicaCollectives() = default;
  // This replica's id in [0, num_replicas).
  virtual int replica_id() const = 0;
  // SUM (mean = false) or MEAN of each value across the replicas, as one batch.
  virtual std::vector<Tensor> all_reduce(bool mean, const std::vector<Tensor>& values) = 0;
  // Each value concatenated along `axis` over the replicas, in replica order
  // (sizes along `axis` may differ between replicas).
  virtual std::vector<Tensor> all_gather(const std::vector<Tensor>& values, int64_t axis) = 0;
  // A sink for the gradients of `num_sources` variables a GradientTape is
  // about to compute on this thread, or nullptr (the default): no early
  // reduction. The tape reports to it as its backward pass runs.
  virtual std::unique_ptr<GradientSink> gradient_sink(size_t num_sources) {
    (void)num_sources;
    return nullptr;
  }
};

// The collectives installed on this thread, or nullptr (one replica).
ReplicaCollectives* current_replica_collectives() noexcept;

// Installs `c` on this thread for the scope's lifetime.
class ReplicaCollectivesScope {
 public:
  explicit ReplicaCollectivesScope(ReplicaCollectives& c);
  ~ReplicaCollectivesScope();
  ReplicaCollectivesScope(const ReplicaCollectivesScope&) = delete;
  ReplicaCollectivesScope& operator=(const ReplicaCollectivesScope&) = delete;

 private:
  ReplicaCollectives* previous_;
};

// All-reduce through the installed collectives (identity without), each value
// recorded as a CollectiveReduce op.
std::vector<Tensor> collective_all_reduce(const std::vector<Tensor>& values, bool mean);
// All-gather through the installed collectives (identity without), each value
// recorded as a CollectiveGather op. InvalidArgumentError for a scalar value
// or an axis out of range.
std::vector<Tensor> collective_all_gather(const std::vector<Tensor>& values, int64_t axis);

// Records values[i] -> results[i] as the collective op, for callers that
// computed the collective themselves (ReplicaContext::all_reduce/all_gather).
void record_collective_reduce(const std::vector<Tensor>& values, const std::vector<Tensor>& results,
                              bool mean);
void record_collective_gather(const std::vector<Tensor>& values, const std::vector<Tensor>& results,
                              int64_t axis);

}  // namespace strata
