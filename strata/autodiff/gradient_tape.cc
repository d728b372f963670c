#include "strata/autodiff/gradient_tape.h"

#include <algorithm>
#include <utility>

#include "strata/base/errors.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/collective_ops.h"
#include "strata/ops/math_ops.h"

namespace strata {

namespace {

// Stops `self` recording while every other tape on this thread keeps
// recording: the backward pass of an inner tape is recorded by outer tapes
// (higher-order gradients) but never by the tape itself.
class PauseOnly {
 public:
  explicit PauseOnly(const OpRecorder* self) {
    PooledVector<OpRecorder*> others;
    for (OpRecorder* r : active_recorders()) {
      if (r != self) others.push_back(r);
    }
    pause_.emplace();
    for (OpRecorder* r : others) scopes_.push_back(std::make_unique<RecorderScope>(*r));
  }
  ~PauseOnly() {
    while (!scopes_.empty()) scopes_.pop_back();
    pause_.reset();
  }

 private:
  std::optional<RecordingPause> pause_;
  std::vector<std::unique_ptr<RecorderScope>> scopes_;
};

Tensor sum_all(const PooledVector<Tensor>& grads) {
  if (grads.size() == 1) return grads[0];
  return add_n(std::vector<Tensor>(grads.begin(), grads.end()));
}

}  // namespace

namespace autodiff {

OpRecord::OpRecord(OpKind op_kind, const OpAttrs& op_attrs, std::span<const Tensor> inputs,
                   std::span<const Tensor> outputs)
    : kind(op_kind), attrs(op_attrs) {
  in.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    in.push_back(t.defined() ? TensorRecord{t.shape(), t.dtype(), t.id()} : TensorRecord{});
  }
  out.reserve(outputs.size());
  for (const Tensor& t : outputs) out.push_back({t.shape(), t.dtype(), t.id()});
  if (op_gradient_needs_inputs(kind)) in_values_.assign(inputs.begin(), inputs.end());
  if (op_gradient_needs_outputs(kind)) out_values_.assign(outputs.begin(), outputs.end());
}

const Tensor& OpRecord::input(size_t k) const {
  STRATA_INTERNAL_CHECK(op_gradient_needs_inputs(kind), "the gradient of ", op_name(kind),
                        " reads input ", k, ", but ops.def declares grad_needs ",
                        op_gradient_needs_outputs(kind) ? "Outputs" : "None",
                        ": declare Inputs or Both there");
  STRATA_INTERNAL_CHECK(k < in_values_.size(), "the gradient of ", op_name(kind), " reads input ",
                        k, " of ", in_values_.size());
  return in_values_[k];
}

const Tensor& OpRecord::output(size_t k) const {
  STRATA_INTERNAL_CHECK(op_gradient_needs_outputs(kind), "the gradient of ", op_name(kind),
                        " reads output ", k, ", but ops.def declares grad_needs ",
                        op_gradient_needs_inputs(kind) ? "Inputs" : "None",
                        ": declare Outputs or Both there");
  STRATA_INTERNAL_CHECK(k < out_values_.size(), "the gradient of ", op_name(kind), " reads output ",
                        k, " of ", out_values_.size());
  return out_values_[k];
}

}  // namespace autodiff

GradientTape::GradientTape(GradientTapeOptions options) : options_(options) {
  recorder_scope_.emplace(*this);
  observer_scope_.emplace(*this);
}

GradientTape::~GradientTape() {
  observer_scope_.reset();
  recorder_scope_.reset();
}

void GradientTape::watch(const Tensor& t) {
  STRATA_CHECK_ARG(t.defined(), "GradientTape.watch: expected a tensor, got an empty handle");
  // TF warns and does not watch non-floating tensors; they never get a gradient.
  if (!is_floating(t.dtype()) || !recording()) return;
  tracked_.insert(t.id());
}

void GradientTape::watch(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) watch(t);
}

void GradientTape::watch(const Variable& v) {
  STRATA_CHECK_ARG(v.defined(), "GradientTape.watch: expected a variable, got an empty handle");
  explicitly_watched_.insert(v.impl_ptr().get());
  if (!variable_index_.contains(v.impl_ptr().get())) {
    variable_index_.emplace(v.impl_ptr().get(), variables_.size());
    variables_.push_back({v, {}});
  }
}

std::vector<Variable> GradientTape::watched_variables() const {
  std::vector<Variable> out;
  for (const auto& w : variables_) out.push_back(w.variable);
  return out;
}

