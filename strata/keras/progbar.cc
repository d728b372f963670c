#include "strata/keras/progbar.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace strata::keras {
namespace {

std::string printf_string(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

int num_digits(int64_t n) { return n <= 0 ? 1 : int(std::floor(std::log10(double(n)))) + 1; }

std::string padded(int64_t v, int width) {
  std::string s = std::to_string(v);
  return s.size() < size_t(width) ? std::string(width - s.size(), ' ') + s : s;
}

}  // namespace

Progbar::Progbar(std::optional<int64_t> target, const ProgbarOptions& options)
    : target_(target),
      options_(options),
      out_(options.out != nullptr ? options.out : &std::cout),
      dynamic_(options.dynamic_display.value_or(isatty(STDOUT_FILENO) != 0)),
      start_(std::chrono::steady_clock::now()) {}

double Progbar::seconds_since_start() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Progbar::format_time(double t, const std::string& unit) {
  if (t >= 1 || t == 0) return printf_string(" %.0fs/", t) + unit;
  if (t >= 1e-3) return printf_string(" %.0fms/", t * 1e3) + unit;
  return printf_string(" %.0fus/", t * 1e6) + unit;
}

std::string Progbar::format_value(double v) {
  return std::abs(v) > 1e-3 ? printf_string("%.4f", v) : printf_string("%.4e", v);
}

void Progbar::update(int64_t current, const Logs& values, std::optional<bool> finalize_arg) {
  if (finalized_) return;
  const bool finalize = finalize_arg.value_or(target_.has_value() && current >= *target_);
  const double now = seconds_since_start();
  // Keras estimates the step time from the steps since the start.
  const double per_unit = current > 0 ? now / double(current) : 0.0;
  seen_so_far_ = current;
  std::string metrics;
  for (const auto& [name, v] : values) metrics += " - " + name + ": " + format_value(v);

  if (options_.verbose == 1) {
    if (!finalize && last_update_ >= 0 && now - last_update_ < options_.interval) return;
    last_update_ = now;
    // Without a terminal, intermediate states are not printed: one line per epoch.
    if (!dynamic_ && !finalize) return;
    std::string bar;
    if (target_) {
      const int digits = num_digits(*target_);
      bar = padded(current, digits) + "/" + std::to_string(*target_) + " [";
      const double prog = *target_ > 0 ? double(current) / double(*target_) : 1.0;
      const int prog_width = int(options_.width * prog);
      if (prog_width > 0) {
        bar += std::string(prog_width - 1, '=');
        bar += current < *target_ ? '>' : '=';
      }
      bar += std::string(std::max(0, options_.width - prog_width), '.');
      bar += "]";
    } else {
      bar = padded(current, 7) + "/Unknown";
    }
    std::string info = printf_string(" - %.0fs", now);
    if (!target_ || finalize) {
      info += format_time(per_unit, options_.unit_name);
    } else {
      const double eta = per_unit * double(*target_ - current);
      char buf[64];
      if (eta > 3600) {
        std::snprintf(buf, sizeof(buf), "%d:%02d:%02d", int(eta) / 3600, (int(eta) % 3600) / 60,
                      int(eta) % 60);
      } else if (eta > 60) {
        std::snprintf(buf, sizeof(buf), "%d:%02d", int(eta) / 60, int(eta) % 60);
      } else {
        std::snprintf(buf, sizeof(buf), "%ds", int(eta));
      }
      info = std::string(" - ETA: ") + buf;
    }
    info += metrics;
    std::string line = bar + info;
    const size_t prev = total_width_;
    total_width_ = line.size();
    if (dynamic_) {
      *out_ << '\r';
      // Blank out the rest of a longer previous line.
      if (prev > line.size()) line += std::string(prev - line.size(), ' ');
    }
    *out_ << line;
    if (finalize) *out_ << '\n';
    out_->flush();
  } else if (options_.verbose == 2 && finalize) {
    const int digits = target_ ? num_digits(*target_) : 7;
    std::string line = padded(current, digits) + "/" +
                       (target_ ? std::to_string(*target_) : std::string("Unknown"));
    line +=
        printf_string(" - %.0fs", now) + metrics + " -" + format_time(per_unit, options_.unit_name);
    *out_ << line << '\n';
    out_->flush();
  }
  if (finalize) finalized_ = true;
}

}  // namespace strata::keras
