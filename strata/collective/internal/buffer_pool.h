#pragma once
// BufferPool: recycles collective output buffers. A training loop all-reduces
// buffers of the same sizes every step and drops the results after applying
// them; handing a dropped buffer out again avoids a fresh mmap (and the kernel
// zeroing its pages) per step, which would otherwise cost about as much memory
// traffic as the reduction itself for large tensors.
//
//   auto pool = std::make_shared<BufferPool>();
//   std::shared_ptr<Buffer> b = BufferPool::get(pool, DType::float32, n);
//   // ... wrap in Tensors; when the last handle dies the buffer returns to the pool
//
// A buffer is reused only once every handle to it is gone, so tensors built on
// it stay immutable. Thread-safe; the pool may die before its buffers.

#include <cstdint>
#include <memory>
#include <vector>

#include "strata/base/mutex.h"
#include "strata/core/buffer.h"

namespace strata::collective::internal {

class BufferPool {
 public:
  // At most this many idle buffers are kept (the oldest is freed first).
  explicit BufferPool(size_t max_idle = 16) : max_idle_(max_idle) {}

  // A buffer of exactly `num_elements` numeric elements (contents unspecified).
  static std::shared_ptr<Buffer> get(const std::shared_ptr<BufferPool>& pool, DType dtype,
                                     int64_t num_elements);

 private:
  void give_back(std::shared_ptr<Buffer> buffer);

  const size_t max_idle_;
  Mutex mu_;
  std::vector<std::shared_ptr<Buffer>> idle_ STRATA_GUARDED_BY(mu_);
};

}  // namespace strata::collective::internal
