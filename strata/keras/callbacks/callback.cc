#include "strata/keras/callbacks/callback.h"

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"

namespace strata::keras {

void Logs::set(const std::string& name, double value) {
  for (Entry& e : entries_) {
    if (e.first == name) {
      e.second = value;
      return;
    }
  }
  entries_.emplace_back(name, value);
}

const Logs::Entry* Logs::find(const std::string& name) const {
  for (const Entry& e : entries_) {
    if (e.first == name) return &e;
  }
  return nullptr;
}

std::optional<double> Logs::get(const std::string& name) const {
  const Entry* e = find(name);
  if (e == nullptr) return std::nullopt;
  return e->second;
}

std::vector<std::string> Logs::keys() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.first);
  return out;
}

double Logs::at(const std::string& name) const {
  const Entry* e = find(name);
  if (e == nullptr) {
    std::string present;
    for (const Entry& k : entries_) present += (present.empty() ? "" : ", ") + k.first;
    STRATA_CHECK_ARG(false, "Logs: no entry '", name, "'; available: [", present, "]");
  }
  return e->second;
}

void Logs::erase(const std::string& name) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first == name) {
      entries_.erase(it);
      return;
    }
  }
}

namespace callbacks {

CallbackList::CallbackList(std::vector<CallbackPtr> callbacks, Model* model,
                           const CallbackParams& params)
    : model_(model), params_(params) {
  for (CallbackPtr& cb : callbacks) append(std::move(cb));
}

void CallbackList::append(CallbackPtr callback) {
  STRATA_CHECK_ARG(callback != nullptr, "CallbackList: expected a callback, got nullptr");
  callback->set_model(model_);
  callback->set_params(params_);
  callbacks_.push_back(std::move(callback));
}

#define STRATA_DISPATCH(hook, ...) \
  for (const CallbackPtr& cb : callbacks_) cb->hook(__VA_ARGS__)

void CallbackList::on_train_begin(Logs& logs) { STRATA_DISPATCH(on_train_begin, logs); }
void CallbackList::on_train_end(Logs& logs) { STRATA_DISPATCH(on_train_end, logs); }
void CallbackList::on_epoch_begin(int epoch, Logs& logs) {
  STRATA_DISPATCH(on_epoch_begin, epoch, logs);
}
void CallbackList::on_epoch_end(int epoch, Logs& logs) {
  STRATA_DISPATCH(on_epoch_end, epoch, logs);
}
void CallbackList::on_train_batch_begin(int64_t batch, Logs& logs) {
  STRATA_DISPATCH(on_train_batch_begin, batch, logs);
}
void CallbackList::on_train_batch_end(int64_t batch, Logs& logs) {
  STRATA_DISPATCH(on_train_batch_end, batch, logs);
}
void CallbackList::on_test_begin(Logs& logs) { STRATA_DISPATCH(on_test_begin, logs); }
void CallbackList::on_test_end(Logs& logs) { STRATA_DISPATCH(on_test_end, logs); }
void CallbackList::on_test_batch_begin(int64_t batch, Logs& logs) {
  STRATA_DISPATCH(on_test_batch_begin, batch, logs);
}
void CallbackList::on_test_batch_end(int64_t batch, Logs& logs) {
  STRATA_DISPATCH(on_test_batch_end, batch, logs);
}
void CallbackList::on_predict_begin(Logs& logs) { STRATA_DISPATCH(on_predict_begin, logs); }
void CallbackList::on_predict_end(Logs& logs) { STRATA_DISPATCH(on_predict_end, logs); }
void CallbackList::on_predict_batch_begin(int64_t batch, Logs& logs) {
  STRATA_DISPATCH(on_predict_batch_begin, batch, logs);
}
void CallbackList::on_predict_batch_end(int64_t batch, Logs& logs) {
  STRATA_DISPATCH(on_predict_batch_end, batch, logs);
}

#undef STRATA_DISPATCH

}  // namespace callbacks
}  // namespace strata::keras
