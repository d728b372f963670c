#pragma once
// CLI11 validators for the `strata` program's numeric flags. CLI11's own Range
// and PositiveNumber let NaN, infinities and out-of-range integers through (a
// NaN compares false with every bound, and "-1" or "99999999999999999999" parse
// into an unsigned option by wrapping or saturating), so every numeric flag uses
// one of these. A rejected value makes the program exit 2 with CLI11's
// "--flag: <message>" line, which names the accepted range.
//
//   app.add_option("--learning-rate", lr)->check(finite_in(0, 1e6, /*exclusive_low=*/true));
//   app.add_option("--seed", seed)->check(whole_in(0, INT64_MAX));
//   app.add_option("--checkpoint-dir", dir)->check(folder_to_write());

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>

#include "strata/base/numbers.h"

namespace strata::tools {

// A finite decimal number in [low, high] ((low, high] when exclusive_low).
inline CLI::Validator finite_in(double low, double high, bool exclusive_low = false) {
  std::ostringstream range;
  range << (exclusive_low ? "(" : "[") << low << ", " << high << "]";
  return CLI::Validator(
      [low, high, exclusive_low, text = range.str()](std::string& value) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(value.c_str(), &end);
        const bool parsed = end != value.c_str() && *end == '\0' && errno == 0;
        if (!parsed || !std::isfinite(v) || v > high || (exclusive_low ? v <= low : v < low)) {
          return "expected a finite number in " + text + ", got '" + value + "'";
        }
        return {};
      },
      "NUMBER in " + range.str());
}

// A whole decimal number in [low, high], no sign wrap-around and no overflow.
inline CLI::Validator whole_in(int64_t low, int64_t high) {
  const std::string text = "[" + std::to_string(low) + ", " + std::to_string(high) + "]";
  return CLI::Validator(
      [low, high, text](std::string& value) -> std::string {
        const std::optional<int64_t> v = parse_whole_number(value);
        if (!v || *v < low || *v > high) {
          return "expected a whole number in " + text + ", got '" + value + "'";
        }
        return {};
      },
      "INT in " + text);
}

// A folder the program writes into, created when missing: a non-empty path
// that is not an existing file and has no file among its existing parents.
inline CLI::Validator folder_to_write() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (value.empty()) return "expected a folder, got ''";
        std::error_code ec;
        for (std::filesystem::path p(value); !p.empty(); p = p.parent_path()) {
          const std::filesystem::file_status st = std::filesystem::status(p, ec);
          if (std::filesystem::exists(st)) {
            if (std::filesystem::is_directory(st)) return {};
            return "expected a folder, got '" + value + "' (" +
                   (p == std::filesystem::path(value) ? std::string("a file")
                                                      : "'" + p.string() + "' is a file") +
                   ")";
          }
          if (p == p.parent_path()) break;
        }
        return {};
      },
      "DIR");
}

}  // namespace strata::tools
