#pragma once
// keras.callbacks.LearningRateScheduler: sets the optimizer's learning rate
// at the start of each epoch from schedule(epoch, current_lr), or schedule(epoch)
// (Keras passes the current rate only to a schedule that takes two arguments).
//
//   auto lr = keras::callbacks::LearningRateScheduler(
//       [](int epoch, double lr) { return epoch < 2 ? lr : lr * 0.5; });
//   auto decay = keras::callbacks::LearningRateScheduler(
//       [](int epoch) { return epoch < 3 ? 1e-3 : epoch < 7 ? 1e-4 : 1e-5; });
//   model->fit(ds, {.epochs = 5, .callbacks = {lr}});   // logs gain "lr"
//
// As Keras: the new rate replaces a schedule by a constant, and each epoch's
// logs get "lr" (the rate used). A non-finite result is InvalidArgumentError.
//
// Thread-safety: hooks run on the fit thread.

#include <functional>
#include <memory>

#include "strata/keras/callbacks/callback.h"

namespace strata::keras::callbacks {

using Schedule = std::function<double(int epoch, double lr)>;
using EpochSchedule = std::function<double(int epoch)>;

class LearningRateSchedulerCallback : public Callback {
 public:
  LearningRateSchedulerCallback(Schedule schedule, int verbose);
  void on_epoch_begin(int epoch, Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;

 private:
  Schedule schedule_;
  int verbose_;
};

std::shared_ptr<LearningRateSchedulerCallback> LearningRateScheduler(Schedule schedule,
                                                                     int verbose = 0);
std::shared_ptr<LearningRateSchedulerCallback> LearningRateScheduler(EpochSchedule schedule,
                                                                     int verbose = 0);

}  // namespace strata::keras::callbacks
