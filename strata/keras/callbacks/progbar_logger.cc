#include "strata/keras/callbacks/progbar_logger.h"

#include <iostream>

namespace strata::keras::callbacks {

ProgbarLoggerCallback::ProgbarLoggerCallback(const ProgbarLoggerOptions& options)
    : options_(options) {}

std::shared_ptr<ProgbarLoggerCallback> ProgbarLogger(const ProgbarLoggerOptions& options) {
  return std::make_shared<ProgbarLoggerCallback>(options);
}

void ProgbarLoggerCallback::start_bar() {
  seen_ = 0;
  const std::optional<int64_t> target = params().steps ? params().steps : learned_target_;
  bar_ = std::make_unique<Progbar>(target,
                                   ProgbarOptions{.verbose = params().verbose,
                                                  .out = options_.out,
                                                  .dynamic_display = options_.dynamic_display});
}

void ProgbarLoggerCallback::finish(const Logs& logs) {
  if (bar_) bar_->update(seen_, logs, /*finalize=*/true);
  bar_.reset();
}

void ProgbarLoggerCallback::on_train_begin(Logs&) { in_fit_ = true; }
void ProgbarLoggerCallback::on_train_end(Logs&) { in_fit_ = false; }

void ProgbarLoggerCallback::on_epoch_begin(int epoch, Logs&) {
  if (params().verbose != 0 && params().epochs > 1) {
    std::ostream& out = options_.out != nullptr ? *options_.out : std::cout;
    out << "Epoch " << (epoch + 1) << "/" << params().epochs << "\n";
    out.flush();
  }
  start_bar();
}

void ProgbarLoggerCallback::on_train_batch_end(int64_t batch, Logs& logs) {
  seen_ = batch + 1;
  if (bar_) bar_->update(seen_, logs, /*finalize=*/false);
}

void ProgbarLoggerCallback::on_epoch_end(int, Logs& logs) {
  // Keras: an unknown epoch length is learned from the first epoch.
  if (!params().steps && !learned_target_) learned_target_ = seen_;
  finish(logs);
}

void ProgbarLoggerCallback::on_test_begin(Logs&) {
  if (!in_fit_) start_bar();
}
void ProgbarLoggerCallback::on_test_batch_end(int64_t batch, Logs& logs) {
  if (in_fit_) return;
  seen_ = batch + 1;
  if (bar_) bar_->update(seen_, logs, /*finalize=*/false);
}
void ProgbarLoggerCallback::on_test_end(Logs& logs) {
  if (!in_fit_) finish(logs);
}

void ProgbarLoggerCallback::on_predict_begin(Logs&) { start_bar(); }
void ProgbarLoggerCallback::on_predict_batch_end(int64_t batch, Logs&) {
  seen_ = batch + 1;
  if (bar_) bar_->update(seen_, {}, /*finalize=*/false);
}
void ProgbarLoggerCallback::on_predict_end(Logs&) { finish({}); }

}  // namespace strata::keras::callbacks
