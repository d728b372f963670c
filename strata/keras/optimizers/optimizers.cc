#include "strata/keras/optimizers/optimizers.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"

namespace strata::keras::optimizers {

std::shared_ptr<Optimizer> get(const std::string& name) {
  std::string key = name;
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (key == "sgd") return SGD();
  if (key == "adam") return Adam();
  if (key == "adamw") return AdamW();
  if (key == "rmsprop") return RMSprop();
  if (key == "adagrad") return Adagrad();
  STRATA_CHECK_ARG(false, "keras::optimizers::get: could not interpret optimizer identifier '",
                   name, "' (known: sgd, adam, adamw, rmsprop, adagrad)");
  return nullptr;
}

namespace {

nlohmann::json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// Reads one key of an optimizer config, naming the class and the key on error.
class OptimizerConfigReader {
 public:
  OptimizerConfigReader(std::string class_name, const nlohmann::json& config)
      : class_name_(std::move(class_name)), config_(config) {
    STRATA_CHECK_ARG(config.is_object(), "keras::optimizers::deserialize ", class_name_,
                     ": expected a config object, got ", config.dump());
  }
  template <typename T>
  T get_or(const char* key, T fallback) const {
    if (!config_.contains(key) || config_[key].is_null()) return fallback;
    try {
      return config_[key].get<T>();
    } catch (const nlohmann::json::exception&) {
      STRATA_CHECK_ARG(false, "keras::optimizers::deserialize ", class_name_, ": \"", key,
                       "\" has the wrong type: ", config_[key].dump());
      throw;
    }
  }
  std::optional<double> optional(const char* key) const {
    if (!config_.contains(key) || config_[key].is_null()) return std::nullopt;
    return get_or<double>(key, 0.0);
  }
  double learning_rate(double fallback) const {
    if (config_.contains("learning_rate") && config_["learning_rate"].is_object()) {
      STRATA_CHECK(UNIMPLEMENTED, false, "keras::optimizers::deserialize ", class_name_,
                   ": a learning-rate schedule (", config_["learning_rate"].dump(),
                   ") cannot be made from a config");
    }
    return get_or<double>("learning_rate", fallback);
  }
  // The OptimizerArgs fields every options struct ends with.
  template <typename Options>
  void fill_common(Options& o) const {
    if constexpr (requires { o.weight_decay = std::optional<double>(); }) {
      o.weight_decay = optional("weight_decay");
    }
    o.clipnorm = optional("clipnorm");
    o.clipvalue = optional("clipvalue");
    o.global_clipnorm = optional("global_clipnorm");
    o.name = get_or<std::string>("name", o.name);
  }

