#pragma once
// keras.callbacks.History: records every epoch's logs. fit adds one as its
// last callback and returns its contents (keras::History, model.h).
//
//   keras::History h = model->fit(ds, {.epochs = 3});
//   h.epoch;                  // {0, 1, 2}
//   h.history["val_loss"];    // three values
//
// Thread-safety: hooks run on the fit thread.

#include <memory>

#include "strata/keras/callbacks/callback.h"
#include "strata/keras/model.h"

namespace strata::keras::callbacks {

class HistoryCallback : public Callback {
 public:
  void on_train_begin(Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  const keras::History& history() const noexcept { return history_; }

 private:
  keras::History history_;
};

}  // namespace strata::keras::callbacks
