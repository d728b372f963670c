#pragma once
// OpRecorder: how ops report themselves to GradientTape without depending on
// autodiff (the ops → autodiff inversion of ARCHITECTURE.md).
//
// Each thread has a stack of active recorders (the tapes alive on it). After
// an op computes its outputs it calls record_op(); if any recorder on this
// thread wants the op (one of its inputs is watched), the recorder keeps the
// attrs and the input/output values that ops.def's grad_needs column declares
// for the op.
//
//   Tensor add(const Tensor& a, const Tensor& b) {
//     Tensor out = kernels::add(a, b);
//     record_op(OpKind::Add, {a, b}, {out}, {});
//     return out;
//   }
//
// The stack is thread-local: tapes on one replica thread never see another
// thread's ops. Recorders are pushed and popped by RecorderScope (RAII).

#include <initializer_list>
#include <span>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/ops/op_attrs.h"
#include "strata/ops/op_kind.h"

namespace strata {

class OpRecorder {
 public:
  virtual ~OpRecorder() = default;
  // True if this recorder tracks tensor `t` (is watched or derived from a watched one).
  virtual bool is_tracking(const Tensor& t) const = 0;
  // Called for every op on this thread while the recorder is on the stack.
  virtual void record(OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                      const OpAttrs& attrs) = 0;
};

// True if at least one recorder is active on this thread (a cheap check ops
// make before building anything to record).
bool any_recorder_active() noexcept;

// Reports an op to every active recorder on this thread that tracks one of its
// inputs. Non-differentiable ops are not recorded.
void record_op(OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
               const OpAttrs& attrs);
inline void record_op(OpKind kind, std::initializer_list<Tensor> inputs,
                      std::initializer_list<Tensor> outputs, const OpAttrs& attrs = {}) {
  if (!any_recorder_active()) return;
  record_op(kind, std::span<const Tensor>(inputs.begin(), inputs.size()),
            std::span<const Tensor>(outputs.begin(), outputs.size()), attrs);
}

// Pushes `r` on this thread's recorder stack for the scope's lifetime.
class RecorderScope {
 public:
  explicit RecorderScope(OpRecorder& r);
  ~RecorderScope();
  RecorderScope(const RecorderScope&) = delete;
  RecorderScope& operator=(const RecorderScope&) = delete;

 private:
  OpRecorder* recorder_;
};

// Suspends recording on this thread for the scope's lifetime (used by
// gradient computation itself and by stop_gradient-like regions).
class RecordingPause {
 public:
  RecordingPause();
  ~RecordingPause();
  RecordingPause(const RecordingPause&) = delete;
  RecordingPause& operator=(const RecordingPause&) = delete;

 private:
  std::vector<OpRecorder*> saved_;
};

// The recorders active on this thread, innermost last.
std::span<OpRecorder* const> active_recorders() noexcept;

}  // namespace strata
