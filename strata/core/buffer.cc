#include "strata/core/buffer.h"

#include <new>
#include <string>

#include "strata/base/errors.h"
#include "strata/core/allocator.h"

namespace strata {

static_assert(kBufferAlignment == CachingAllocator::kAlignment);

std::shared_ptr<Buffer> Buffer::allocate(DType dtype, int64_t num_elements) {
  STRATA_INTERNAL_CHECK(num_elements >= 0, "negative element count ", num_elements);
  const size_t bytes = static_cast<size_t>(num_elements) * dtype_size(dtype);
  void* p = nullptr;
  try {
    // A unique, valid pointer even for empty tensors; large blocks come from
    // the cache of freed buffers (no page faults on reuse).
    p = CachingAllocator::global().allocate(bytes);
  } catch (const ResourceExhaustedError&) {
    throw ResourceExhaustedError(str_cat("Buffer: failed to allocate ", bytes, " bytes for ",
                                         num_elements, " ", dtype_name(dtype), " elements"));
  }
  auto* data = static_cast<std::byte*>(p);
  if (dtype == DType::string) {
    auto* s = reinterpret_cast<std::string*>(data);
    for (int64_t i = 0; i < num_elements; ++i) new (s + i) std::string();
  }
  // The control block from the same cache (see PoolAllocator).
  return std::allocate_shared<Buffer>(PoolAllocator<Buffer>(), PrivateTag{}, dtype, num_elements,
                                      data);
}

Buffer::~Buffer() {
  if (dtype_ == DType::string) {
    auto* s = reinterpret_cast<std::string*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) s[i].~basic_string();
  }
  CachingAllocator::global().deallocate(data_, size_bytes());
}

}  // namespace strata
