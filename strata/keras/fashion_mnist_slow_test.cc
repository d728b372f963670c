// The keras layer's accuracy runs on the real Fashion-MNIST (label "slow",
// binary keras_slow_test): an MLP 784-512-256-10 reaches >= 0.88 test
// accuracy within 10 epochs, a small CNN >= 0.91. Skipped when
// dataset-fashion-mnist is not installed (and STRATA_DATA_DIR not set).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "strata/base/errors.h"
#include "strata/keras/keras.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras {
namespace {

struct Data {
  Tensor x_train, y_train, x_test, y_test;
};

std::optional<Data> load(const std::vector<int64_t>& example_shape) {
  try {
    auto [train, test] = datasets::fashion_mnist::load_data();
    auto prepare = [&](const Tensor& images) {
      std::vector<int64_t> shape{images.shape()[0]};
      shape.insert(shape.end(), example_shape.begin(), example_shape.end());
      return strata::cast(strata::reshape(images, shape), DType::float32) / 255.f;
    };
    return Data{prepare(train.first), strata::cast(train.second, DType::int64), prepare(test.first),
                strata::cast(test.second, DType::int64)};
  } catch (const NotFoundError& e) {
    std::cerr << e.what() << "\n";
    return std::nullopt;
  }
}

// The best test accuracy over the epochs ("within N epochs"), checked against evaluate's.
double train_and_evaluate(const std::shared_ptr<SequentialModel>& model, const Data& d,
                          int epochs) {
  model->summary();
  model->compile({.optimizer = optimizers::Adam({.learning_rate = 1e-3}),
                  .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                  .metrics = {"accuracy"}});
  History h = model->fit(d.x_train, d.y_train,
                         {.batch_size = 128,
                          .epochs = epochs,
                          .verbose = 2,
                          .validation_data = {{d.x_test, d.y_test}}});
  const double last =
      model->evaluate(d.x_test, d.y_test, {.batch_size = 500, .verbose = 0}).at("accuracy");
  EXPECT_NEAR(h.history["val_accuracy"].back(), last, 1e-6);
  double best = 0;
  for (double a : h.history["val_accuracy"]) best = std::max(best, a);
  return best;
}

TEST(FashionMnistSlowTest, MlpReaches88PercentWithinTenEpochs) {
  std::optional<Data> d = load({784});
  if (!d) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto model = Sequential({layers::Dense(512, {.activation = "relu", .input_shape = {784}}),
                           layers::Dense(256, {.activation = "relu"}), layers::Dense(10)});
  EXPECT_GE(train_and_evaluate(model, *d, 10), 0.88);
}

TEST(FashionMnistSlowTest, CnnReaches91Percent) {
  std::optional<Data> d = load({28, 28, 1});
  if (!d) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto model =
      Sequential({layers::Conv2D(32, {3, 3}, {.activation = "relu", .input_shape = {28, 28, 1}}),
                  layers::MaxPooling2D({2, 2}), layers::Conv2D(64, {3, 3}, {.activation = "relu"}),
                  layers::MaxPooling2D({2, 2}), layers::Flatten(),
                  layers::Dense(128, {.activation = "relu"}), layers::Dense(10)});
  EXPECT_GE(train_and_evaluate(model, *d, 10), 0.91);
}

}  // namespace
}  // namespace strata::keras
