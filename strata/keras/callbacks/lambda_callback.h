#pragma once
// keras.callbacks.LambdaCallback: a callback from plain functions.
//
//   auto cb = keras::callbacks::LambdaCallback({
//       .on_epoch_end = [](int epoch, keras::Logs& logs) { std::cout << logs.at("loss") << "\n";
//       }});
//
// Fields in Keras's order; on_batch_begin/end are the training batch hooks
// (as Keras's). Unset functions do nothing.
//
// Thread-safety: the functions run on the fit thread.

#include <cstdint>
#include <functional>
#include <memory>

#include "strata/keras/callbacks/callback.h"

namespace strata::keras::callbacks {

struct LambdaCallbackOptions {
  std::function<void(int epoch, Logs& logs)> on_epoch_begin = nullptr;
  std::function<void(int epoch, Logs& logs)> on_epoch_end = nullptr;
  std::function<void(int64_t batch, Logs& logs)> on_batch_begin = nullptr;
  std::function<void(int64_t batch, Logs& logs)> on_batch_end = nullptr;
  std::function<void(Logs& logs)> on_train_begin = nullptr;
  std::function<void(Logs& logs)> on_train_end = nullptr;
};

class LambdaCallbackImpl : public Callback {
 public:
  explicit LambdaCallbackImpl(LambdaCallbackOptions fns) : fns_(std::move(fns)) {}
  void on_epoch_begin(int epoch, Logs& logs) override {
    if (fns_.on_epoch_begin) fns_.on_epoch_begin(epoch, logs);
  }
  void on_epoch_end(int epoch, Logs& logs) override {
    if (fns_.on_epoch_end) fns_.on_epoch_end(epoch, logs);
  }
  void on_train_batch_begin(int64_t batch, Logs& logs) override {
    if (fns_.on_batch_begin) fns_.on_batch_begin(batch, logs);
  }
  void on_train_batch_end(int64_t batch, Logs& logs) override {
    if (fns_.on_batch_end) fns_.on_batch_end(batch, logs);
  }
  void on_train_begin(Logs& logs) override {
    if (fns_.on_train_begin) fns_.on_train_begin(logs);
  }
  void on_train_end(Logs& logs) override {
    if (fns_.on_train_end) fns_.on_train_end(logs);
  }

 private:
  LambdaCallbackOptions fns_;
};

inline std::shared_ptr<LambdaCallbackImpl> LambdaCallback(LambdaCallbackOptions fns = {}) {
  return std::make_shared<LambdaCallbackImpl>(std::move(fns));
}

}  // namespace strata::keras::callbacks
