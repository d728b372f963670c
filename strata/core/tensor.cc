#include "strata/core/tensor.h"

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "strata/core/allocator.h"
#include "strata/core/device.h"
#include "strata/core/tensor_spec.h"

namespace strata {

namespace {
std::atomic<uint64_t> g_next_tensor_id{1};

void check_defined(const void* impl, const char* who) {
  STRATA_CHECK(FAILED_PRECONDITION, impl != nullptr, "Tensor::", who,
               ": the tensor handle is empty (default-constructed or an absent gradient)");
}
}  // namespace

std::shared_ptr<Tensor::Impl> Tensor::make_impl(std::shared_ptr<Buffer> buffer,
                                                const TensorShape& shape, int64_t offset,
                                                DType dtype, const Device* device) {
  STRATA_CHECK_ARG(shape.is_fully_defined(), "Tensor: expected a fully defined shape, got ", shape);
  // From the buffer cache like the elements: a step makes and frees a handle
  // per op output, and reuses the blocks of the step before.
  auto impl = std::allocate_shared<Impl>(PoolAllocator<Impl>());
  impl->buffer = std::move(buffer);
  impl->offset = offset;
  impl->shape = shape;
  impl->dtype = dtype;
  impl->device = device != nullptr ? device : &current_device();
  impl->id = g_next_tensor_id.fetch_add(1, std::memory_order_relaxed);
  return impl;
}

Tensor Tensor::allocate(DType dtype, const TensorShape& shape, const Device* device) {
  STRATA_CHECK_ARG(shape.is_fully_defined(),
                   "Tensor::allocate: expected a fully defined shape, got ", shape);
  return Tensor(make_impl(Buffer::allocate(dtype, shape.num_elements()), shape, 0, dtype, device));
}

Tensor Tensor::from_buffer(std::shared_ptr<Buffer> buffer, const TensorShape& shape, int64_t offset,
                           const Device* device) {
  STRATA_INTERNAL_CHECK(buffer != nullptr);
  STRATA_CHECK_ARG(shape.is_fully_defined(),
                   "Tensor::from_buffer: expected a fully defined shape, got ", shape);
  STRATA_CHECK_ARG(offset >= 0 && offset + shape.num_elements() <= buffer->num_elements(),
                   "Tensor::from_buffer: elements [", offset, ", ", offset + shape.num_elements(),
                   ") exceed the buffer of ", buffer->num_elements(), " elements");
  const DType dtype = buffer->dtype();
  return Tensor(make_impl(std::move(buffer), shape, offset, dtype, device));
}

const Tensor::Impl& Tensor::impl() const {
  check_defined(impl_.get(), "access");
  return *impl_;
}

const TensorShape& Tensor::shape() const { return impl().shape; }
DType Tensor::dtype() const { return impl().dtype; }
int64_t Tensor::num_elements() const { return impl().shape.num_elements(); }
const std::string& Tensor::device() const { return impl().device->name(); }
const Device& Tensor::placement() const { return *impl().device; }
uint64_t Tensor::id() const { return impl().id; }
const std::shared_ptr<Buffer>& Tensor::buffer() const { return impl().buffer; }
int64_t Tensor::offset() const { return impl().offset; }
const std::shared_ptr<const TensorExtension>& Tensor::extension() const { return impl().extension; }

const void* Tensor::raw_data() const {
  const Impl& i = impl();
  return i.buffer->data() + i.offset * dtype_size(i.dtype);
}

void Tensor::check_type(DType expected, const char* who) const {
  STRATA_CHECK_ARG(dtype() == expected, "Tensor::", who, ": expected a ", dtype_name(expected),
                   " tensor, got ", dtype_name(dtype()), " with shape ", shape());
}

double Tensor::scalar_as_double() const {
  STRATA_CHECK_ARG(num_elements() == 1,
                   "Tensor::scalar_as_double: expected a tensor with one element, got shape ",
                   shape());
  return dispatch_numeric(dtype(), [&](auto zero) {
    using T = decltype(zero);
    return static_cast<double>(reinterpret_cast<const T*>(raw_data())[0]);
  });
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  const Impl& i = impl();
  STRATA_CHECK_ARG(i.shape.rank() >= 1, "Tensor::slice_rows: expected rank >= 1, got shape ",
                   i.shape);
  const int64_t rows = i.shape.dim(0);
  STRATA_CHECK_ARG(0 <= begin && begin <= end && end <= rows, "Tensor::slice_rows: rows [", begin,
                   ", ", end, ") out of range for shape ", i.shape);
  const int64_t row_elems = rows == 0 ? 0 : i.shape.num_elements() / rows;
  return Tensor(make_impl(i.buffer, i.shape.with_dim(0, end - begin), i.offset + begin * row_elems,
                          i.dtype, i.device));
}

Tensor Tensor::reshaped(const TensorShape& shape) const {
  const Impl& i = impl();
  STRATA_CHECK_ARG(shape.is_fully_defined() && shape.num_elements() == i.shape.num_elements(),
                   "reshape: cannot reshape a tensor of shape ", i.shape, " (",
                   i.shape.num_elements(), " elements) into shape ", shape);
  auto impl = make_impl(i.buffer, shape, i.offset, i.dtype, i.device);
  impl->extension = nullptr;
  return Tensor(std::move(impl));
}

Tensor Tensor::on_device(const Device& device) const {
  const Impl& i = impl();
  if (i.device == &device) return *this;
  auto impl = make_impl(i.buffer, i.shape, i.offset, i.dtype, &device);
  impl->extension = i.extension;
  return Tensor(std::move(impl));
}

Tensor Tensor::with_extension(std::shared_ptr<const TensorExtension> ext) const {
  const Impl& i = impl();
  auto impl = std::allocate_shared<Impl>(PoolAllocator<Impl>(), i);
  impl->extension = std::move(ext);  // same id: the same value, annotated
  return Tensor(std::move(impl));
}

// --- printing ------------------------------------------------------------------

namespace {

constexpr int64_t kSummariseThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

// NumPy's float formatting (floatmode "maxprec", precision 8), which
// TensorFlow's repr uses: integral values print as "1."; others with the
// fewest digits that read back as the same value *of the tensor's dtype*
// (so float32 0.1f + 0.2f prints "0.3", not "0.30000001"), at most 8
// fractional digits; magnitudes below 1e-4 or from 1e16 in scientific form
// with the same rule for the mantissa ("1.e-05", "1.5e+20"). A scalar prints
// as NumPy's scalar repr: no cap on the digits.
std::string format_float(double v, bool single, bool cap_fraction = true) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e16) {
    std::snprintf(buf, sizeof(buf), "%.0f.", v);
    return buf;
  }
  const double a = std::fabs(v);
  const bool scientific = a != 0 && (a < 1e-4 || a >= 1e16);
  const std::chars_format format =
      scientific ? std::chars_format::scientific : std::chars_format::fixed;
  std::to_chars_result r = single ? std::to_chars(buf, buf + sizeof(buf), float(v), format)
                                  : std::to_chars(buf, buf + sizeof(buf), v, format);
  std::string s(buf, r.ptr);
  const size_t e = s.find('e');
  std::string mantissa = e == std::string::npos ? s : s.substr(0, e);
  const std::string exponent = e == std::string::npos ? "" : s.substr(e);
  const size_t dot = mantissa.find('.');
  if (dot == std::string::npos) {
    mantissa += '.';
  } else if (cap_fraction && mantissa.size() - dot - 1 > 8) {
    // More than 8 fractional digits: round to 8 and drop trailing zeros.
    std::snprintf(buf, sizeof(buf), "%.8f", std::stod(mantissa));
    mantissa = buf;
    while (mantissa.back() == '0') mantissa.pop_back();
  }
  return mantissa + exponent;
}

