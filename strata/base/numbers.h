#pragma once
// Whole numbers from text that a user wrote (environment variables, flags, file
// metadata), checked strictly: the whole text must be the number, as strtoll
// reads it (optional leading blanks and sign, decimal digits), and it must fit.
//
//   std::optional<int64_t> n = strata::parse_whole_number("42");   // 42
//   strata::parse_whole_number("4x");                               // nullopt
//   strata::parse_whole_number("99999999999999999999");             // nullopt (overflow)
//
// Callers check the range and name the value in their own error. Thread-safe.

#include <cstdint>
#include <optional>
#include <string>

namespace strata {

std::optional<int64_t> parse_whole_number(const std::string& text);

}  // namespace strata
