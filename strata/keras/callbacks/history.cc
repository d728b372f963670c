#include "strata/keras/callbacks/history.h"

namespace strata::keras::callbacks {

void HistoryCallback::on_train_begin(Logs&) {
  history_.epoch.clear();
  history_.params = params();
}

void HistoryCallback::on_epoch_end(int epoch, Logs& logs) {
  history_.epoch.push_back(epoch);
  for (const auto& [name, value] : logs) history_.history[name].push_back(value);
}

}  // namespace strata::keras::callbacks