template <typename T>
std::string format_element(const T& v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return format_float(static_cast<double>(v), std::is_same_v<T, float>);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_same_v<T, std::string>) {
    std::string s = "b'";
    for (unsigned char c : v) {
      if (c == '\'' || c == '\\') {
        s += '\\';
        s += static_cast<char>(c);
      } else if (c >= 32 && c < 127) {
        s += static_cast<char>(c);
      } else {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\x%02x", c);
        s += buf;
      }
    }
    return s + "'";
  } else {
    return std::to_string(static_cast<int64_t>(v));
  }
}

// Column widths shared by all elements: floats align on the decimal point
// (integer part padded left, fraction padded right), as NumPy does.
struct Widths {
  size_t left = 0;
  size_t right = 0;
};

std::string pad_element(std::string e, const Widths& w, bool is_float) {
  if (is_float) {
    const size_t dot = e.find('.');
    const size_t left = dot == std::string::npos ? e.size() : dot;
    const size_t right = dot == std::string::npos ? 0 : e.size() - dot;
    if (left < w.left) e.insert(0, w.left - left, ' ');
    if (right < w.right) e.append(w.right - right, ' ');
  } else if (e.size() < w.left) {
    e.insert(0, w.left - e.size(), ' ');
  }
  return e;
}

template <typename T>
void format_rec(const T* data, const std::vector<int64_t>& dims, int axis, int64_t offset,
                const std::vector<int64_t>& strides, bool summarise, const Widths& width,
                std::ostringstream& os) {
  const int rank = static_cast<int>(dims.size());
  os << '[';
  const int64_t n = dims[axis];
  for (int64_t i = 0; i < n; ++i) {
    if (summarise && n > 2 * kEdgeItems && i == kEdgeItems) {
      os << (axis == rank - 1 ? "... " : "...,\n" + std::string(axis + 1, ' '));
      i = n - kEdgeItems;
    }
    if (axis == rank - 1) {
      os << pad_element(format_element(data[offset + i]), width, std::is_floating_point_v<T>);
      if (i + 1 < n) os << ' ';
    } else {
      format_rec(data, dims, axis + 1, offset + i * strides[axis], strides, summarise, width, os);
      if (i + 1 < n) os << std::string(rank - axis - 1, '\n') << std::string(axis + 1, ' ');
    }
  }
  os << ']';
}

