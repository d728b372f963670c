#include "strata/keras/callbacks/learning_rate_scheduler.h"

#include <cmath>
#include <iostream>
#include <utility>

#include "strata/base/errors.h"
#include "strata/keras/model.h"

namespace strata::keras::callbacks {

LearningRateSchedulerCallback::LearningRateSchedulerCallback(Schedule schedule, int verbose)
    : schedule_(std::move(schedule)), verbose_(verbose) {
  STRATA_CHECK_ARG(schedule_ != nullptr, "LearningRateScheduler: schedule is empty");
}

std::shared_ptr<LearningRateSchedulerCallback> LearningRateScheduler(Schedule schedule,
                                                                     int verbose) {
  return std::make_shared<LearningRateSchedulerCallback>(std::move(schedule), verbose);
}

std::shared_ptr<LearningRateSchedulerCallback> LearningRateScheduler(EpochSchedule schedule,
                                                                     int verbose) {
  STRATA_CHECK_ARG(schedule != nullptr, "LearningRateScheduler: schedule is empty");
  return LearningRateScheduler(
      [schedule = std::move(schedule)](int epoch, double) { return schedule(epoch); }, verbose);
}

void LearningRateSchedulerCallback::on_epoch_begin(int epoch, Logs&) {
  const auto& opt = model()->optimizer();
  STRATA_CHECK_ARG(opt != nullptr,
                   "LearningRateScheduler: the model has no optimizer (compile it first)");
  const double lr = schedule_(epoch, opt->learning_rate());
  STRATA_CHECK_ARG(std::isfinite(lr), "LearningRateScheduler: the schedule returned ", lr,
                   " for epoch ", epoch);
  opt->set_learning_rate(lr);
  if (verbose_ > 0) {
    std::cout << "\nEpoch " << (epoch + 1) << ": LearningRateScheduler setting learning rate to "
              << lr << ".\n";
  }
}

void LearningRateSchedulerCallback::on_epoch_end(int, Logs& logs) {
  logs.set("lr", model()->optimizer()->learning_rate());
}

}  // namespace strata::keras::callbacks
