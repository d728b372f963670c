#pragma once
// GradientTape: reverse-mode automatic differentiation of eager ops
// (tf.GradientTape).
//
//   strata::Variable w(strata::constant({1.f, 2.f}), {.name = "w"});
//   strata::Tensor x = strata::constant(3.f);
//   strata::GradientTape tape;                 // records this thread's ops while alive
//   tape.watch(x);                             // trainable variables are watched on read
//   strata::Tensor loss = strata::reduce_sum(strata::square(w.value() * x));
//   std::vector<strata::Tensor> g = tape.gradient(loss, std::vector<strata::Variable>{w});
//   // g[0] == 2 * w * x^2 == [18, 36]
//   strata::Tensor dx = ...;  // a second gradient() needs {.persistent = true}
//
// Recording: while alive, a tape is on its thread's recorder stack
// (strata/ops/recorder.h) and on its variable-access observers
// (strata/core/variable.h). It records every differentiable op one of whose
// inputs it tracks (a watched tensor, a watched variable read, or an output of
// a recorded op). Tapes are thread-local: a tape never sees another thread's
// ops, and must be created and destroyed on the same thread. Only floating
// tensors are tracked (integer and bool values get no gradient, as in TF).
//
// The backward pass walks the recorded ops in reverse order, keeping only ops
// on a path from a source to the target, and sums the gradients that reach a
// tensor (add_n). It runs with this tape paused but every other active tape
// still recording, so an outer tape records the gradient computation of an
// inner one (higher-order gradients).
//
// Early reduction: gradient() of variables on a replica thread whose
// collectives ask for it (ReplicaCollectives::gradient_sink, installed by a
// strategy that overlaps the gradients' all-reduce with the backward pass)
// reports each variable's gradient the moment it is final, with the tensor
// gradient() then returns; the results themselves do not change.
//
// Memory: a record keeps only the tensors ops.def declares its gradient needs
// (Add keeps only shapes, Exp keeps its output, MatMul its inputs); a
// non-persistent tape drops all records after gradient(). The records and the
// backward pass's containers take their blocks from the buffer cache
// (PoolAllocator, strata/core/allocator.h): a training step records the same
// ops every step, so from the second step on they reuse the blocks of the one
// before instead of calling into the C heap.
//
// Thread-safety: one thread at a time (the thread that created it).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "strata/core/allocator.h"
#include "strata/core/tensor.h"
#include "strata/core/variable.h"
#include "strata/ops/op_attrs.h"
#include "strata/ops/op_kind.h"
#include "strata/ops/recorder.h"

namespace strata {

class GradientSink;

// tf.UnconnectedGradients: what gradient() returns for a source the target
// does not depend on: an empty Tensor handle (NONE, TF's None) or zeros.
enum class UnconnectedGradients { NONE, ZERO };

struct GradientTapeOptions {
  bool persistent = false;               // TF's default
  bool watch_accessed_variables = true;  // TF's default
};

struct GradientOptions {
  // The upstream gradient of the target (same shape); undefined = ones.
  Tensor output_gradients = {};
  UnconnectedGradients unconnected_gradients = UnconnectedGradients::NONE;
};

namespace autodiff {
// Hash containers whose nodes and buckets live in PoolAllocator blocks.
template <typename K>
using PooledSet = std::unordered_set<K, std::hash<K>, std::equal_to<K>, PoolAllocator<K>>;
template <typename K, typename V>
using PooledMap =
    std::unordered_map<K, V, std::hash<K>, std::equal_to<K>, PoolAllocator<std::pair<const K, V>>>;

// Shape, dtype and id of one input or output of a recorded op: always kept.
struct TensorRecord {
  TensorShape shape = {};
  DType dtype = DType::float32;
  uint64_t id = 0;  // 0 for an undefined input
};

// One recorded op: what its gradient function may use. The metadata of every
// input and output is kept; their values only as ops.def's grad_needs column
// declares for `kind` (so a tape holds no tensor its gradients never read),
// and input()/output() are the only way to them.
// The tape never modifies a record after constructing it.
class OpRecord {
 public:
  OpRecord(OpKind kind, const OpAttrs& attrs, std::span<const Tensor> inputs,
           std::span<const Tensor> outputs);

