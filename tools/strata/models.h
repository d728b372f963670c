#pragma once
// The two Fashion-MNIST models of `strata train` (the Keras issue's definitions).
//
//   keras::ModelPtr m = strata::tools::build_model("cnn", /*seed=*/1);
//
// Both take float32 images [batch, 28, 28] scaled to [0, 1] and return 10
// logits (no softmax: the loss is computed from logits, which is the
// numerically stable form Keras recommends).
//   mlp: Flatten, Dense 512 ReLU, Dense 256 ReLU, Dense 10           (535,818 parameters)
//   cnn: Reshape [28, 28, 1], Conv2D 32 3x3 ReLU, MaxPooling2D 2, Conv2D 64 3x3 ReLU,
//        MaxPooling2D 2, Flatten, Dense 128 ReLU, Dense 10             (225,034 parameters)
// Kernels are glorot_uniform (Keras's default) seeded from `seed`, one seed per
// layer, so a run is reproducible; biases start at zero.
//
// Build the model inside a strategy's scope to get distributed variables.

#include <cstdint>
#include <string>
#include <vector>

#include "strata/keras/model.h"

namespace strata::tools {

// The names build_model accepts, for --help and validation.
const std::vector<std::string>& model_names();

// InvalidArgumentError naming `name` when it is not one of model_names().
keras::ModelPtr build_model(const std::string& name, uint64_t seed);

}  // namespace strata::tools
