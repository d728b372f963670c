// Fashion-MNIST with a Keras MLP (784-512-256-10): compile, fit with
// validation, evaluate, save the weights — the acceptance run of the keras
// layer (docs/keras_fashion_mnist.md has a log).
//
//   build/examples/fashion_mnist_mlp              # 10 epochs, expects test accuracy >= 0.88
//   STRATA_FMNIST_EPOCHS=1 build/examples/fashion_mnist_mlp
//
// Needs Debian's dataset-fashion-mnist (or STRATA_DATA_DIR); without it the
// program says so and exits 0, as a skipped test.
#include <cstdlib>
#include <iostream>
#include <string>

#include "example_check.h"
#include "strata/keras/keras.h"
#include "strata/strata.h"

namespace tf = strata;
namespace keras = strata::keras;

int main() {
  const char* epochs_env = std::getenv("STRATA_FMNIST_EPOCHS");
  const int epochs = epochs_env != nullptr ? std::atoi(epochs_env) : 10;
  std::pair<keras::datasets::fashion_mnist::XY, keras::datasets::fashion_mnist::XY> data;
  try {
    data = keras::datasets::fashion_mnist::load_data();
  } catch (const tf::NotFoundError& e) {
    std::cout << "skipped: " << e.what() << "\n";
    return 0;
  }
  auto [train, test] = data;
  // Keras's recipe: scale the pixels to [0, 1].
  auto prepare = [](const tf::Tensor& images) {
    return tf::cast(tf::reshape(images, {images.shape()[0], 784}), tf::DType::float32) / 255.f;
  };
  const tf::Tensor x_train = prepare(train.first), x_test = prepare(test.first);
  const tf::Tensor y_train = tf::cast(train.second, tf::DType::int64),
                   y_test = tf::cast(test.second, tf::DType::int64);

  auto model = keras::Sequential(
      {keras::layers::Dense(512, {.activation = "relu", .input_shape = {784}}),
       keras::layers::Dense(256, {.activation = "relu"}), keras::layers::Dense(10)});
  model->summary();
  model->compile({.optimizer = keras::optimizers::Adam({.learning_rate = 1e-3}),
                  .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true}),
                  .metrics = {"accuracy"}});
  keras::History h =
      model->fit(x_train, y_train,
                 {.batch_size = 128, .epochs = epochs, .validation_data = {{x_test, y_test}}});
  keras::Logs result = model->evaluate(x_test, y_test, {.batch_size = 256});
  std::cout << "test loss " << result.at("loss") << ", test accuracy " << result.at("accuracy")
            << "\n";

  const double required = epochs >= 10 ? 0.88 : 0.80;
  example::expect(result.at("accuracy") >= required, "test accuracy reaches the target");
  example::expect(h.history["loss"].back() < h.history["loss"].front() || epochs == 1,
                  "the training loss decreases");
  example::expect(std::abs(h.history["val_accuracy"].back() - result.at("accuracy")) < 1e-6,
                  "the last validation accuracy equals evaluate's");
  return example::exit_code();
}
