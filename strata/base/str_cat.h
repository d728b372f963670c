#pragma once
// str_cat(parts...): concatenates anything with an operator<< into a string.
// Used to build error messages that print the offending values; containers of
// printable values (vectors, spans) print as "[a, b, c]".
//
//   std::string m = strata::str_cat("got shape ", std::vector<int64_t>{2, 3});  // "got shape [2,
//   3]"

#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace strata {

namespace internal {
template <typename T>
void append_one(std::ostringstream& os, const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    os << (value ? "true" : "false");
  } else if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>) {
    os << static_cast<int>(value);
  } else {
    os << value;
  }
}
template <typename T, typename Allocator>
void append_one(std::ostringstream& os, const std::vector<T, Allocator>& values);
template <typename T, size_t Extent>
void append_one(std::ostringstream& os, std::span<T, Extent> values);
template <typename Values>
void append_list(std::ostringstream& os, const Values& values) {
  os << '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) os << ", ";
    append_one(os, values[i]);
  }
  os << ']';
}
template <typename T, typename Allocator>
void append_one(std::ostringstream& os, const std::vector<T, Allocator>& values) {
  append_list(os, values);
}
template <typename T, size_t Extent>
void append_one(std::ostringstream& os, std::span<T, Extent> values) {
  append_list(os, values);
}
}  // namespace internal

template <typename... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream os;
  (internal::append_one(os, parts), ...);
  return os.str();
}

// Joins printable values with `sep`.
template <typename Range>
std::string str_join(const Range& values, std::string_view sep) {
  std::ostringstream os;
  bool first = true;
  for (const auto& v : values) {
    if (!first) os << sep;
    first = false;
    internal::append_one(os, v);
  }
  return os.str();
}

}  // namespace strata
