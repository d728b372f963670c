#include "strata/ops/recorder.h"

#include <algorithm>

#include "strata/base/errors.h"

namespace strata {

namespace {
// The thread-local tape stack (one of the documented thread-local contexts).
thread_local std::vector<OpRecorder*> t_recorders;
}  // namespace

bool any_recorder_active() noexcept { return !t_recorders.empty(); }

std::span<OpRecorder* const> active_recorders() noexcept { return t_recorders; }

void record_op(OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
               const OpAttrs& attrs) {
  if (t_recorders.empty() || !op_is_differentiable(kind)) return;
  for (OpRecorder* r : t_recorders) {
    const bool tracked = std::any_of(inputs.begin(), inputs.end(), [&](const Tensor& t) {
      return t.defined() && r->is_tracking(t);
    });
    if (tracked) r->record(kind, inputs, outputs, attrs);
  }
}

RecorderScope::RecorderScope(OpRecorder& r) : recorder_(&r) { t_recorders.push_back(&r); }

RecorderScope::~RecorderScope() {
  // Scopes nest strictly; a tape destroyed out of order is removed wherever it is.
  auto it = std::find(t_recorders.rbegin(), t_recorders.rend(), recorder_);
  if (it != t_recorders.rend()) t_recorders.erase(std::next(it).base());
}

RecordingPause::RecordingPause() : saved_(std::move(t_recorders)) { t_recorders.clear(); }
RecordingPause::~RecordingPause() { t_recorders = std::move(saved_); }

}  // namespace strata
