#pragma once
// keras.callbacks.EarlyStopping: stops fit when a monitored log stops improving.
//
//   auto stop = keras::callbacks::EarlyStopping({.monitor = "val_loss", .patience = 2,
//                                                .restore_best_weights = true});
//   model->fit(ds, {.epochs = 100, .callbacks = {stop}, .validation_data = val});
//   stop->stopped_epoch();   // 0-based epoch at which training stopped (0 = never)
//
// Keras 2 semantics: an epoch improves when (current - min_delta) beats the
// best (min mode; current + min_delta for max; mode "auto" = max for names
// containing "acc"); each epoch without improvement increments `wait`, and
// when wait >= patience (after the first epoch) training stops. With a
// baseline, improvements that do not beat the baseline do not reset wait.
// restore_best_weights sets the weights of the best epoch when stopping (the
// first epoch's weights if none improved). Epochs before start_from_epoch are
// not monitored. A missing monitored value is skipped with a warning.
//
// Thread-safety: hooks run on the fit thread.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/keras/callbacks/callback.h"

namespace strata::keras::callbacks {

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0.0;
  int patience = 0;
  int verbose = 0;
  std::string mode = "auto";
  std::optional<double> baseline = std::nullopt;
  bool restore_best_weights = false;
  int start_from_epoch = 0;
};

class EarlyStoppingCallback : public Callback {
 public:
  explicit EarlyStoppingCallback(const EarlyStoppingOptions& options);
  void on_train_begin(Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_end(Logs& logs) override;
  int stopped_epoch() const noexcept { return stopped_epoch_; }
  int best_epoch() const noexcept { return best_epoch_; }
  double best() const noexcept { return best_; }

 private:
  bool is_improvement(double value, double reference) const;
  EarlyStoppingOptions options_;
  bool maximize_;
  int wait_ = 0;
  int stopped_epoch_ = 0;
  int best_epoch_ = 0;
  double best_ = 0.0;
  std::vector<Tensor> best_weights_;
};

std::shared_ptr<EarlyStoppingCallback> EarlyStopping(const EarlyStoppingOptions& options = {});

}  // namespace strata::keras::callbacks