 private:
  std::string class_name_;
  const nlohmann::json& config_;
};

}  // namespace

nlohmann::json serialize(const Optimizer& optimizer) {
  STRATA_CHECK(UNIMPLEMENTED, !optimizer.learning_rate_spec().is_schedule(),
               "keras::optimizers::serialize: optimizer '", optimizer.name(),
               "' uses a learning-rate schedule, which has no config in Strata");
  const OptimizerArgs& args = optimizer.args();
  nlohmann::json c = {{"name", optimizer.name()},
                      {"weight_decay", optional_number(args.weight_decay)},
                      {"clipnorm", optional_number(args.clipnorm)},
                      {"global_clipnorm", optional_number(args.global_clipnorm)},
                      {"clipvalue", optional_number(args.clipvalue)},
                      {"use_ema", false},
                      {"ema_momentum", 0.99},
                      {"ema_overwrite_frequency", nullptr},
                      {"jit_compile", false},
                      {"is_legacy_optimizer", false},
                      {"learning_rate", optimizer.learning_rate_spec().at(0)}};
  std::string class_name;
  if (const auto* sgd = dynamic_cast<const SGDOptimizer*>(&optimizer)) {
    class_name = "SGD";
    c["momentum"] = sgd->momentum();
    c["nesterov"] = sgd->nesterov();
  } else if (const auto* adam = dynamic_cast<const AdamOptimizer*>(&optimizer)) {
    class_name = dynamic_cast<const AdamWOptimizer*>(&optimizer) ? "AdamW" : "Adam";
    c["beta_1"] = adam->beta_1();
    c["beta_2"] = adam->beta_2();
    c["epsilon"] = adam->epsilon();
    c["amsgrad"] = adam->amsgrad();
  } else if (const auto* rms = dynamic_cast<const RMSpropOptimizer*>(&optimizer)) {
    class_name = "RMSprop";
    c["rho"] = rms->rho();
    c["momentum"] = rms->momentum();
    c["epsilon"] = rms->epsilon();
    c["centered"] = rms->centered();
  } else if (const auto* adagrad = dynamic_cast<const AdagradOptimizer*>(&optimizer)) {
    class_name = "Adagrad";
    c["initial_accumulator_value"] = adagrad->initial_accumulator_value();
    c["epsilon"] = adagrad->epsilon();
  } else {
    STRATA_CHECK(UNIMPLEMENTED, false, "keras::optimizers::serialize: optimizer '",
                 optimizer.name(), "' is not one of SGD, Adam, AdamW, RMSprop, Adagrad");
  }
  return {{"module", "keras.optimizers"},
          {"class_name", class_name},
          {"config", c},
          {"registered_name", nullptr}};
}

std::shared_ptr<Optimizer> deserialize(const nlohmann::json& config) {
  if (config.is_string()) return get(config.get<std::string>());
  STRATA_CHECK_ARG(
      config.is_object() && config.contains("class_name") && config["class_name"].is_string(),
      "keras::optimizers::deserialize: expected {\"class_name\": ..., \"config\": "
      "...} or a name, got ",
      config.dump());
  const std::string cls = config["class_name"].get<std::string>();
  const nlohmann::json empty = nlohmann::json::object();
  const OptimizerConfigReader r(cls, config.contains("config") ? config["config"] : empty);
  if (cls == "SGD") {
    SGDOptions o;
    o.learning_rate = r.learning_rate(0.01);
    o.momentum = r.get_or<double>("momentum", 0.0);
    o.nesterov = r.get_or<bool>("nesterov", false);
    r.fill_common(o);
    return SGD(o);
  }
  if (cls == "Adam") {
    AdamOptions o;
    o.learning_rate = r.learning_rate(0.001);
    o.beta_1 = r.get_or<double>("beta_1", 0.9);
    o.beta_2 = r.get_or<double>("beta_2", 0.999);
    o.epsilon = r.get_or<double>("epsilon", 1e-7);
    o.amsgrad = r.get_or<bool>("amsgrad", false);
    r.fill_common(o);
    return Adam(o);
  }
  if (cls == "AdamW") {
    AdamWOptions o;
    o.learning_rate = r.learning_rate(0.001);
    o.weight_decay = r.get_or<double>("weight_decay", 0.004);
    o.beta_1 = r.get_or<double>("beta_1", 0.9);
    o.beta_2 = r.get_or<double>("beta_2", 0.999);
    o.epsilon = r.get_or<double>("epsilon", 1e-7);
    o.amsgrad = r.get_or<bool>("amsgrad", false);
    r.fill_common(o);
    return AdamW(o);
  }
  if (cls == "RMSprop") {
    RMSpropOptions o;
    o.learning_rate = r.learning_rate(0.001);
    o.rho = r.get_or<double>("rho", 0.9);
    o.momentum = r.get_or<double>("momentum", 0.0);
    o.epsilon = r.get_or<double>("epsilon", 1e-7);
    o.centered = r.get_or<bool>("centered", false);
    r.fill_common(o);
    return RMSprop(o);
  }
  if (cls == "Adagrad") {
    AdagradOptions o;
    o.learning_rate = r.learning_rate(0.001);
    o.initial_accumulator_value = r.get_or<double>("initial_accumulator_value", 0.1);
    o.epsilon = r.get_or<double>("epsilon", 1e-7);
    r.fill_common(o);
    return Adagrad(o);
  }
  STRATA_CHECK_ARG(false, "keras::optimizers::deserialize: unknown optimizer class \"", cls,
                   "\" (known: SGD, Adam, AdamW, RMSprop, Adagrad)");
  return nullptr;
}

}  // namespace strata::keras::optimizers
