#pragma once
// Tensor: an immutable value handle over a shared, 64-byte aligned buffer.
//
//   strata::Tensor t = strata::constant({1.f, 2.f, 3.f, 4.f}, {2, 2});
//   t.shape();                 // [2, 2]
//   t.dtype();                 // float32
//   t.device();                // "/job:localhost/replica:0/task:0/device:CPU:0"
//   t.to_vector<float>();      // {1, 2, 3, 4}
//   strata::constant(3.f).item<float>();   // 3
//   std::cout << t;            // tf.Tensor(\n[[1. 2.]\n [3. 4.]], shape=(2, 2), dtype=float32)
//
// Copying a Tensor shares the data (a reference-count increment). Elements are
// stored densely in row-major order starting at an element offset into the
// buffer, so views along the first dimension (rows) and reshapes share memory
// without copying. A default-constructed Tensor is an empty handle
// (defined() == false), used e.g. for a gradient that does not exist.
//
// Thread-safety: immutable, so any number of threads may read one Tensor.
// The only mutation is mutable_data() on a tensor freshly created by
// Tensor::allocate and not yet shared (kernels and loaders fill their outputs).

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "strata/base/errors.h"
#include "strata/core/buffer.h"
#include "strata/core/dtype.h"
#include "strata/core/tensor_shape.h"

namespace strata {

class Device;

// Base of per-tensor data that layers above core attach to a tensor (the tpu
// layer's sharding, for one). Immutable once attached.
class TensorExtension {
 public:
  virtual ~TensorExtension() = default;
};

class Tensor {
 public:
  Tensor() = default;

  // A tensor with uninitialised numeric elements (strings are empty) on
  // `device` (nullptr = the current device). Fill it with mutable_data().
  static Tensor allocate(DType dtype, const TensorShape& shape, const Device* device = nullptr);
  // Wraps an existing buffer: elements [offset, offset + shape.num_elements()).
  static Tensor from_buffer(std::shared_ptr<Buffer> buffer, const TensorShape& shape,
                            int64_t offset = 0, const Device* device = nullptr);

  bool defined() const noexcept { return impl_ != nullptr; }
  const TensorShape& shape() const;
  DType dtype() const;
  int rank() const { return shape().rank(); }
  int64_t num_elements() const;
  size_t size_bytes() const { return num_elements() * dtype_size(dtype()); }
  // Full name of the device the tensor lives on.
  const std::string& device() const;
  const Device& placement() const;
  // A process-unique identity of this value (new for every allocate/view),
  // used by GradientTape to connect recorded ops.
  uint64_t id() const;

  // Typed element access; InvalidArgumentError if T does not match dtype().
  template <typename T>
  const T* data() const {
    check_type(dtype_of<T>(), "data");
    return reinterpret_cast<const T*>(raw_data());
  }
  const void* raw_data() const;
  // Writable elements of a tensor that has not been shared yet (see above).
  template <typename T>
  T* mutable_data() const {
    check_type(dtype_of<T>(), "mutable_data");
    return const_cast<T*>(reinterpret_cast<const T*>(raw_data()));
  }
  void* mutable_raw_data() const { return const_cast<void*>(raw_data()); }

  template <typename T>
  std::vector<T> to_vector() const {
    const T* p = data<T>();
    return std::vector<T>(p, p + num_elements());
  }
  // The single element; InvalidArgumentError unless num_elements() == 1.
  template <typename T>
  T item() const {
    STRATA_CHECK_ARG(num_elements() == 1,
                     "Tensor::item: expected a tensor with one element, got shape ", shape());
    return data<T>()[0];
  }
  // item() of any numeric dtype, converted to double.
  double scalar_as_double() const;

  // Views that share the buffer (no copy):
  // rows [begin, end) of the first dimension;
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // the same elements with another shape (InvalidArgumentError if the counts differ);
  Tensor reshaped(const TensorShape& shape) const;
  // the same elements labelled as living on `device` (all CPU devices share memory).
  Tensor on_device(const Device& device) const;

  const std::shared_ptr<Buffer>& buffer() const;
  int64_t offset() const;

  const std::shared_ptr<const TensorExtension>& extension() const;
  Tensor with_extension(std::shared_ptr<const TensorExtension> ext) const;

  // TF's repr: "tf.Tensor(<values>, shape=(2, 2), dtype=float32)".
  std::string to_string() const;
  // The values alone, formatted like NumPy (summarised beyond 1000 elements).
  std::string values_string() const;

 private:
  struct Impl {
    std::shared_ptr<Buffer> buffer;
    int64_t offset = 0;
    TensorShape shape;
    DType dtype = DType::float32;
    const Device* device = nullptr;
    uint64_t id = 0;
    std::shared_ptr<const TensorExtension> extension;
  };
  explicit Tensor(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  static std::shared_ptr<Impl> make_impl(std::shared_ptr<Buffer> buffer, const TensorShape& shape,
                                         int64_t offset, DType dtype, const Device* device);
  const Impl& impl() const;
  void check_type(DType expected, const char* who) const;

  std::shared_ptr<const Impl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);
// A shape as Python prints a tuple: "()", "(3,)", "(2, 2)"; unknown dims as None.
std::string shape_repr(const TensorShape& shape);

// --- constants (tf.constant) -------------------------------------------------
// Builds a tensor of `shape` from `values` (row-major) on the current device.
// If shape is omitted the tensor is 1-D. InvalidArgumentError when the number
// of values does not match the shape (a single value fills any shape, as TF).
template <typename T>
Tensor constant(const std::vector<T>& values, const TensorShape& shape);
template <typename T>
Tensor constant(const std::vector<T>& values) {
  return constant(values, TensorShape{static_cast<int64_t>(values.size())});
}
template <typename T>
Tensor constant(std::initializer_list<T> values, const TensorShape& shape) {
  return constant(std::vector<T>(values), shape);
}
template <typename T>
Tensor constant(std::initializer_list<T> values) {
  return constant(std::vector<T>(values));
}
namespace internal {
Tensor constant_from_bytes(DType dtype, const void* data, int64_t count, const TensorShape& shape);
Tensor constant_from_strings(const std::vector<std::string>& values, const TensorShape& shape);
}  // namespace internal

// Scalars: constant(1.f), constant(int64_t{3}), constant(true), constant("text").
// A numeric scalar is copied straight into its tensor (no temporary vector:
// optimizers make a few every step).
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
Tensor constant(T value) {
  if constexpr (std::is_same_v<T, bool>) {
    const uint8_t byte = value ? 1 : 0;
    return internal::constant_from_bytes(DType::bool_, &byte, 1, TensorShape{});
  } else if constexpr (std::is_same_v<T, int> && !std::is_same_v<int, int32_t>) {
    static_assert(sizeof(T) == 0, "unsupported element type");
  } else {
    return internal::constant_from_bytes(dtype_of<T>(), &value, 1, TensorShape{});
  }
}
Tensor constant(const char* value);
Tensor constant(const std::string& value);

template <typename T>
Tensor constant(const std::vector<T>& values, const TensorShape& shape) {
  if constexpr (std::is_same_v<T, std::string>) {
    return internal::constant_from_strings(values, shape);
  } else if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return internal::constant_from_bytes(DType::bool_, bytes.data(),
                                         static_cast<int64_t>(bytes.size()), shape);
  } else if constexpr (std::is_same_v<T, int> && !std::is_same_v<int, int32_t>) {
    static_assert(sizeof(T) == 0, "unsupported element type");
  } else {
    return internal::constant_from_bytes(dtype_of<T>(), values.data(),
                                         static_cast<int64_t>(values.size()), shape);
  }
}

}  // namespace strata
