#include "tools/strata/models.h"

#include "strata/base/errors.h"
#include "strata/keras/initializers.h"
#include "strata/keras/layers/layers.h"
#include "strata/keras/sequential.h"

namespace strata::tools {

namespace layers = keras::layers;

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"mlp", "cnn"};
  return names;
}

keras::ModelPtr build_model(const std::string& name, uint64_t seed) {
  // One seed per kernel: equal seeds would give layers of equal shape equal weights.
  uint64_t next = seed * 1000;
  auto kernel = [&next] { return keras::initializers::glorot_uniform({.seed = next++}); };
  if (name == "mlp") {
    return keras::Sequential({
        layers::Flatten({.input_shape = {28, 28}}),
        layers::Dense(512, {.activation = "relu", .kernel_initializer = kernel()}),
        layers::Dense(256, {.activation = "relu", .kernel_initializer = kernel()}),
        layers::Dense(10, {.kernel_initializer = kernel()}),
    });
  }
  if (name == "cnn") {
    return keras::Sequential({
        layers::Reshape({28, 28, 1}, {.input_shape = {28, 28}}),
        layers::Conv2D(32, {3, 3}, {.activation = "relu", .kernel_initializer = kernel()}),
        layers::MaxPooling2D({2, 2}),
        layers::Conv2D(64, {3, 3}, {.activation = "relu", .kernel_initializer = kernel()}),
        layers::MaxPooling2D({2, 2}),
        layers::Flatten(),
        layers::Dense(128, {.activation = "relu", .kernel_initializer = kernel()}),
        layers::Dense(10, {.kernel_initializer = kernel()}),
    });
  }
  STRATA_CHECK_ARG(false, "--model: expected mlp or cnn, got '", name, "'");
  return nullptr;
}

}  // namespace strata::tools
