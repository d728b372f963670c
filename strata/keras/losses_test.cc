#include "strata/keras/losses.h"

#include <vector>

#include <gtest/gtest.h>

namespace strata::keras {
namespace {

// Values worked out by hand (logs with python3 math.log).
TEST(MeanSquaredError, AveragesSquaredErrorsOverTheLastAxis) {
  Tensor t = constant<float>({0, 1, 1, 1}, {2, 2});
  Tensor p = constant<float>({1, 1, 1, 0}, {2, 2});
  auto v = losses::mean_squared_error(t, p).to_vector<float>();
  ASSERT_EQ(v.size(), 2u);
  EXPECT_FLOAT_EQ(v[0], 0.5f);
  EXPECT_FLOAT_EQ(v[1], 0.5f);
}

TEST(MeanAbsoluteError, AveragesAbsoluteErrorsOverTheLastAxis) {
  auto v = losses::mean_absolute_error(constant<float>({0, 2}, {1, 2}),
                                       constant<float>({1, -1}, {1, 2}))
               .to_vector<float>();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_FLOAT_EQ(v[0], 2.0f);  // (1 + 3) / 2
}

TEST(SparseCategoricalCrossentropy, ClipsProbabilitiesWithKerasEpsilon) {
  Tensor labels = constant<int64_t>({1, 0});
  Tensor probs = constant<float>({0.2f, 0.8f, 0.0f, 1.0f}, {2, 2});
  auto v = losses::sparse_categorical_crossentropy(labels, probs).to_vector<float>();
  ASSERT_EQ(v.size(), 2u);
  EXPECT_NEAR(v[0], 0.22314355, 1e-6);  // -ln 0.8
  EXPECT_NEAR(v[1], 16.118095, 1e-3);   // -ln 1e-7
}

TEST(SparseCategoricalCrossentropy, FromLogitsUsesLogSoftmax) {
  auto v = losses::sparse_categorical_crossentropy(constant<int64_t>({0}),
                                                   constant<float>({0.f, 0.f}, {1, 2}),
                                                   /*from_logits=*/true)
               .to_vector<float>();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NEAR(v[0], 0.69314718, 1e-6);  // ln 2
}

TEST(Reduction, SumAndSumOverBatchSizeAndNone) {
  Tensor l = constant<float>({1, 2, 3, 6});
  EXPECT_FLOAT_EQ(losses::reduce(l, losses::Reduction::SUM).scalar_as_double(), 12.0);
  EXPECT_FLOAT_EQ(losses::reduce(l, losses::Reduction::SUM_OVER_BATCH_SIZE).scalar_as_double(), 3.0);
  EXPECT_EQ(losses::reduce(l, losses::Reduction::NONE).to_vector<float>(),
            (std::vector<float>{1, 2, 3, 6}));
}

}  // namespace
}  // namespace strata::keras