void GradientTape::variable_accessed(const Variable& v, const Tensor& value) {
  if (!recording() || !is_floating(value.dtype())) return;
  const VariableImpl* key = v.impl_ptr().get();
  const bool watch_it =
      explicitly_watched_.contains(key) || (options_.watch_accessed_variables && v.trainable());
  if (!watch_it) return;
  auto it = variable_index_.find(key);
  if (it == variable_index_.end()) {
    it = variable_index_.emplace(key, variables_.size()).first;
    variables_.push_back({v, {}});
  }
  variables_[it->second].read_ids.push_back(value.id());
  tracked_.insert(value.id());
}

bool GradientTape::is_tracking(const Tensor& t) const {
  return recording() && tracked_.contains(t.id());
}

void GradientTape::record(OpKind kind, std::span<const Tensor> inputs,
                          std::span<const Tensor> outputs, const OpAttrs& attrs) {
  if (!recording()) return;
  // Integer and bool results carry no gradient: an op without a floating
  // output is not recorded and its outputs are not tracked.
  bool any_float_output = false;
  for (const Tensor& t : outputs) any_float_output = any_float_output || is_floating(t.dtype());
  if (!any_float_output) return;
  autodiff::OpRecord rec(kind, attrs, inputs, outputs);
  for (const Tensor& t : outputs) {
    if (is_floating(t.dtype())) tracked_.insert(t.id());
  }
  records_.push_back(std::move(rec));
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                           const GradientOptions& options) {
  PooledVector<Source> srcs;
  for (const Tensor& s : sources) {
    STRATA_CHECK_ARG(s.defined(),
                     "GradientTape.gradient: expected defined source tensors, got an empty handle");
    srcs.push_back({{s.id()}, s.shape(), s.dtype()});
  }
  return compute(target, srcs, options, nullptr);
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target,
                                           const std::vector<Variable>& sources,
                                           const GradientOptions& options) {
  PooledVector<Source> srcs;
  for (const Variable& v : sources) {
    STRATA_CHECK_ARG(
        v.defined(),
        "GradientTape.gradient: expected defined source variables, got an empty handle");
    Source s{{}, v.shape(), v.dtype()};
    auto it = variable_index_.find(v.impl_ptr().get());
    if (it != variable_index_.end()) s.ids = variables_[it->second].read_ids;
    srcs.push_back(std::move(s));
  }
  // Gradients of variables on a replica thread: the replica's collectives
  // may start reducing each one as soon as it is final.
  std::unique_ptr<GradientSink> sink;
  if (ReplicaCollectives* collectives = current_replica_collectives()) {
    sink = collectives->gradient_sink(srcs.size());
  }
  return compute(target, srcs, options, sink.get());
}

Tensor GradientTape::gradient(const Tensor& target, const Tensor& source,
                              const GradientOptions& options) {
  return gradient(target, std::vector<Tensor>{source}, options)[0];
}

Tensor GradientTape::gradient(const Tensor& target, const Variable& source,
                              const GradientOptions& options) {
  return gradient(target, std::vector<Variable>{source}, options)[0];
}

