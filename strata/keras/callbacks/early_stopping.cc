#include "strata/keras/callbacks/early_stopping.h"

#include <iostream>
#include <limits>

#include "strata/base/errors.h"
#include "strata/base/logging.h"
#include "strata/keras/callbacks/monitor.h"
#include "strata/keras/model.h"

namespace strata::keras::callbacks {

EarlyStoppingCallback::EarlyStoppingCallback(const EarlyStoppingOptions& options)
    : options_(options),
      maximize_(internal::monitor_maximizes(options.mode, options.monitor, "EarlyStopping")) {
  STRATA_CHECK_ARG(options.patience >= 0, "EarlyStopping: patience must be >= 0, got ",
                   options.patience);
  // Keras keeps min_delta's magnitude and gives it the mode's sign.
  options_.min_delta = std::abs(options.min_delta) * (maximize_ ? 1.0 : -1.0);
}

std::shared_ptr<EarlyStoppingCallback> EarlyStopping(const EarlyStoppingOptions& options) {
  return std::make_shared<EarlyStoppingCallback>(options);
}

bool EarlyStoppingCallback::is_improvement(double value, double reference) const {
  const double shifted = value - options_.min_delta;
  return maximize_ ? shifted > reference : shifted < reference;
}

void EarlyStoppingCallback::on_train_begin(Logs&) {
  wait_ = 0;
  stopped_epoch_ = 0;
  best_epoch_ = 0;
  best_ = maximize_ ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  best_weights_.clear();
}

void EarlyStoppingCallback::on_epoch_end(int epoch, Logs& logs) {
  const std::optional<double> current = logs.get(options_.monitor);
  if (!current) {
    std::string available;
    for (const auto& [k, v] : logs) available += str_cat(available.empty() ? "" : ",", k);
    STRATA_LOG(WARNING, "Early stopping conditioned on metric `", options_.monitor,
               "` which is not available. Available metrics are: ", available);
    return;
  }
  if (epoch < options_.start_from_epoch) return;
  if (options_.restore_best_weights && best_weights_.empty())
    best_weights_ = model()->get_weights();
  ++wait_;
  if (is_improvement(*current, best_)) {
    best_ = *current;
    best_epoch_ = epoch;
    if (options_.restore_best_weights) best_weights_ = model()->get_weights();
    if (!options_.baseline || is_improvement(*current, *options_.baseline)) wait_ = 0;
    return;
  }
  if (wait_ >= options_.patience && epoch > 0) {
    stopped_epoch_ = epoch;
    model()->stop_training = true;
    if (options_.restore_best_weights && !best_weights_.empty()) {
      if (options_.verbose > 0) {
        std::cout << "Restoring model weights from the end of the best epoch: " << (best_epoch_ + 1)
                  << ".\n";
      }
      model()->set_weights(best_weights_);
    }
  }
}

void EarlyStoppingCallback::on_train_end(Logs&) {
  if (stopped_epoch_ > 0 && options_.verbose > 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "Epoch %05d: early stopping\n", stopped_epoch_ + 1);
    std::cout << buf;
  }
}

}  // namespace strata::keras::callbacks
