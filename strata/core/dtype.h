#pragma once
// DType: the element types of tensors, spelled as TensorFlow's (tf.float32, ...).
//
//   strata::DType d = strata::float32;
//   strata::dtype_name(d);          // "float32"
//   strata::dtype_size(d);          // 4
//   strata::dtype_of<int64_t>();    // strata::int64
//
// Promotion (documented rule for binary ops on tensors of different dtypes):
// Strata follows NumPy's "safe" promotion among its dtypes: bool < uint8 <
// int32 < int64 < float32 < float64, except that int64 with float32 gives
// float32 (as TF/JAX weak-typing users expect for mixed arithmetic), and string
// promotes with nothing (InvalidArgumentError). Python scalars passed to
// operators take the tensor's dtype.

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>

namespace strata {

enum class DType : uint8_t { float32, float64, int32, int64, uint8, bool_, string };

inline constexpr DType float32 = DType::float32;
inline constexpr DType float64 = DType::float64;
inline constexpr DType int32 = DType::int32;
inline constexpr DType int64 = DType::int64;
inline constexpr DType uint8 = DType::uint8;
inline constexpr DType bool_ = DType::bool_;
inline constexpr DType string = DType::string;

std::string_view dtype_name(DType d) noexcept;
// Parses "float32", "int64", "bool", ...; throws InvalidArgumentError otherwise.
DType dtype_from_name(std::string_view name);
// Bytes per element; sizeof(std::string) for string.
size_t dtype_size(DType d) noexcept;
bool is_floating(DType d) noexcept;
bool is_integer(DType d) noexcept;  // int32, int64, uint8 (not bool)
bool is_numeric(DType d) noexcept;  // floating or integer
// The result dtype of a binary op on a and b (see rule above).
DType promote_types(DType a, DType b);

std::ostream& operator<<(std::ostream& os, DType d);

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return DType::float32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::float64;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::int32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::int64;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::uint8;
  else if constexpr (std::is_same_v<T, bool>)
    return DType::bool_;
  else if constexpr (std::is_same_v<T, std::string>)
    return DType::string;
  else
    static_assert(sizeof(T) == 0, "no Strata dtype for this C++ type");
}

[[noreturn]] void throw_not_numeric(DType d);

// Calls fn(T{}) with T the C++ type of numeric dtype `d` (float, double,
// int32_t, int64_t, uint8_t, bool). Throws InvalidArgumentError for string.
template <typename Fn>
decltype(auto) dispatch_numeric(DType d, Fn&& fn) {
  switch (d) {
    case DType::float32: return fn(float{});
    case DType::float64: return fn(double{});
    case DType::int32: return fn(int32_t{});
    case DType::int64: return fn(int64_t{});
    case DType::uint8: return fn(uint8_t{});
    case DType::bool_: return fn(bool{});
    case DType::string: break;
  }
  throw_not_numeric(d);
}

}  // namespace strata
