#include "strata/core/buffer.h"

#include <cstdlib>
#include <new>
#include <string>

#include "strata/base/errors.h"

namespace strata {

std::shared_ptr<Buffer> Buffer::allocate(DType dtype, int64_t num_elements) {
  STRATA_INTERNAL_CHECK(num_elements >= 0, "negative element count ", num_elements);
  const size_t bytes = static_cast<size_t>(num_elements) * dtype_size(dtype);
  // aligned_alloc needs a size that is a multiple of the alignment, and a
  // non-zero one so that empty tensors still have a valid, unique pointer.
  const size_t rounded = (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  void* p = std::aligned_alloc(kBufferAlignment, rounded == 0 ? kBufferAlignment : rounded);
  if (p == nullptr) {
    throw ResourceExhaustedError(str_cat("Buffer: failed to allocate ", bytes, " bytes for ",
                                         num_elements, " ", dtype_name(dtype), " elements"));
  }
  auto* data = static_cast<std::byte*>(p);
  if (dtype == DType::string) {
    auto* s = reinterpret_cast<std::string*>(data);
    for (int64_t i = 0; i < num_elements; ++i) new (s + i) std::string();
  }
  return std::make_shared<Buffer>(PrivateTag{}, dtype, num_elements, data);
}

Buffer::~Buffer() {
  if (dtype_ == DType::string) {
    auto* s = reinterpret_cast<std::string*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) s[i].~basic_string();
  }
  std::free(data_);
}

}  // namespace strata
