// The layers together, spelled as in API.md: the Keras "simple MNIST convnet"
// stack, its parameter counts and one differentiable forward pass.
#include "strata/keras/layers/layers.h"

#include <gtest/gtest.h>

#include "strata/autodiff/gradient_tape.h"
#include "strata/keras/losses.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/random_ops.h"

namespace strata::keras {
namespace {

TEST(LayersTest, MnistConvnetHasKerasParameterCountsAndTrainsEndToEnd) {
  reset_uids_for_testing();
  std::vector<LayerPtr> stack = {
      layers::Conv2D(32, {3, 3}, {.activation = "relu", .input_shape = {28, 28, 1}}),
      layers::MaxPooling2D({2, 2}),
      layers::Conv2D(64, {3, 3}, {.activation = "relu"}),
      layers::MaxPooling2D({2, 2}),
      layers::Flatten(),
      layers::Dropout(0.5),
      layers::Dense(10, {.activation = "softmax"}),
  };
  TensorShape shape{-1, 28, 28, 1};
  const std::vector<TensorShape> want_shapes = {
      {-1, 26, 26, 32}, {-1, 13, 13, 32}, {-1, 11, 11, 64}, {-1, 5, 5, 64},
      {-1, 1600},       {-1, 1600},       {-1, 10}};
  const std::vector<int64_t> want_params = {320, 0, 18496, 0, 0, 0, 16010};
  int64_t total = 0;
  for (size_t i = 0; i < stack.size(); ++i) {
    stack[i]->build(shape);
    shape = stack[i]->compute_output_shape(shape);
    EXPECT_EQ(shape, want_shapes[i]) << stack[i]->name();
    EXPECT_EQ(stack[i]->count_params(), want_params[i]) << stack[i]->name();
    total += stack[i]->count_params();
  }
  EXPECT_EQ(total, 34826);  // Keras's model.summary() for this model
  EXPECT_EQ(stack[0]->name(), "conv2d");
  EXPECT_EQ(stack[2]->name(), "conv2d_1");
  EXPECT_EQ(stack[3]->name(), "max_pooling2d_1");

  const Tensor x = random::uniform({4, 28, 28, 1}, {.seed = 1});
  const Tensor labels = constant<int64_t>({0, 3, 7, 9}, {4});
  std::vector<Variable> vars;
  for (const auto& layer : stack) {
    for (const Variable& v : layer->trainable_variables()) vars.push_back(v);
  }
  ASSERT_EQ(vars.size(), 6u);
  GradientTape tape;
  Tensor h = x;
  for (const auto& layer : stack) h = (*layer)(h, /*training=*/true);
  ASSERT_EQ(h.shape(), (TensorShape{4, 10}));
  const std::vector<float> rows = reduce_sum(h, {.axis = {1}}).to_vector<float>();
  for (float r : rows) EXPECT_NEAR(r, 1.0f, 1e-5);
  const Tensor loss = losses::reduce(losses::sparse_categorical_crossentropy(labels, h),
                                     losses::Reduction::SUM_OVER_BATCH_SIZE);
  const std::vector<Tensor> grads = tape.gradient(loss, vars);
  for (size_t i = 0; i < vars.size(); ++i) {
    ASSERT_TRUE(grads[i].defined()) << vars[i].name();
    EXPECT_EQ(grads[i].shape(), vars[i].shape()) << vars[i].name();
    EXPECT_GT(reduce_max(abs(grads[i])).item<float>(), 0.0f) << vars[i].name();
  }
}

TEST(LayersTest, ApiSpellingsCompile) {
  // The spellings of API.md's Keras section.
  auto dense = layers::Dense(128, {.activation = "relu"});
  auto conv = layers::Conv2D(32, {3, 3}, {.activation = "relu"});
  auto pool = layers::MaxPooling2D({2, 2});
  auto flat = layers::Flatten();
  auto drop = layers::Dropout(0.2);
  auto norm = layers::BatchNormalization();
  auto soft = layers::Activation("softmax");
  auto first = layers::Dense(2, {.input_shape = {5}});
  EXPECT_EQ(first->declared_input_shape(), (std::vector<int64_t>{5}));
  EXPECT_EQ((*soft)((*dense)(ones({1, 3}))).shape(), (TensorShape{1, 128}));
}

}  // namespace
}  // namespace strata::keras
