#pragma once
// keras.callbacks.ProgbarLogger: prints "Epoch 1/5" and a Progbar per epoch
// (fit adds one first when verbose != 0), and a bar for evaluate/predict
// called on their own (not for fit's validation, as Keras).
//
//   model->fit(ds, {.epochs = 5, .verbose = 2});   // one line per epoch
//   keras::callbacks::ProgbarLogger({.out = &log_stream});
//
// Thread-safety: hooks run on the fit thread.

#include <memory>
#include <optional>
#include <ostream>

#include "strata/keras/callbacks/callback.h"
#include "strata/keras/progbar.h"

namespace strata::keras::callbacks {

struct ProgbarLoggerOptions {
  std::string count_mode = "steps";  // Keras: "steps" (the only mode of TF 2.x's fit)
  // Strata: where to print (nullptr = std::cout) and whether to redraw in place
  // (unset = isatty(stdout)); the verbosity is the fit's.
  std::ostream* out = nullptr;
  std::optional<bool> dynamic_display = std::nullopt;
};

class ProgbarLoggerCallback : public Callback {
 public:
  explicit ProgbarLoggerCallback(const ProgbarLoggerOptions& options = {});
  void on_train_begin(Logs& logs) override;
  void on_train_end(Logs& logs) override;
  void on_epoch_begin(int epoch, Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_batch_end(int64_t batch, Logs& logs) override;
  void on_test_begin(Logs& logs) override;
  void on_test_end(Logs& logs) override;
  void on_test_batch_end(int64_t batch, Logs& logs) override;
  void on_predict_begin(Logs& logs) override;
  void on_predict_end(Logs& logs) override;
  void on_predict_batch_end(int64_t batch, Logs& logs) override;

 private:
  void start_bar();
  void finish(const Logs& logs);
  ProgbarLoggerOptions options_;
  std::unique_ptr<Progbar> bar_;
  int64_t seen_ = 0;
  std::optional<int64_t> learned_target_;
  bool in_fit_ = false;
};

std::shared_ptr<ProgbarLoggerCallback> ProgbarLogger(const ProgbarLoggerOptions& options = {});

}  // namespace strata::keras::callbacks
