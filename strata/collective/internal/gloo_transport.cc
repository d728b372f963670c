#include "strata/collective/internal/gloo_transport.h"

#include <exception>

namespace strata::collective::internal {

AbortableBuffer::AbortableBuffer(std::unique_ptr<gloo::transport::UnboundBuffer> inner,
                                 std::shared_ptr<AbortRegistry> registry)
    : gloo::transport::UnboundBuffer(inner->ptr, inner->size),
      inner_(std::move(inner)),
      registry_(std::move(registry)) {
  registry_->add(this);
}

AbortableBuffer::~AbortableBuffer() { registry_->remove(this); }

namespace {
// Runs Gloo's wait(timeout). A connection error signalled to the buffer (a
// peer that closed after its last message, with a receive still pending on
// the buffer, such as the sentinel receives) can land after an operation
// completed but before the wait saw it, and Gloo's wait checks the error
// first. The completion is counted before the connection's later error and a
// wait that finds one returns it without looking at errors, so one more short
// wait tells the two apart: it returns the completion, or the original error
// stands.
template <typename Wait>
bool wait_through_late_errors(Wait&& wait, Milliseconds timeout) {
  try {
    return wait(timeout);
  } catch (const gloo::Exception&) {
    const std::exception_ptr original = std::current_exception();
    bool completed = false;
    try {
      completed = wait(Milliseconds(1));
    } catch (const gloo::Exception&) {
    }
    if (!completed) std::rethrow_exception(original);
    return true;
  }
}
}  // namespace

bool AbortableBuffer::waitRecv(int* rank, Milliseconds timeout) {
  // Gloo's algorithms ignore the return value, so an aborted wait throws.
  if (registry_->aborted() ||
      !wait_through_late_errors([&](Milliseconds t) { return inner_->waitRecv(rank, t); },
                                timeout)) {
    registry_->throw_aborted();
  }
  return true;
}

bool AbortableBuffer::waitSend(int* rank, Milliseconds timeout) {
  if (registry_->aborted() ||
      !wait_through_late_errors([&](Milliseconds t) { return inner_->waitSend(rank, t); },
                                timeout)) {
    registry_->throw_aborted();
  }
  return true;
}

}  // namespace strata::collective::internal
