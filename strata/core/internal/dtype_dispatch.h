#pragma once
// Implementation of strata::dispatch_numeric (included by dtype.h).

#include "strata/base/errors.h"

namespace strata {

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
  throw InvalidArgumentError(str_cat("expected a numeric dtype, got ", dtype_name(d)));
}

}  // namespace strata
