#include "strata/keras/layers/embedding.h"

#include <cmath>

#include <gtest/gtest.h>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/keras/layers/testing/layer_test_util.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras::layers {
namespace {

using testing_util::as_doubles;

std::shared_ptr<EmbeddingLayer> small_table() {
  auto embed = Embedding(3, 2);
  embed->build({-1, 2});
  embed->set_weights({strata::constant({0.f, 1.f, 2.f, 3.f, 4.f, 5.f}, {3, 2})});
  return embed;
}

TEST(EmbeddingTest, LooksUpRowsByIndex) {
  auto embed = small_table();
  const Tensor y = (*embed)(strata::constant<int64_t>({2, 0, 1, 1}, {2, 2}));
  EXPECT_EQ(y.shape(), (TensorShape{2, 2, 2}));
  EXPECT_EQ(as_doubles(y), (std::vector<double>{4, 5, 0, 1, 2, 3, 2, 3}));
  // Float indices are cast to int32, as Keras.
  EXPECT_EQ(as_doubles((*embed)(strata::constant({1.f, 2.f}, {1, 2}))),
            (std::vector<double>{2, 3, 4, 5}));
  EXPECT_EQ(as_doubles((*embed)(strata::constant<int32_t>({0}, {1}))), (std::vector<double>{0, 1}));
}

TEST(EmbeddingTest, GradientSumsOverTheRowsLookedUp) {
  auto embed = small_table();
  const Tensor ids = strata::constant<int64_t>({2, 0, 1, 1}, {2, 2});
  const Tensor w = strata::constant({1.f, 10.f, 2.f, 20.f, 3.f, 30.f, 4.f, 40.f}, {2, 2, 2});
  GradientTape tape;
  const Tensor loss = strata::reduce_sum((*embed)(ids)*w);
  const std::vector<Tensor> g = tape.gradient(loss, embed->trainable_variables());
  ASSERT_EQ(g.size(), 1u);
  // row 0 <- position 1; row 1 <- positions 2 and 3; row 2 <- position 0.
  EXPECT_EQ(as_doubles(g[0]), (std::vector<double>{2, 20, 7, 70, 1, 10}));
}

TEST(EmbeddingTest, DefaultsShapesAndParameterCount) {
  reset_uids_for_testing();
  auto embed = Embedding(1000, 64, {.input_length = 10});
  EXPECT_EQ(embed->name(), "embedding");
  ASSERT_TRUE(embed->declared_input_shape().has_value());
  EXPECT_EQ(*embed->declared_input_shape(), (std::vector<int64_t>{10}));
  EXPECT_EQ(embed->compute_output_shape({-1, 10}), (TensorShape{-1, 10, 64}));
  EXPECT_EQ(Embedding(5, 3)->compute_output_shape({-1}), (TensorShape{-1, 3}));
  embed->build({-1, 10});
  EXPECT_EQ(embed->count_params(), 64000);
  EXPECT_EQ(embed->weights()[0].name(), "embedding/embeddings");
  for (double v : as_doubles(embed->embeddings().value())) {
    EXPECT_LE(std::abs(v), 0.05);
  }
  EXPECT_THROW(embed->compute_output_shape({-1, 9}), InvalidArgumentError);  // input_length is 10
}

TEST(EmbeddingTest, RejectsBadArgumentsAndOutOfRangeIndices) {
  EXPECT_THROW(Embedding(0, 4), InvalidArgumentError);
  EXPECT_THROW(Embedding(4, 0), InvalidArgumentError);
  EXPECT_THROW(Embedding(4, 2, {.input_length = 0}), InvalidArgumentError);
  EXPECT_THROW(Embedding(4, 2, {.mask_zero = true}), UnimplementedError);
  auto embed = Embedding(3, 2, {.name = "emb"});
  try {
    (*embed)(strata::constant<int64_t>({1, 3}, {1, 2}));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Embedding 'emb'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find('3'), std::string::npos) << e.what();
  }
  EXPECT_THROW((*embed)(strata::constant<int64_t>({-1}, {1})), InvalidArgumentError);
}

}  // namespace
}  // namespace strata::keras::layers
