#pragma once
// keras.layers.serialize / deserialize: a layer as {"class_name", "config"} and back.
//
//   nlohmann::json j = keras::layers::serialize(*dense);
//   // {"class_name": "Dense", "config": {"name": "dense", "units": 64, ...}}
//   keras::LayerPtr copy = keras::layers::deserialize(j);   // new weights, same arguments
//
// Known classes: InputLayer, Dense, Conv2D, Flatten, Dropout, Activation,
// MaxPooling2D, AveragePooling2D, Normalization, StringLookup, Add, Subtract, Multiply, Average,
// Maximum, Minimum, Concatenate, Sequential and Functional (also "Model"). Another class is
// UnimplementedError naming it; a missing or mistyped key is InvalidArgumentError naming the class
// and the key. Thread-safe.

#include <nlohmann/json_fwd.hpp>

#include "strata/keras/layer.h"

namespace strata::keras::layers {

nlohmann::json serialize(const Layer& layer);
LayerPtr deserialize(const nlohmann::json& config);

}  // namespace strata::keras::layers
