#pragma once
// keras.saving.save_model / keras.models.load_model: a whole model in one file
// (architecture, compile state, weights, optimizer variables) and back,
// without the code that built it. Format: docs/formats/saved_model.md.
//
//   model->fit(x, y, {.epochs = 3});
//   model->save("/tmp/mlp.keras");                        // keras::saving::save_model(*model,
//   path) auto loaded = keras::models::load_model("/tmp/mlp.keras"); loaded->predict(x); // the
//   same values, bit for bit loaded->fit(x, y, {.epochs = 1});                     // continues:
//   optimizer state restored
//
//   { auto scope = strategy.scope();                     // under a strategy: the loaded
//     auto replicated = keras::models::load_model(path); }  // model's variables are mirrored
//
// save_model writes, atomically (temporary file, fsync, rename), a Strata
// weights file (docs/formats/weights.md) of kind "model" whose manifest holds
// "config", Keras 3's config.json object: {"module": "keras", "class_name":
// "Sequential" | "Functional" | a registered class, "config":
// model.get_config(), "registered_name", "compile_config":
// model.get_compile_config() or null}. A model without a config (a
// subclassed model, a layer with a lambda activation: get_config is
// UnimplementedError) is saved without "config" and with a warning; such a
// file loads only into a model built in code (load_weights,
// load_training_state). So is the compile state: when the optimizer or loss
// has no config (a learning-rate schedule, a loss function), "compile_config"
// is null and a warning says why. Under a multi-worker strategy only the chief
// writes at `filepath` (weights_io.h).
//
// load_model reads the file (every checksum first), makes the model with
// models::model_from_config (custom layers: object_registration.h), under
// the caller's strategy scope if any (the model's variables are created
// through the variable-creator stack, so they are mirrored there), assigns
// the weights (matched by position, local name, shape and dtype) and, with
// `compile` and a compile config, compiles the model from it and restores the
// optimizer's variables (iterations and slots), so training continues exactly
// where it stopped.
//
// Errors: a file that is not whole or whose manifest or config is malformed
// (a missing or mistyped field) is DataLossError naming the file and the
// field; a file of another kind (save_weights) or without a config is
// InvalidArgumentError; an unknown layer class is UnimplementedError naming
// it (register it, or pass it in custom_objects). A file that does not exist
// is NotFoundError.
//
// Thread-safety: save reads the variables; load makes a new model.

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "strata/keras/saving/object_registration.h"

namespace strata::keras {
class Model;
}  // namespace strata::keras

namespace strata::keras::saving {

// keras.models.load_model's arguments after the path, in Keras's order
// (safe_mode is not offered: no config here can hold code).
struct LoadModelOptions {
  CustomObjects custom_objects = {};
  bool compile = true;
};

// keras.saving.save_model(model, filepath) (= model.save(filepath)).
void save_model(const Model& model, const std::string& filepath);
// keras.saving.load_model(filepath, custom_objects=None, compile=True).
std::shared_ptr<Model> load_model(const std::string& filepath,
                                  const LoadModelOptions& options = {});

// The config save_model stores (Keras 3's config.json), for a model that has
// one (UnimplementedError otherwise); its "compile_config" is null when the
// model is not compiled or its compile state has no config.
nlohmann::json serialize_model(const Model& model);

}  // namespace strata::keras::saving

namespace strata::keras::models {

using saving::LoadModelOptions;
// tf.keras.models.load_model / save_model.
std::shared_ptr<keras::Model> load_model(const std::string& filepath,
                                         const LoadModelOptions& options = {});
void save_model(const keras::Model& model, const std::string& filepath);

}  // namespace strata::keras::models
