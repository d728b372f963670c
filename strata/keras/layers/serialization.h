#pragma once
// keras.layers.serialize / deserialize: a layer as {"class_name", "config"} and back.
//
//   nlohmann::json j = keras::layers::serialize(*dense);
//   // {"class_name": "Dense", "config": {"name": "dense", "units": 64, ...}}
//   keras::LayerPtr copy = keras::layers::deserialize(j);   // new weights, same arguments
//
// Known classes: InputLayer, Dense, Conv2D, Flatten, Reshape, Dropout, Activation,
// MaxPooling2D, AveragePooling2D, BatchNormalization, Normalization, StringLookup, Add,
// Subtract, Multiply, Average, Maximum, Minimum, Concatenate, Sequential and
// Functional (also "Model"), plus the classes registered with
// keras::saving::register_keras_serializable or given in `custom_objects`
// (saving/object_registration.h gives the order of the lookup). Another
// class is UnimplementedError naming it; a missing or mistyped key is
// InvalidArgumentError naming the class and the key. Thread-safe.

#include <cstdint>
#include <span>

#include <nlohmann/json_fwd.hpp>

#include "strata/keras/layer.h"
#include "strata/keras/saving/object_registration.h"

namespace strata::keras::layers {

// {"class_name": layer.class_name(), "config": layer.get_config()}, plus
// "registered_name" when the class is registered (Keras 3's key).
nlohmann::json serialize(const Layer& layer);
// The custom objects reach the layers nested in a Sequential or functional config.
LayerPtr deserialize(const nlohmann::json& config,
                     const saving::CustomObjects& custom_objects = {});

// A shape as Keras writes it in a config: a JSON array with null for each
// unknown (negative) dimension. `with_batch` puts a leading null for the
// batch dimension, as in "batch_input_shape" built from an `input_shape`.
nlohmann::json config_shape(std::span<const int64_t> dims, bool with_batch = false);

}  // namespace strata::keras::layers
