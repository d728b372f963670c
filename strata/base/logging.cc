#include "strata/base/logging.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "strata/base/mutex.h"

namespace strata {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_min_level{kUnset};

int level_from_environment() noexcept {
  for (const char* name : {"STRATA_MIN_LOG_LEVEL", "TF_CPP_MIN_LOG_LEVEL"}) {
    const int level = internal::parse_min_log_level(std::getenv(name));
    if (level >= 0) return level;
  }
  return 0;
}

char severity_letter(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::INFO: return 'I';
    case LogSeverity::WARNING: return 'W';
    case LogSeverity::ERROR: return 'E';
  }
  return '?';
}

}  // namespace

int min_log_level() noexcept {
  int level = g_min_level.load(std::memory_order_relaxed);
  if (level == kUnset) {
    // Several threads may read the environment at once; they agree on the value.
    int expected = kUnset;
    g_min_level.compare_exchange_strong(expected, level_from_environment());
    level = g_min_level.load(std::memory_order_relaxed);
  }
  return level;
}

void set_min_log_level(int level) noexcept {
  g_min_level.store(std::clamp(level, 0, 3), std::memory_order_relaxed);
}

namespace internal {

int parse_min_log_level(const char* value) noexcept {
  if (value == nullptr || value[0] < '0' || value[0] > '3' || value[1] != '\0') return -1;
  return value[0] - '0';
}

std::string format_log_line(LogSeverity severity, std::chrono::system_clock::time_point time,
                            std::string_view file, int line, std::string_view message) {
  const auto since_epoch = time.time_since_epoch();
  const auto seconds = std::chrono::floor<std::chrono::seconds>(since_epoch);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds);
  const std::time_t t = seconds.count();
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char stamp[64];  // room for any int the format could print, as -O3 checks
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis.count()));
  const size_t slash = file.rfind('/');
  if (slash != std::string_view::npos) file.remove_prefix(slash + 1);
  return str_cat(severity_letter(severity), ' ', stamp, ' ', file, ':', line, "] ", message, '\n');
}

void write_log(LogSeverity severity, const char* file, int line, std::string_view message) {
  const std::string text =
      format_log_line(severity, std::chrono::system_clock::now(), file, line, message);
  // One write(2) per line: atomic with respect to other writers of the same
  // stream. The mutex keeps this process's lines whole even when the kernel
  // writes a long line in parts.
  static Mutex mu;
  MutexLock lock(mu);
  std::fflush(stderr);  // what was printed through stdio before comes first
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to report a failure to log
    done += static_cast<size_t>(n);
  }
}

}  // namespace internal
}  // namespace strata
