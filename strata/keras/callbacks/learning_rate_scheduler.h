#pragma once
// keras.callbacks.LearningRateScheduler: sets the optimizer's learning rate
// at the start of each epoch from schedule(epoch, current_lr).
//
//   auto lr = keras::callbacks::LearningRateScheduler(
//       [](int epoch, double lr) { return epoch < 2 ? lr : lr * 0.5; });
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

}  // namespace strata::keras::callbacks
