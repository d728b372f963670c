#include "strata/collective/internal/buffer_pool.h"

#include <algorithm>

#include "strata/base/mutex.h"

namespace strata::collective::internal {

std::shared_ptr<Buffer> BufferPool::get(const std::shared_ptr<BufferPool>& pool, DType dtype,
                                        int64_t num_elements) {
  std::shared_ptr<Buffer> owned;
  {
    MutexLock lock(pool->mu_);
    auto& idle = pool->idle_;
    auto it = std::find_if(idle.begin(), idle.end(), [&](const std::shared_ptr<Buffer>& b) {
      return b->dtype() == dtype && b->num_elements() == num_elements;
    });
    if (it != idle.end()) {
      owned = std::move(*it);
      idle.erase(it);
    }
  }
  if (owned == nullptr) owned = Buffer::allocate(dtype, num_elements);
  Buffer* raw = owned.get();
  // The handle's deleter runs when the last Tensor on it dies and returns the
  // owning pointer to the pool (under its mutex, which also orders the readers'
  // last accesses before the next writer's).
  std::weak_ptr<BufferPool> weak = pool;
  return std::shared_ptr<Buffer>(raw, [weak, owned = std::move(owned)](Buffer*) mutable {
    if (auto p = weak.lock()) p->give_back(std::move(owned));
  });
}

void BufferPool::give_back(std::shared_ptr<Buffer> buffer) {
  std::shared_ptr<Buffer> evicted;  // freed outside the lock
  MutexLock lock(mu_);
  if (max_idle_ == 0) return;
  if (idle_.size() >= max_idle_) {
    evicted = std::move(idle_.front());
    idle_.erase(idle_.begin());
  }
  idle_.push_back(std::move(buffer));
}

}  // namespace strata::collective::internal
