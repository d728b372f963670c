#pragma once
// keras.callbacks.CSVLogger: one CSV row per epoch.
//
//   model->fit(ds, {.epochs = 3, .callbacks = {keras::callbacks::CSVLogger("/tmp/train.csv")}});
//   // epoch,loss,val_loss\r\n
//   // 0,0.6931472,0.6931472\r\n
//
// As Keras: the columns are "epoch" then the log names sorted (fixed at the
// first epoch; a later missing value is written "NA"), values as Python's str
// of the float32 log (shortest round-trip text); rows end in "\r\n", the
// line terminator of the csv.excel dialect Keras writes with. append=true keeps an existing file
// and writes no header when it already has content. Each epoch rewrites the whole file atomically
// (temporary file + rename), so a reader never sees a half-written row.
//
// Thread-safety: hooks run on the fit thread.

#include <memory>
#include <string>
#include <vector>

#include "strata/keras/callbacks/callback.h"

namespace strata::keras::callbacks {

class CSVLoggerCallback : public Callback {
 public:
  CSVLoggerCallback(std::string filename, std::string separator, bool append);
  void on_train_begin(Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;

 private:
  std::string filename_;
  std::string separator_;
  bool append_;
  std::string contents_;
  std::vector<std::string> keys_;
  bool header_written_ = false;
};

std::shared_ptr<CSVLoggerCallback> CSVLogger(std::string filename, std::string separator = ",",
                                             bool append = false);

}  // namespace strata::keras::callbacks
