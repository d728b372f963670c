#pragma once
// Collectives: the communication primitives replicas use to combine values
// (ARCHITECTURE.md "Collectives", STYLE §10). A Collectives object is one group
// of `size()` participants ("ranks"); every rank issues the same collectives in
// the same order, and each call returns once all ranks have taken part.
//
//   auto group = std::make_shared<strata::collective::LocalCollectives>(2);
//   // on replica thread r (r = 0, 1):
//   Tensor g = group->all_reduce(r, grad, ReduceOp::SUM);        // Σ over ranks
//   std::vector<Tensor> gs = group->all_reduce(r, {w_grad, b_grad}, ReduceOp::MEAN);
//   Tensor all = group->all_gather(r, batch_part);               // concat along axis 0
//   Tensor v = group->broadcast(r, initial_value, /*root=*/0);   // rank 0's value
//   group->barrier(r);
//   // when a replica fails, its strategy wakes everybody else:
//   group->abort("replica 1 failed: ...");                       // waiters throw AbortedError
//
// Implementations: LocalCollectives (replica threads of one process, shared
// memory), GlooCollectives (one rank per process over TCP), ShmCollectives
// (one rank per process of one host, a shared-memory segment),
// HostHierarchicalCollectives (one rank per process on several hosts: shared
// memory within each host, Gloo across one leader per host) and
// HierarchicalCollectives (local ranks of every process, composed from a local
// group and a cross-process one).
//
// Semantics shared by every implementation:
//   * Reductions support float32, float64, int32 and int64 (as TF's collective
//     ops); all_gather and broadcast any numeric dtype. MEAN is the SUM divided
//     by size(); for integers the division truncates toward zero, as TF's
//     collective `final_op = "Div"` (the integer Div kernel is TruncateDiv).
//     Integer SUM wraps around on overflow (two's complement). MAX/MIN of a NaN
//     are unspecified (as std::max).
//   * Results are new immutable tensors: they never alias an input, so callers
//     may keep both. Ranks of one process may share one result buffer.
//   * Results are placed on the device of the caller's input (on_device).
//
// Errors (every rank of a failed call throws, nobody hangs):
//   * InvalidArgumentError: a rank outside [0, size()) (thrown to that caller
//     only), or ranks that disagree at the same call — a different collective,
//     op, root, dtype or shape; the message describes both sides, e.g.
//     "LocalCollectives: mismatched collectives at call #3: rank 0 called
//     all_reduce(SUM, [float32[4]]) but rank 1 called all_reduce(SUM,
//     [float32[5]])". Such a call is refused before any data moves; the group
//     stays usable. Unsupported dtypes and shapes are refused the same way.
//     Cross-process groups (GlooCollectives) report ranks whose collective
//     schedules differ as FailedPreconditionError instead (a program error
//     across workers, as TF), on every rank, showing both sides.
//   * DeadlineExceededError: a rank waited longer than CollectiveOptions.timeout;
//     the message names the call, this rank and the ranks that never arrived.
//     A timeout breaks the group: every waiting and later call rethrows it until
//     reset().
//   * AbortedError: abort(reason) was called; waiting and later calls throw it
//     (message = reason) until reset().
//   * Transport failures of a cross-process implementation: UnavailableError.
//
// Use from a strategy (the distribute hook): the strategy holds a
// std::shared_ptr<Collectives> for its replicas (LocalCollectives for
// MirroredStrategy, HierarchicalCollectives for multi-worker); a replica thread
// that throws stores its exception and calls abort("replica 1 failed: <what>"),
// which wakes the other replicas with AbortedError; once every replica thread
// has returned, the strategy rethrows the root cause (not the AbortedErrors)
// and calls reset() before the next step.
//
// Thread-safety: thread-safe. Each rank is driven by one thread at a time
// (typically one replica thread per rank); abort() may be called from any thread
// at any time.

#include <chrono>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::collective {

// How all_reduce and reduce_scatter combine values. Spelled as tf.distribute's
// ReduceOp plus the MAX/MIN merge ops of TF's collective ops.
enum class ReduceOp { SUM, MEAN, MAX, MIN };

std::string_view reduce_op_name(ReduceOp op) noexcept;  // "SUM", "MEAN", "MAX", "MIN"
std::ostream& operator<<(std::ostream& os, ReduceOp op);

// out[i] = ins[0][i] op ins[1][i] op ... op ins[k-1][i] for i < n, in that
// order (MEAN: the SUM divided by k): the element-wise reduction every
// Collectives of this library applies, so a caller that reduces buffers it
// can reach itself (replicas that are threads of one process, the sharded
// weight update's gradients) gets the bits an all-reduce of them would.
// `dtype` is float32, float64, int32 or int64; `out` overlaps no input.
void reduce_buffers(DType dtype, ReduceOp op, void* out, std::span<const void* const> ins,
                    int64_t n);

struct CollectiveOptions {
  // Longest a rank waits inside one call for the other ranks. TF's collective
  // ops default to no timeout; Strata always bounds waits (ARCHITECTURE.md).
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
};

class Collectives {
 public:
  virtual ~Collectives() = default;

  // Number of ranks in the group.
  virtual int size() const = 0;

  // Element-wise reduction of each tensor across ranks; every rank receives the
  // reduced list (same shapes and dtypes as its input). Tensors of a list may
  // differ in shape and dtype (they are packed per dtype); empty tensors and
  // scalars are allowed.
  virtual std::vector<Tensor> all_reduce(int rank, const std::vector<Tensor>& tensors,
                                         ReduceOp op) = 0;
  // One tensor (derived classes re-export it with `using Collectives::all_reduce`).
  Tensor all_reduce(int rank, const Tensor& tensor, ReduceOp op);

  // The inputs of all ranks concatenated along axis 0 in rank order. Dimension
  // 0 may differ per rank; the other dimensions and the dtype must agree; rank
  // >= 1 (InvalidArgumentError for scalars).
  virtual Tensor all_gather(int rank, const Tensor& tensor) = 0;

  // all_reduce, then rank r receives block r of size() equal blocks along axis
  // 0. Dimension 0 must be divisible by size() (InvalidArgumentError on every
  // rank otherwise).
  virtual Tensor reduce_scatter(int rank, const Tensor& tensor, ReduceOp op) = 0;

  // Every rank receives a copy of `root`'s tensor. The other ranks' `tensor`
  // states the expected shape and dtype (checked like any mismatch); its
  // values are ignored.
  virtual Tensor broadcast(int rank, const Tensor& tensor, int root) = 0;

  // Returns once every rank has called barrier.
  virtual void barrier(int rank) = 0;

  // Cancels the group: every rank waiting inside a collective wakes and throws
  // AbortedError(reason), and later calls throw it too. Idempotent; the first
  // reason wins. Never blocks on other ranks.
  virtual void abort(const std::string& reason) = 0;

  // Makes an aborted or timed-out group usable again. Call it once no rank is
  // inside a call (FailedPreconditionError otherwise). Implementations spanning
  // processes document whether reset() is itself collective.
  virtual void reset() = 0;
};

}  // namespace strata::collective
