#include "strata/base/numbers.h"

#include <cerrno>
#include <cstdlib>

namespace strata {

std::optional<int64_t> parse_whole_number(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(begin, &end, 10);
  if (end == begin || *end != '\0' || errno != 0) return std::nullopt;
  return static_cast<int64_t>(n);
}

}  // namespace strata
