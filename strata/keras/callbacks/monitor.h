#pragma once
// Private helpers shared by the callbacks that watch a metric
// (ModelCheckpoint, EarlyStopping): Keras's mode handling.

#include <string>

#include "strata/base/errors.h"

namespace strata::keras::callbacks::internal {

// Keras's mode rule: "auto" means max when the monitored name contains "acc"
// (or starts with "fmeasure"), min otherwise.
inline bool monitor_maximizes(const std::string& mode, const std::string& monitor,
                              const char* who) {
  if (mode == "min") return false;
  if (mode == "max") return true;
  STRATA_CHECK_ARG(mode == "auto", who, ": mode must be \"auto\", \"min\" or \"max\", got \"", mode,
                   "\"");
  return monitor.find("acc") != std::string::npos || monitor.rfind("fmeasure", 0) == 0;
}

}  // namespace strata::keras::callbacks::internal