std::vector<Tensor> GradientTape::compute(const Tensor& target, const PooledVector<Source>& sources,
                                          const GradientOptions& options, GradientSink* sink) {
  STRATA_CHECK(
      FAILED_PRECONDITION, !used_,
      "GradientTape.gradient: A non-persistent GradientTape can only be used to compute one "
      "set of gradients (or jacobians); expected a persistent tape "
      "(GradientTapeOptions.persistent = true), got a second call");
  STRATA_CHECK_ARG(target.defined(),
                   "GradientTape.gradient: expected a target tensor, got an empty handle");
  if (options.output_gradients.defined()) {
    STRATA_CHECK_ARG(options.output_gradients.shape() == target.shape(),
                     "GradientTape.gradient: expected output_gradients of the target's shape ",
                     target.shape(), ", got shape ", options.output_gradients.shape());
  }
  if (!options_.persistent) used_ = true;

  // Ops that depend on a source (forward pass over the records, which are in
  // execution order and therefore topologically sorted), and the first op
  // that reads each source id: once the backward walk has passed it, nothing
  // adds to that id's gradient any more.
  autodiff::PooledSet<uint64_t> source_ids;
  for (const Source& s : sources) source_ids.insert(s.ids.begin(), s.ids.end());
  autodiff::PooledSet<uint64_t> depends(source_ids);
  autodiff::PooledMap<uint64_t, size_t> first_use;
  PooledVector<bool> relevant(records_.size(), false);
  for (size_t i = 0; i < records_.size(); ++i) {
    const auto& r = records_[i];
    for (const autodiff::TensorRecord& t : r.in) {
      if (!depends.contains(t.id)) continue;
      relevant[i] = true;
      if (source_ids.contains(t.id)) first_use.try_emplace(t.id, i);
    }
    if (relevant[i]) {
      for (const auto& t : r.out) depends.insert(t.id);
    }
  }
  // finish[s]: the record after whose backward step source s's gradient is
  // final (records_.size(): before the walk, no op reads it). The sources in
  // the order they become final; ties in source order.
  PooledVector<size_t> finish(sources.size(), records_.size());
  for (size_t s = 0; s < sources.size(); ++s) {
    for (uint64_t id : sources[s].ids) {
      auto it = first_use.find(id);
      if (it != first_use.end()) finish[s] = std::min(finish[s], it->second);
    }
  }
  PooledVector<size_t> order(sources.size());
  for (size_t s = 0; s < order.size(); ++s) order[s] = s;
  // (std::sort with the tie broken by index: stable_sort would take a heap buffer.)
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return finish[a] != finish[b] ? finish[a] > finish[b] : a < b;
  });

  autodiff::PooledMap<uint64_t, PooledVector<Tensor>> pending;
  std::vector<Tensor> results(sources.size());
  {
    PauseOnly pause(this);
    if (is_floating(target.dtype())) {
      pending[target.id()].push_back(options.output_gradients.defined() ? options.output_gradients
                                                                        : ones_like(target));
    }
    autodiff::PooledMap<uint64_t, Tensor> final_grads;  // summed gradients of source ids
    // The summed gradient of `id`; a source id stays pending (as its sum)
    // for the op that produced it, if any, to propagate further.
    auto sum_pending = [&](uint64_t id) -> Tensor {
      auto it = pending.find(id);
      if (it == pending.end()) return Tensor();
      Tensor g = sum_all(it->second);
      it->second.assign(1, g);
      if (source_ids.contains(id)) final_grads[id] = g;
      return g;
    };
    auto take = [&](uint64_t id) -> Tensor {
      Tensor g = sum_pending(id);
      pending.erase(id);
      return g;
    };
    size_t next_final = 0;
    // Computes the result of every source not yet done whose last
    // contribution came from a record after `index` (-1: every source) and
    // hands it to the sink.
    auto finish_after = [&](int64_t index) {
      for (; next_final < order.size() && static_cast<int64_t>(finish[order[next_final]]) > index;
           ++next_final) {
        const size_t s = order[next_final];
        PooledVector<Tensor> parts;
        for (uint64_t id : sources[s].ids) {
          auto it = final_grads.find(id);
          Tensor g = it != final_grads.end() ? it->second : sum_pending(id);
          if (g.defined()) parts.push_back(g);
        }
        if (!parts.empty() && is_floating(sources[s].dtype)) {
          results[s] = sum_all(parts);
        } else if (options.unconnected_gradients == UnconnectedGradients::ZERO) {
          results[s] = zeros(sources[s].shape, sources[s].dtype);
        }
        if (sink != nullptr) sink->gradient_final(s, results[s]);
      }
    };
    for (size_t i = records_.size(); i-- > 0;) {
      finish_after(static_cast<int64_t>(i));
      if (!relevant[i]) continue;
      const auto& r = records_[i];
      PooledVector<Tensor> out_grads;
      bool any = false;
      for (const auto& t : r.out) {
        out_grads.push_back(take(t.id));
        any = any || out_grads.back().defined();
      }
      if (!any) continue;
      for (size_t k = 0; k < out_grads.size(); ++k) {
        if (!out_grads[k].defined()) out_grads[k] = zeros(r.out[k].shape, r.out[k].dtype);
      }
      PooledVector<bool> needed(r.in.size());
      for (size_t k = 0; k < r.in.size(); ++k) {
        needed[k] = depends.contains(r.in[k].id) && is_floating(r.in[k].dtype);
      }
      PooledVector<Tensor> in_grads = autodiff::op_gradient(r, out_grads, needed);
      STRATA_INTERNAL_CHECK(in_grads.size() == r.in.size(), "gradient of ", op_name(r.kind),
                            " returned ", in_grads.size(), " gradients for ", r.in.size(),
                            " inputs");
      for (size_t k = 0; k < in_grads.size(); ++k) {
        if (in_grads[k].defined() && depends.contains(r.in[k].id) && is_floating(r.in[k].dtype)) {
          pending[r.in[k].id].push_back(in_grads[k]);
        }
      }
    }
    finish_after(-1);  // the sources the first record reads
  }
  if (!options_.persistent) {
    // Release everything the backward pass held.
    records_.clear();
    records_.shrink_to_fit();
    tracked_.clear();
    variables_.clear();
    variable_index_.clear();
  }
  return results;
}

}  // namespace strata
