#include "strata/keras/saving/saving_api.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/base/logging.h"
#include "strata/base/str_cat.h"
#include "strata/keras/functional.h"
#include "strata/keras/model.h"
#include "strata/keras/weights_io.h"

namespace strata::keras::saving {
namespace {

// The compile config, or null (with the reason) when it has none.
nlohmann::json compile_config_or_null(const Model& model, std::string* why) {
  if (!model.compiled()) return nullptr;
  try {
    return model.get_compile_config();
  } catch (const UnimplementedError& e) {
    *why = e.what();
    return nullptr;
  }
}

[[noreturn]] void malformed(const std::string& path, const std::string& field,
                            const std::string& what) {
  throw DataLossError(
      str_cat("load_model('", path, "'): the saved config's field '", field, "' ", what));
}

}  // namespace

namespace {

// Keras 3's config.json object; `why` says why the compile config is null.
nlohmann::json model_config(const Model& model, std::string* why) {
  nlohmann::json compile_config = compile_config_or_null(model, why);
  nlohmann::json out = {{"module", "keras"},
                        {"class_name", model.class_name()},
                        {"config", model.get_config()},
                        {"registered_name", nullptr},
                        {"compile_config", compile_config}};
  const std::string registered = get_registered_name(model.class_name());
  if (registered != model.class_name()) out["registered_name"] = registered;
  return out;
}

}  // namespace

nlohmann::json serialize_model(const Model& model) {
  std::string why;
  return model_config(model, &why);
}

void save_model(const Model& model, const std::string& filepath) {
  std::string config;
  try {
    std::string why;
    config = model_config(model, &why).dump();
    if (!why.empty()) {
      STRATA_LOG(WARNING, "save_model('", filepath, "'): model '", model.name(),
                 "' is saved without its compile state (load_model will not compile it): ", why);
    }
  } catch (const UnimplementedError& e) {
    STRATA_LOG(WARNING, "save_model('", filepath, "'): model '", model.name(),
               "' has no config, so its architecture is not saved (load it with "
               "load_training_state into a model built in code): ",
               e.what());
  }
  keras::save_model(model, filepath, config);
}

std::shared_ptr<Model> load_model(const std::string& filepath, const LoadModelOptions& options) {
  const WeightsFile f = read_weights_file(filepath);
  STRATA_CHECK_ARG(f.kind == "model", "load_model('", filepath, "'): the file is of kind '", f.kind,
                   "' (written by ", f.kind == "weights" ? "save_weights" : "BackupAndRestore",
                   "), which holds no architecture; load it with load_weights into a model "
                   "built in code, or save the model with model.save");
  STRATA_CHECK_ARG(!f.config.empty(), "load_model('", filepath,
                   "'): the file holds no architecture (the model had no get_config() when it "
                   "was saved); load it with load_training_state into a model built in code");
  const nlohmann::json config = nlohmann::json::parse(f.config);
  if (!config.contains("class_name") || !config["class_name"].is_string())
    malformed(filepath, "class_name", "is missing or not a string");
  if (!config.contains("config") || !config["config"].is_object())
    malformed(filepath, "config", "is missing or not an object");
  nlohmann::json wrapped = {{"class_name", config["class_name"]}, {"config", config["config"]}};
  if (config.contains("registered_name") && config["registered_name"].is_string())
    wrapped["registered_name"] = config["registered_name"];

  std::shared_ptr<Model> model;
  try {
    model = models::model_from_config(wrapped, options.custom_objects);
  } catch (const InvalidArgumentError& e) {
    malformed(filepath, "config", str_cat("cannot be read: ", e.what()));
  } catch (const Error& e) {
    throw_error(e.code(), str_cat("load_model('", filepath, "'): ", e.what()));
  }
  const bool compile =
      options.compile && config.contains("compile_config") && !config["compile_config"].is_null();
  if (compile) {
    if (!config["compile_config"].is_object())
      malformed(filepath, "compile_config", "is not an object");
    try {
      model->compile_from_config(config["compile_config"]);
    } catch (const InvalidArgumentError& e) {
      malformed(filepath, "compile_config", str_cat("cannot be read: ", e.what()));
    }
  } else if (options.compile && !f.optimizer.empty()) {
    STRATA_LOG(WARNING, "load_model('", filepath,
               "'): the file has no compile config, so the model is not compiled and its "
               "optimizer variables are not restored");
  }
  assign_training_state(*model, f, filepath, /*with_optimizer=*/compile);
  return model;
}

}  // namespace strata::keras::saving

namespace strata::keras::models {

std::shared_ptr<keras::Model> load_model(const std::string& filepath,
                                         const LoadModelOptions& options) {
  return saving::load_model(filepath, options);
}

void save_model(const keras::Model& model, const std::string& filepath) {
  saving::save_model(model, filepath);
}

}  // namespace strata::keras::models
