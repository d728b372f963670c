#include "strata/ops/dispatch.h"

namespace strata {

namespace internal {

std::atomic<OpDispatcher*> g_op_dispatcher{nullptr};

std::optional<Tensor> dispatch_slow(OpKind kind, const char* name, std::span<const Tensor> inputs,
                                    const OpAttrs& attrs,
                                    const std::function<Tensor(std::span<const Tensor>)>& run) {
  OpDispatcher* d = g_op_dispatcher.load(std::memory_order_acquire);
  if (d == nullptr) return std::nullopt;
  return d->dispatch(DispatchedOp{kind, name, inputs, attrs, run});
}

}  // namespace internal

void set_op_dispatcher(OpDispatcher* dispatcher) noexcept {
  internal::g_op_dispatcher.store(dispatcher, std::memory_order_release);
}

}  // namespace strata
