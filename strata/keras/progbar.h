#pragma once
// keras.utils.Progbar: the progress display of fit/evaluate/predict.
//
//   keras::Progbar bar(/*target=*/1875, {.verbose = 1});
//   for (int64_t step = 1; step <= 1875; ++step) bar.update(step, {{"loss", 0.42}});
//   // 1875/1875 [==============================] - 5s 3ms/step - loss: 0.4200
//
// verbose 1: a bar, redrawn in place ("\r") when the output is a terminal
// (dynamic display) and printed only when finalised otherwise, so logs get one
// line per epoch; verbose 2: one line per epoch "1875/1875 - 5s - loss: ...
// - 3ms/step". Values are shown as Keras shows stateful metrics: the latest
// value, "%.4f" (or "%.4e" when |v| <= 1e-3). ETA and time per step as Keras.
//
// Thread-safety: one thread at a time.

#include <chrono>
#include <cstdint>
#include <iostream>
#include <optional>
#include <ostream>
#include <string>

#include "strata/keras/callbacks/callback.h"

namespace strata::keras {

struct ProgbarOptions {
  int width = 30;
  int verbose = 1;
  double interval = 0.05;  // seconds between redraws
  std::string unit_name = "step";
  // Output stream; nullptr = std::cout.
  std::ostream* out = nullptr;
  // Redraw in place; unset = whether stdout is a terminal (isatty), as Keras.
  std::optional<bool> dynamic_display = std::nullopt;
};

class Progbar {
 public:
  // `target`: the number of steps, unknown when nullopt ("Unknown" display).
  explicit Progbar(std::optional<int64_t> target, const ProgbarOptions& options = {});
  // Shows progress at step `current` with these values; `finalize` ends the line
  // (defaults to current >= target).
  void update(int64_t current, const Logs& values = {},
              std::optional<bool> finalize = std::nullopt);

  // Keras's time formatting: " 3ms/step", " 12us/step", " 2s/step".
  static std::string format_time(double seconds_per_unit, const std::string& unit_name);
  // Keras's value formatting: "0.4200" or "1.0000e-04".
  static std::string format_value(double v);

 private:
  double seconds_since_start() const;
  std::optional<int64_t> target_;
  ProgbarOptions options_;
  std::ostream* out_;
  bool dynamic_;
  std::chrono::steady_clock::time_point start_;
  double last_update_ = -1.0;
  size_t total_width_ = 0;
  int64_t seen_so_far_ = 0;
  bool finalized_ = false;
};

}  // namespace strata::keras
