#pragma once
// Diagnostic logging for library code: the warnings and progress notes that
// TensorFlow writes through its C++ logger (LOG(WARNING) << ...) or Python's
// logging module. What a program prints for its user (Keras's progress bars,
// `strata` subcommand output) goes to stdout and is not logging.
//
//   STRATA_LOG(WARNING, "metric `", monitor, "` is not available");
//   // stderr: W 2026-12-04T03:00:00.123Z early_stopping.cc:42] metric `loss` is not available
//
// Line format: "<I|W|E> <UTC time, ISO 8601, milliseconds>Z <file basename>:<line>] <message>",
// one line per call, written with a single write so the lines of concurrent
// threads (and of processes sharing the stream) never interleave mid-line.
//
// Threshold: a message is written when its severity is at least
// min_log_level(). The level starts from the environment, read once at the
// first log call: STRATA_MIN_LOG_LEVEL, else TensorFlow's TF_CPP_MIN_LOG_LEVEL;
// "0" writes everything (the default), "1" drops INFO, "2" drops WARNING too,
// "3" writes nothing. Other values are ignored (the default applies).
// Every function here is thread-safe.

#include <chrono>
#include <string>
#include <string_view>

#include "strata/base/str_cat.h"

namespace strata {

// TensorFlow's severities and numbering (tsl/platform/default/logging.h).
enum class LogSeverity { INFO = 0, WARNING = 1, ERROR = 2 };

// The current threshold, 0..3 (see above).
int min_log_level() noexcept;
// Overrides the threshold (clamped to 0..3) for the rest of the process.
void set_min_log_level(int level) noexcept;

// True when a message of `severity` would be written.
inline bool log_enabled(LogSeverity severity) noexcept {
  return static_cast<int>(severity) >= min_log_level();
}

namespace internal {
// One formatted line, with its trailing newline.
std::string format_log_line(LogSeverity severity, std::chrono::system_clock::time_point time,
                            std::string_view file, int line, std::string_view message);
// Formats the line for now and writes it to stderr.
void write_log(LogSeverity severity, const char* file, int line, std::string_view message);
// The level an environment value selects, or -1 when it is missing or invalid.
int parse_min_log_level(const char* value) noexcept;
}  // namespace internal

}  // namespace strata

// STRATA_LOG(INFO|WARNING|ERROR, parts...): logs str_cat(parts...). The parts
// are not evaluated when the severity is below the threshold.
#define STRATA_LOG(severity, ...)                                                        \
  do {                                                                                   \
    if (::strata::log_enabled(::strata::LogSeverity::severity)) {                        \
      ::strata::internal::write_log(::strata::LogSeverity::severity, __FILE__, __LINE__, \
                                    ::strata::str_cat(__VA_ARGS__));                     \
    }                                                                                    \
  } while (false)
