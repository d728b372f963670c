#pragma once
// keras.callbacks.Callback and CallbackList: hooks the training loop calls.
//
//   class PrintLoss : public keras::callbacks::Callback {
//    public:
//     void on_epoch_end(int epoch, keras::Logs& logs) override {
//       std::cout << epoch << ": " << logs.at("loss") << "\n";
//       if (logs.at("loss") < 0.01) model()->stop_training = true;
//     }
//   };
//   model->fit(ds, {.epochs = 5, .callbacks = {std::make_shared<PrintLoss>()}});
//
// Hooks and their arguments are Keras's: epoch and batch indices are 0-based;
// `logs` holds the running metric results ("loss", compiled metrics, and at
// epoch end "val_*"). Logs are passed by reference, as Keras passes its dict:
// a callback may add entries (LearningRateScheduler adds "lr") that later
// callbacks — History among them — see.
//
// A callback is bound to one model for the duration of a fit/evaluate/predict
// call (model() is a non-owning pointer, valid inside the hooks).
// Thread-safety: hooks run on the thread that called fit, one at a time.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/allocator.h"

namespace strata::keras {

class Model;

// An ordered name -> value map (Keras's logs dict; insertion order is the
// display order: loss first, then metrics in compile order).
class Logs {
 public:
  using Entry = std::pair<std::string, double>;
  Logs() = default;
  Logs(std::initializer_list<Entry> entries) {
    for (const Entry& e : entries) set(e.first, e.second);
  }
  // Sets `name` (keeping its position when already present).
  void set(const std::string& name, double value);
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  std::optional<double> get(const std::string& name) const;
  // InvalidArgumentError naming the key and the keys present when missing.
  double at(const std::string& name) const;
  void erase(const std::string& name);
  bool empty() const noexcept { return entries_.empty(); }
  size_t size() const noexcept { return entries_.size(); }
  using const_iterator = PooledVector<Entry>::const_iterator;
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }
  std::vector<std::string> keys() const;

 private:
  const Entry* find(const std::string& name) const;
  // In the buffer cache: fit makes a step's logs on every step.
  PooledVector<Entry> entries_;
};

namespace callbacks {

// Keras's callback.params.
struct CallbackParams {
  int verbose = 1;
  int epochs = 1;
  std::optional<int64_t> steps = std::nullopt;  // steps per epoch when known
};

class Callback {
 public:
  Callback() = default;
  virtual ~Callback() = default;
  Callback(const Callback&) = delete;
  Callback& operator=(const Callback&) = delete;

  void set_model(Model* model) { model_ = model; }
  Model* model() const noexcept { return model_; }
  void set_params(const CallbackParams& params) { params_ = params; }
  const CallbackParams& params() const noexcept { return params_; }

  virtual void on_train_begin(Logs& logs) { (void)logs; }
  virtual void on_train_end(Logs& logs) { (void)logs; }
  virtual void on_epoch_begin(int epoch, Logs& logs) { (void)epoch, (void)logs; }
  virtual void on_epoch_end(int epoch, Logs& logs) { (void)epoch, (void)logs; }
  virtual void on_train_batch_begin(int64_t batch, Logs& logs) { (void)batch, (void)logs; }
  virtual void on_train_batch_end(int64_t batch, Logs& logs) { (void)batch, (void)logs; }
  virtual void on_test_begin(Logs& logs) { (void)logs; }
  virtual void on_test_end(Logs& logs) { (void)logs; }
  virtual void on_test_batch_begin(int64_t batch, Logs& logs) { (void)batch, (void)logs; }
  virtual void on_test_batch_end(int64_t batch, Logs& logs) { (void)batch, (void)logs; }
  virtual void on_predict_begin(Logs& logs) { (void)logs; }
  virtual void on_predict_end(Logs& logs) { (void)logs; }
  virtual void on_predict_batch_begin(int64_t batch, Logs& logs) { (void)batch, (void)logs; }
  virtual void on_predict_batch_end(int64_t batch, Logs& logs) { (void)batch, (void)logs; }

 private:
  Model* model_ = nullptr;
  CallbackParams params_;
};

using CallbackPtr = std::shared_ptr<Callback>;

// keras.callbacks.CallbackList: calls every callback's hook in order. fit
// builds one from the user's callbacks plus a ProgbarLogger first (when
// verbose) and the History recorder last, as Keras does.
class CallbackList {
 public:
  CallbackList(std::vector<CallbackPtr> callbacks, Model* model, const CallbackParams& params);
  void append(CallbackPtr callback);
  const std::vector<CallbackPtr>& callbacks() const noexcept { return callbacks_; }

  void on_train_begin(Logs& logs);
  void on_train_end(Logs& logs);
  void on_epoch_begin(int epoch, Logs& logs);
  void on_epoch_end(int epoch, Logs& logs);
  void on_train_batch_begin(int64_t batch, Logs& logs);
  void on_train_batch_end(int64_t batch, Logs& logs);
  void on_test_begin(Logs& logs);
  void on_test_end(Logs& logs);
  void on_test_batch_begin(int64_t batch, Logs& logs);
  void on_test_batch_end(int64_t batch, Logs& logs);
  void on_predict_begin(Logs& logs);
  void on_predict_end(Logs& logs);
  void on_predict_batch_begin(int64_t batch, Logs& logs);
  void on_predict_batch_end(int64_t batch, Logs& logs);

 private:
  std::vector<CallbackPtr> callbacks_;
  Model* model_;
  CallbackParams params_;
};

}  // namespace callbacks
}  // namespace strata::keras