  // The value of input / output k. Throws InternalError naming the op when
  // ops.def does not declare that its gradient needs inputs / outputs (a
  // gradient reading it would be a bug, never a silently wrong result), or
  // when k is out of range.
  const Tensor& input(size_t k) const;
  const Tensor& output(size_t k) const;

  OpKind kind;
  OpAttrs attrs;
  PooledVector<TensorRecord> in;
  PooledVector<TensorRecord> out;

 private:
  PooledVector<Tensor> in_values_;   // empty unless op_gradient_needs_inputs(kind)
  PooledVector<Tensor> out_values_;  // empty unless op_gradient_needs_outputs(kind)
};
}  // namespace autodiff

class GradientTape final : public OpRecorder, public VariableAccessObserver {
 public:
  explicit GradientTape(GradientTapeOptions options = {});
  ~GradientTape() override;
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  // Tracks `t` (floating dtypes only; others are ignored, as TF warns and skips).
  void watch(const Tensor& t);
  void watch(const std::vector<Tensor>& ts);
  // Tracks every later read of `v` (also when not trainable or when
  // watch_accessed_variables is false).
  void watch(const Variable& v);
  // The variables this tape has seen read and watched, in first-read order.
  std::vector<Variable> watched_variables() const;

  // d(sum of target's elements)/d(source) for each source, with the options'
  // upstream gradient and unconnected policy. A non-persistent tape allows one
  // call; a second raises FailedPreconditionError.
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               const GradientOptions& options = {});
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Variable>& sources,
                               const GradientOptions& options = {});
  Tensor gradient(const Tensor& target, const Tensor& source, const GradientOptions& options = {});
  Tensor gradient(const Tensor& target, const Variable& source,
                  const GradientOptions& options = {});

  // Number of ops recorded so far (diagnostics, tests).
  size_t num_recorded_ops() const noexcept { return records_.size(); }

  // OpRecorder:
  bool is_tracking(const Tensor& t) const override;
  void record(OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
              const OpAttrs& attrs) override;
  // VariableAccessObserver:
  void variable_accessed(const Variable& variable, const Tensor& value) override;

 private:
  struct Source {
    PooledVector<uint64_t> ids;  // one tensor id, or every read of a variable
    TensorShape shape;
    DType dtype;
  };
  // The backward pass; tells `sink` (when not null) each source's result as
  // soon as it is final (strata/ops/collective_ops.h).
  std::vector<Tensor> compute(const Tensor& target, const PooledVector<Source>& sources,
                              const GradientOptions& options, GradientSink* sink);
  bool recording() const noexcept { return !used_; }

  GradientTapeOptions options_;
  bool used_ = false;  // a non-persistent tape after gradient()
  autodiff::PooledSet<uint64_t> tracked_;
  PooledVector<autodiff::OpRecord> records_;
  struct WatchedVariable {
    Variable variable;
    PooledVector<uint64_t> read_ids;
  };
  PooledVector<WatchedVariable> variables_;
  autodiff::PooledMap<const VariableImpl*, size_t> variable_index_;
  autodiff::PooledSet<const VariableImpl*> explicitly_watched_;
  std::optional<RecorderScope> recorder_scope_;
  std::optional<VariableAccessObserverScope> observer_scope_;
};

namespace autodiff {
// The gradients of one recorded op's inputs given its outputs' gradients
// (strata/autodiff/gradients.cc: one switch over every OpKind). An undefined
// entry means "no gradient" for that input. `needed[k]` false (when given)
// says the caller discards input k's gradient, so an op whose input
// gradients are separate kernels (Conv2D's two backprops) may skip it, as
// TF's eager gradient functions do with skip_input_indices.
PooledVector<Tensor> op_gradient(const OpRecord& op, const PooledVector<Tensor>& output_grads,
                                 const PooledVector<bool>& needed = {});
}  // namespace autodiff

}  // namespace strata
