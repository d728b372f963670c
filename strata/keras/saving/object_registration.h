#pragma once
// keras.saving.register_keras_serializable and custom_objects: how a layer
// class that Strata does not know is rebuilt from its config.
//
//   class ScaleLayer : public keras::Layer { ... nlohmann::json get_config() const override; };
//   keras::saving::register_keras_serializable("my_package", "ScaleLayer",
//       [](const nlohmann::json& config) -> keras::LayerPtr {
//         return std::make_shared<ScaleLayer>(config.at("factor").get<double>(), ...);
//       });
//   model->save(path);                                     // the layer's config is in the file
//   auto loaded = keras::models::load_model(path);         // ScaleLayer made by the factory
//   // or, without registering:
//   auto same = keras::models::load_model(path, {.custom_objects = {{"ScaleLayer", factory}}});
//
// A registered class is known by its registered name "<package>><name>"
// ("my_package>ScaleLayer", Keras's get_registered_name). layers::serialize
// writes it as the config's "registered_name" beside "class_name" (the
// layer's class_name()), as Keras 3; registering `name` must therefore equal
// the layer's class_name() for serialize to find it (the factory is found
// either way). layers::deserialize looks a config up in this order:
//   1. custom_objects, by registered name then by class name (Keras's
//      custom_objects and custom_object_scope come first);
//   2. the registry, by registered name, then by class name when the
//      class_name itself is a registered name (tf.keras 2 wrote
//      "class_name": "my_package>ScaleLayer");
//   3. Strata's own layer classes;
//   4. the registry, by the bare class name when exactly one registered class
//      has it.
// Otherwise UnimplementedError names the class and says how to register it.
//
// The registry is process-wide and thread-safe (a mutex); registering the
// same registered name twice replaces the factory, as Keras's decorator does.

#include <functional>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "strata/keras/layer.h"

namespace strata::keras::saving {

// Makes a layer from its config (the "config" object, not the
// {"class_name", "config"} wrapper): the class's from_config.
using LayerFactory = std::function<LayerPtr(const nlohmann::json& config)>;
// keras's custom_objects: class name (or registered name) -> factory.
using CustomObjects = std::map<std::string, LayerFactory>;

// keras.saving.register_keras_serializable(package="Custom", name=None):
// registers `from_config` under "<package>><name>". InvalidArgumentError if
// package or name is empty or contains '>', or if from_config is empty.
void register_keras_serializable(const std::string& package, const std::string& name,
                                 LayerFactory from_config);
// The same with Keras's default package "Custom".
void register_keras_serializable(const std::string& name, LayerFactory from_config);

// keras.saving.get_registered_name: the registered name of the class whose
// name is `class_name` ("my_package>ScaleLayer"), or `class_name` itself when
// no registration has that name.
std::string get_registered_name(const std::string& class_name);

// keras.saving.get_registered_object: the factory for `name` (a registered
// name, or a key of custom_objects), std::nullopt when none.
std::optional<LayerFactory> get_registered_object(const std::string& name,
                                                  const CustomObjects& custom_objects = {});

// Removes every registration (for tests).
void clear_registered_objects_for_testing();

namespace internal {
// Step 1, 2 and 4 of the lookup above, for layers::deserialize: `builtin`
// says whether Strata has a class of that name (step 3 is then taken by the
// caller, so step 4 is skipped).
std::optional<LayerFactory> find_layer_factory(const std::string& class_name,
                                               const std::string& registered_name,
                                               const CustomObjects& custom_objects, bool builtin);
}  // namespace internal

}  // namespace strata::keras::saving
