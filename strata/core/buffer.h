#pragma once
// Buffer: a 64-byte aligned block of tensor elements, shared by every Tensor
// handle (and view) that refers to it. Its memory comes from
// CachingAllocator::global() (strata/core/allocator.h), which reuses freed
// blocks of 64 KiB and more.
//
// Numeric elements are left uninitialised by allocate() (kernels write every
// element before the buffer is published); string elements are constructed
// empty and destroyed with the buffer. A buffer is mutable only while its
// creator (a kernel, a loader) fills it; once wrapped in a Tensor it is treated
// as immutable, which is what makes cheap copies of Tensor safe across threads.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "strata/core/dtype.h"

namespace strata {

inline constexpr size_t kBufferAlignment = 64;

class Buffer {
 public:
  // Throws ResourceExhaustedError if the allocation fails.
  static std::shared_ptr<Buffer> allocate(DType dtype, int64_t num_elements);
  struct PrivateTag {};
  Buffer(PrivateTag, DType dtype, int64_t num_elements, std::byte* data)
      : dtype_(dtype), num_elements_(num_elements), data_(data) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  DType dtype() const noexcept { return dtype_; }
  int64_t num_elements() const noexcept { return num_elements_; }
  size_t size_bytes() const noexcept { return num_elements_ * dtype_size(dtype_); }
  std::byte* data() noexcept { return data_; }
  const std::byte* data() const noexcept { return data_; }

 private:
  DType dtype_;
  int64_t num_elements_;
  std::byte* data_;
};

}  // namespace strata