template <typename T>
std::string format_values(const T* data, const TensorShape& shape) {
  const auto& dims = shape.dims();
  if (dims.empty()) {
    // Scalars print like Python floats ("1.0"), arrays like NumPy ("1.").
    std::string e = format_element(data[0]);
    if constexpr (std::is_floating_point_v<T>) {
      e = format_float(static_cast<double>(data[0]), std::is_same_v<T, float>,
                       /*cap_fraction=*/false);
      if (!e.empty() && e.back() == '.') e += '0';
      // NumPy's scalar repr writes "1e-05" where an array writes "1.e-05".
      if (const size_t p = e.find(".e"); p != std::string::npos) e.erase(p, 1);
    }
    return e;
  }
  if (shape.num_elements() == 0) return "[]";
  std::vector<int64_t> strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
  const bool summarise = shape.num_elements() > kSummariseThreshold;
  Widths width;
  if constexpr (!std::is_same_v<T, std::string>) {
    for (int64_t i = 0; i < shape.num_elements(); ++i) {
      const std::string e = format_element(data[i]);
      const size_t dot = std::is_floating_point_v<T> ? e.find('.') : std::string::npos;
      width.left = std::max(width.left, dot == std::string::npos ? e.size() : dot);
      width.right = std::max(width.right, dot == std::string::npos ? size_t{0} : e.size() - dot);
    }
  }
  std::ostringstream os;
  format_rec(data, dims, 0, 0, strides, summarise, width, os);
  return os.str();
}

}  // namespace

std::string Tensor::values_string() const {
  if (!defined()) return "<empty>";
  if (dtype() == DType::string) return format_values(data<std::string>(), shape());
  return dispatch_numeric(dtype(), [&](auto zero) {
    using T = decltype(zero);
    return format_values(reinterpret_cast<const T*>(raw_data()), shape());
  });
}

std::string shape_repr(const TensorShape& shape) {
  std::string s = "(";
  const auto& dims = shape.dims();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += dims[i] < 0 ? std::string("None") : std::to_string(dims[i]);
  }
  if (dims.size() == 1) s += ",";
  return s + ")";
}

std::string Tensor::to_string() const {
  if (!defined()) return "tf.Tensor(<empty handle>)";
  std::string values = values_string();
  std::string s = "tf.Tensor(";
  if (values.find('\n') != std::string::npos) s += "\n";
  s += values;
  s += ", shape=";
  s += shape_repr(shape());
  s += ", dtype=";
  s += dtype_name(dtype());
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

// --- constants -------------------------------------------------------------------

namespace internal {

namespace {
TensorShape checked_constant_shape(int64_t count, const TensorShape& shape) {
  STRATA_CHECK_ARG(shape.is_fully_defined(), "constant: expected a fully defined shape, got ",
                   shape);
  STRATA_CHECK_ARG(count == shape.num_elements() || count == 1, "constant: expected ",
                   shape.num_elements(), " values for shape ", shape, ", got ", count);
  return shape;
}
}  // namespace

Tensor constant_from_bytes(DType dtype, const void* data, int64_t count, const TensorShape& shape) {
  checked_constant_shape(count, shape);
  Tensor t = Tensor::allocate(dtype, shape);
  const size_t elem = dtype_size(dtype);
  auto* out = static_cast<std::byte*>(t.mutable_raw_data());
  if (count == shape.num_elements()) {
    if (count > 0) std::memcpy(out, data, count * elem);
  } else {
    for (int64_t i = 0; i < shape.num_elements(); ++i) std::memcpy(out + i * elem, data, elem);
  }
  return t;
}

Tensor constant_from_strings(const std::vector<std::string>& values, const TensorShape& shape) {
  checked_constant_shape(static_cast<int64_t>(values.size()), shape);
  Tensor t = Tensor::allocate(DType::string, shape);
  std::string* out = t.mutable_data<std::string>();
  for (int64_t i = 0; i < shape.num_elements(); ++i) {
    out[i] = values.size() == 1 ? values[0] : values[i];
  }
  return t;
}

}  // namespace internal

Tensor constant(const char* value) { return constant(std::string(value)); }
Tensor constant(const std::string& value) {
  return internal::constant_from_strings({value}, TensorShape{});
}

// --- TensorSpec ------------------------------------------------------------------

bool TensorSpec::is_compatible_with(const Tensor& t) const {
  return t.defined() && dtype == t.dtype() && shape.is_compatible_with(t.shape());
}

std::string TensorSpec::to_string() const {
  std::string s = "TensorSpec(shape=";
  s += shape.has_known_rank() ? shape_repr(shape) : std::string("<unknown>");
  s += ", dtype=tf.";
  s += dtype_name(dtype);
  s += ", name=";
  s += name.empty() ? "None" : "'" + name + "'";
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const TensorSpec& s) { return os << s.to_string(); }

}  // namespace strata
