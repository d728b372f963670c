#pragma once
// OpDispatcher: how the op API hands ops on annotated tensors to the layer
// that knows what the annotation means (TPUStrategy's sharded execution),
// without the ops layer depending on it (the same inversion as OpRecorder).
//
// Every op of the normal API that has a sharding rule, or that must count a
// fallback (element-wise, reductions, matmul, reshape and layout ops,
// conv2d, pooling, softmax, the cross-entropy primitive), starts with
//
//   Tensor relu(const Tensor& x) {
//     if (auto out = internal::dispatch(OpKind::Relu, "relu", {x}, {},
//                                       [](std::span<const Tensor> in) { return relu(in[0]); }))
//       return *out;
//     ... the plain kernel ...
//   }
//
// The check costs one relaxed atomic load and a pointer test per input: the
// dispatcher is consulted only if one is installed and an input carries a
// TensorExtension (a tpu::Sharding annotation, or the shards of an earlier
// sharded result). The dispatcher either returns the op's result or nullopt
// (not its business: the plain kernel runs). It must never hand tensors that
// carry an extension back to `run`, or it would be consulted again.

#include <atomic>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>

#include "strata/core/tensor.h"
#include "strata/ops/op_attrs.h"
#include "strata/ops/op_kind.h"

namespace strata {

// One op call as the dispatcher sees it.
struct DispatchedOp {
  OpKind kind;                     // the primitive (a composite reports its own kind)
  const char* name;                // the API name ("add", "conv2d"): the fallback counter's key
  std::span<const Tensor> inputs;  // in the op's own order
  const OpAttrs& attrs;            // the op's non-tensor arguments (fields as ops.def says;
                                   // conv/pool strides, ksize, dilations as the caller gave them;
                                   // reshape: size = the requested shape, -1 included)
  // The op itself with other inputs (same attrs): what a rule runs per shard.
  const std::function<Tensor(std::span<const Tensor>)>& run;
};

// Thread-safe: dispatch() is called concurrently from any thread running ops.
class OpDispatcher {
 public:
  virtual ~OpDispatcher() = default;
  virtual std::optional<Tensor> dispatch(const DispatchedOp& op) = 0;
};

// Installs the process-wide dispatcher (nullptr removes it). The dispatcher
// must outlive every op call that may see it (install objects of static
// storage duration).
void set_op_dispatcher(OpDispatcher* dispatcher) noexcept;

namespace internal {

extern std::atomic<OpDispatcher*> g_op_dispatcher;

std::optional<Tensor> dispatch_slow(OpKind kind, const char* name, std::span<const Tensor> inputs,
                                    const OpAttrs& attrs,
                                    const std::function<Tensor(std::span<const Tensor>)>& run);

// The ops' entry check (see above).
template <typename Run>
std::optional<Tensor> dispatch(OpKind kind, const char* name, std::span<const Tensor> inputs,
                               const OpAttrs& attrs, Run&& run) {
  if (g_op_dispatcher.load(std::memory_order_relaxed) == nullptr) return std::nullopt;
  bool annotated = false;
  for (const Tensor& t : inputs) annotated = annotated || (t.defined() && t.extension() != nullptr);
  if (!annotated) return std::nullopt;
  const std::function<Tensor(std::span<const Tensor>)> fn(std::forward<Run>(run));
  return dispatch_slow(kind, name, inputs, attrs, fn);
}
template <typename Run>
std::optional<Tensor> dispatch(OpKind kind, const char* name, std::initializer_list<Tensor> inputs,
                               const OpAttrs& attrs, Run&& run) {
  return dispatch(kind, name, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs,
                  std::forward<Run>(run));
}

}  // namespace internal
}  // namespace strata
