#include "strata/core/dtype.h"

#include "strata/base/errors.h"

namespace strata {

std::string_view dtype_name(DType d) noexcept {
  switch (d) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::uint8: return "uint8";
    case DType::bool_: return "bool";
    case DType::string: return "string";
  }
  return "invalid";
}

DType dtype_from_name(std::string_view name) {
  for (DType d : {DType::float32, DType::float64, DType::int32, DType::int64, DType::uint8,
                  DType::bool_, DType::string}) {
    if (dtype_name(d) == name) return d;
  }
  throw InvalidArgumentError(
      str_cat("dtype: expected one of float32, float64, int32, int64, "
              "uint8, bool, string, got '",
              name, "'"));
}

size_t dtype_size(DType d) noexcept {
  switch (d) {
    case DType::float32: return 4;
    case DType::float64: return 8;
    case DType::int32: return 4;
    case DType::int64: return 8;
    case DType::uint8:
    case DType::bool_: return 1;
    case DType::string: return sizeof(std::string);
  }
  return 0;
}

bool is_floating(DType d) noexcept { return d == DType::float32 || d == DType::float64; }
bool is_integer(DType d) noexcept {
  return d == DType::int32 || d == DType::int64 || d == DType::uint8;
}
bool is_numeric(DType d) noexcept { return is_floating(d) || is_integer(d); }

namespace {
int rank_of(DType d) {
  switch (d) {
    case DType::bool_: return 0;
    case DType::uint8: return 1;
    case DType::int32: return 2;
    case DType::int64: return 3;
    case DType::float32: return 4;
    case DType::float64: return 5;
    case DType::string: return -1;
  }
  return -1;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  STRATA_CHECK_ARG(a != DType::string && b != DType::string, "promote_types: cannot combine ",
                   dtype_name(a), " with ", dtype_name(b));
  return rank_of(a) >= rank_of(b) ? a : b;
}

void throw_not_numeric(DType d) {
  throw InvalidArgumentError(str_cat("expected a numeric dtype, got ", dtype_name(d)));
}

std::ostream& operator<<(std::ostream& os, DType d) { return os << dtype_name(d); }

}  // namespace strata
