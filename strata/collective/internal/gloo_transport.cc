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

ConnectionWatch::~ConnectionWatch() { buffer_.reset(); }

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

// A wait that lost its peer (AbortRegistry::lose) still returns an operation
// that completed before the connection broke; else it fails with the loss.
// The short wait that looks for that completion fails the context's pairs
// when there is none, which no longer matters: the connection is gone.
template <typename Wait>
bool wait_after_loss(AbortRegistry& registry, Wait&& wait) {
  try {
    if (wait(Milliseconds(1))) return true;
  } catch (const gloo::Exception&) {
  }
  registry.throw_lost();
}

}  // namespace

namespace {

// The wait of an AbortableBuffer: Gloo's algorithms ignore the return value,
// so an aborted wait throws; after a lost connection a wait still returns an
// operation that completed before it broke.
template <typename Wait>
bool abortable_wait(AbortRegistry& registry, Wait&& wait, Milliseconds timeout) {
  if (registry.aborted()) registry.throw_aborted();
  if (registry.lost()) return wait_after_loss(registry, wait);
  if (wait_through_late_errors(wait, timeout)) return true;
  if (registry.aborted()) registry.throw_aborted();
  if (registry.lost()) return wait_after_loss(registry, wait);
  registry.throw_aborted();
}

}  // namespace

bool AbortableBuffer::waitRecv(int* rank, Milliseconds timeout) {
  return abortable_wait(
      *registry_, [&](Milliseconds t) { return inner_->waitRecv(rank, t); }, timeout);
}

bool AbortableBuffer::waitSend(int* rank, Milliseconds timeout) {
  return abortable_wait(
      *registry_, [&](Milliseconds t) { return inner_->waitSend(rank, t); }, timeout);
}

}  // namespace strata::collective::internal
