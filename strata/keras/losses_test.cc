#include "strata/keras/losses.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/ops/math_ops.h"

namespace strata::keras {
namespace {

using losses::Reduction;

std::vector<double> as_doubles(const Tensor& t) {
  return strata::cast(t, DType::float64).to_vector<double>();
}

// Independent scalar references (double precision).
double ref_log_softmax_at(const std::vector<double>& row, size_t j) {
  double m = *std::max_element(row.begin(), row.end());
  double s = 0;
  for (double x : row) s += std::exp(x - m);
  return row[j] - m - std::log(s);
}
double clip(double p) { return std::min(std::max(p, 1e-7), 1.0 - 1e-7); }

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
  auto v =
      losses::mean_absolute_error(constant<float>({0, 2}, {1, 2}), constant<float>({1, -1}, {1, 2}))
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

TEST(SparseCategoricalCrossentropy, UnnormalisedProbabilitiesAreUsedAsLogitsAfterTheLog) {
  // keras.backend: softmax xent of log(p) = -log p[label] + log(sum p).
  auto v = losses::sparse_categorical_crossentropy(constant<int64_t>({1}),
                                                   constant<float>({0.5f, 0.8f}, {1, 2}))
               .to_vector<float>();
  EXPECT_NEAR(v[0], -std::log(0.8 / 1.3), 1e-6);
}

TEST(SparseCategoricalCrossentropy, FromLogitsUsesLogSoftmax) {
  auto v = losses::sparse_categorical_crossentropy(
               constant<int64_t>({0}), constant<float>({0.f, 0.f}, {1, 2}), {.from_logits = true})
               .to_vector<float>();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NEAR(v[0], 0.69314718, 1e-6);  // ln 2
}

TEST(SparseCategoricalCrossentropy, AcceptsLabelsWithATrailingOneAndHigherRanks) {
  const std::vector<double> logits = {1, 2, 3, -1, 0, 4, 2, 2, 0, 0.5, -2, 1};
  Tensor y_pred = constant<float>(std::vector<float>(logits.begin(), logits.end()), {2, 2, 3});
  Tensor labels = constant<int32_t>({2, 0, 1, 1}, {2, 2, 1});
  Tensor out = losses::sparse_categorical_crossentropy(labels, y_pred, {.from_logits = true});
  ASSERT_EQ(out.shape(), (TensorShape{2, 2}));
  const std::vector<int> lab = {2, 0, 1, 1};
  auto v = as_doubles(out);
  for (size_t r = 0; r < 4; ++r) {
    std::vector<double> row(logits.begin() + r * 3, logits.begin() + r * 3 + 3);
    EXPECT_NEAR(v[r], -ref_log_softmax_at(row, lab[r]), 1e-5) << "row " << r;
  }
}

TEST(SparseCategoricalCrossentropy, ClassAxisCanBeFirst) {
  // y_pred [classes=3, batch=2]; axis 0.
  Tensor y_pred = constant<float>({1, 0, 2, 0, 3, 0}, {3, 2});
  auto v = as_doubles(losses::sparse_categorical_crossentropy(constant<int64_t>({2, 0}), y_pred,
                                                              {.from_logits = true, .axis = 0}));
  EXPECT_NEAR(v[0], -ref_log_softmax_at({1, 2, 3}, 2), 1e-6);
  EXPECT_NEAR(v[1], -ref_log_softmax_at({0, 0, 0}, 0), 1e-6);
}

TEST(SparseCategoricalCrossentropy, LabelOutOfRangeIsAnError) {
  EXPECT_THROW(
      losses::sparse_categorical_crossentropy(
          constant<int64_t>({3}), constant<float>({0.f, 0.f}, {1, 2}), {.from_logits = true}),
      InvalidArgumentError);
}

TEST(CategoricalCrossentropy, FromProbabilitiesNormalisesAndClips) {
  Tensor y_true = constant<float>({0, 1, 0, 1, 0, 0}, {2, 3});
  Tensor y_pred = constant<float>({0.1f, 0.6f, 0.3f, 0.0f, 0.5f, 1.5f}, {2, 3});
  auto v = as_doubles(losses::categorical_crossentropy(y_true, y_pred));
  EXPECT_NEAR(v[0], -std::log(0.6), 1e-6);
  EXPECT_NEAR(v[1], -std::log(1e-7), 1e-3);  // 0 / 2 clipped to epsilon
}

TEST(CategoricalCrossentropy, FromLogitsWithLabelSmoothing) {
  const std::vector<double> logits = {2.0, -1.0, 0.5};
  Tensor y_pred = constant<float>({2.0f, -1.0f, 0.5f}, {1, 3});
  Tensor y_true = constant<float>({1, 0, 0}, {1, 3});
  auto v = as_doubles(losses::categorical_crossentropy(
      y_true, y_pred, {.from_logits = true, .label_smoothing = 0.3}));
  // smoothed targets: 1 * 0.7 + 0.1, 0.1, 0.1
  const double expected =
      -(0.8 * ref_log_softmax_at(logits, 0) + 0.1 * ref_log_softmax_at(logits, 1) +
        0.1 * ref_log_softmax_at(logits, 2));
  EXPECT_NEAR(v[0], expected, 1e-6);
}

TEST(CategoricalCrossentropy, LabelSmoothingOutsideZeroOneIsAnError) {
  EXPECT_THROW(losses::CategoricalCrossentropy({.label_smoothing = 1.5}), InvalidArgumentError);
}

TEST(BinaryCrossentropy, FromProbabilitiesAddsEpsilonInsideTheLogs) {
  // float64 so that the double reference is exact at the clipping bounds.
  Tensor y_true = constant<double>({1, 0, 1, 0}, {2, 2});
  Tensor y_pred = constant<double>({0.9, 0.2, 0.0, 1.0}, {2, 2});
  auto v = as_doubles(losses::binary_crossentropy(y_true, y_pred));
  auto bce = [](double y, double p) {
    p = clip(p);
    return -(y * std::log(p + 1e-7) + (1 - y) * std::log(1 - p + 1e-7));
  };
  EXPECT_NEAR(v[0], (bce(1, 0.9) + bce(0, 0.2)) / 2, 1e-12);
  EXPECT_NEAR(v[1], (bce(1, 0.0) + bce(0, 1.0)) / 2, 1e-9);
  EXPECT_NEAR(v[1], -std::log(2e-7), 1e-6);  // log(1e-7 + 1e-7): the epsilon inside the log counts
}

TEST(BinaryCrossentropy, FromLogitsWithLabelSmoothing) {
  Tensor y_true = constant<float>({1, 0}, {1, 2});
  Tensor logits = constant<float>({0.5f, -2.0f}, {1, 2});
  auto v = as_doubles(
      losses::binary_crossentropy(y_true, logits, {.from_logits = true, .label_smoothing = 0.2}));
  auto sig_xent = [](double z, double x) {
    return std::max(x, 0.0) - x * z + std::log1p(std::exp(-std::abs(x)));
  };
  // smoothed: 1 -> 0.9, 0 -> 0.1
  EXPECT_NEAR(v[0], (sig_xent(0.9, 0.5) + sig_xent(0.1, -2.0)) / 2, 1e-6);
}

TEST(Huber, QuadraticInsideDeltaLinearOutside) {
  Tensor y_true = constant<float>({0, 0, 0, 0}, {1, 4});
  Tensor y_pred = constant<float>({0.5f, -1.0f, 2.0f, -3.0f}, {1, 4});
  auto v = as_doubles(losses::huber(y_true, y_pred));
  // 0.125, 0.5, 2 - 0.5, 3 - 0.5
  EXPECT_NEAR(v[0], (0.125 + 0.5 + 1.5 + 2.5) / 4, 1e-6);
  auto v2 = as_doubles(losses::huber(y_true, y_pred, {.delta = 2.0}));
  // 0.125, 0.5, 2 (|e| <= delta), 2*3 - 2
  EXPECT_NEAR(v2[0], (0.125 + 0.5 + 2.0 + 4.0) / 4, 1e-6);
}

TEST(Reduction, SumAndSumOverBatchSizeAndNone) {
  Tensor l = constant<float>({1, 2, 3, 6});
  EXPECT_FLOAT_EQ(losses::reduce(l, Reduction::SUM).scalar_as_double(), 12.0);
  EXPECT_FLOAT_EQ(losses::reduce(l, Reduction::SUM_OVER_BATCH_SIZE).scalar_as_double(), 3.0);
  EXPECT_FLOAT_EQ(losses::reduce(l, Reduction::AUTO).scalar_as_double(), 3.0);
  EXPECT_EQ(losses::reduce(l, Reduction::NONE).to_vector<float>(),
            (std::vector<float>{1, 2, 3, 6}));
  EXPECT_FLOAT_EQ(losses::reduce(constant<float>(std::vector<float>{}, {0}), Reduction::AUTO)
                      .scalar_as_double(),
                  0.0);
  EXPECT_EQ(losses::reduction_name(Reduction::SUM_OVER_BATCH_SIZE), "sum_over_batch_size");
}

TEST(LossClass, DefaultReductionIsTheMeanOverTheBatch) {
  auto loss = losses::MeanSquaredError();
  EXPECT_EQ(loss->name(), "mean_squared_error");
  EXPECT_EQ(loss->reduction(), Reduction::AUTO);
  Tensor t = constant<float>({0, 0, 1, 1}, {2, 2});
  Tensor p = constant<float>({1, 1, 1, 3}, {2, 2});
  // per example: 1, 2
  EXPECT_FLOAT_EQ((*loss)(t, p).item<float>(), 1.5f);
}

TEST(LossClass, SampleWeightMultipliesThenDividesByTheNumberOfElements) {
  auto loss = losses::MeanAbsoluteError();
  Tensor t = constant<float>({0, 0, 0}, {3, 1});
  Tensor p = constant<float>({1, 2, 3}, {3, 1});
  // per example 1, 2, 3; weights 2, 0, 1 -> (2 + 0 + 3) / 3 (zero weights still count)
  EXPECT_FLOAT_EQ((*loss)(t, p, constant<float>({2, 0, 1})).item<float>(), 5.0f / 3.0f);
  // a [b, 1] weight is squeezed to [b]
  EXPECT_FLOAT_EQ((*loss)(t, p, constant<float>({2, 0, 1}, {3, 1})).item<float>(), 5.0f / 3.0f);
  // a scalar weight scales
  EXPECT_FLOAT_EQ((*loss)(t, p, constant(0.5f)).item<float>(), 1.0f);
}

TEST(LossClass, SumAndNoneReductions) {
  auto sum = losses::MeanAbsoluteError({.reduction = Reduction::SUM});
  auto none = losses::MeanAbsoluteError({.reduction = Reduction::NONE});
  Tensor t = constant<float>({0, 0}, {2, 1});
  Tensor p = constant<float>({1, 2}, {2, 1});
  EXPECT_FLOAT_EQ((*sum)(t, p, constant<float>({3, 1})).item<float>(), 5.0f);
  EXPECT_EQ((*none)(t, p, constant<float>({3, 1})).to_vector<float>(), (std::vector<float>{3, 2}));
}

TEST(LossClass, SparseCategoricalCrossentropyFromLogits) {
  auto loss = losses::SparseCategoricalCrossentropy({.from_logits = true});
  EXPECT_TRUE(loss->from_logits());
  Tensor logits = constant<float>({0, 0, 1, 3}, {2, 2});
  Tensor labels = constant<int64_t>({1, 1});
  const double l0 = -ref_log_softmax_at({0, 0}, 1), l1 = -ref_log_softmax_at({1, 3}, 1);
  EXPECT_NEAR((*loss)(labels, logits).item<float>(), (l0 + l1) / 2, 1e-6);
  EXPECT_NEAR((*loss)(labels, logits, constant<float>({1, 3})).item<float>(), (l0 + 3 * l1) / 2,
              1e-6);
}

TEST(LossClass, BinaryAndCategoricalCrossentropyClasses) {
  auto bce = losses::BinaryCrossentropy({.from_logits = true});
  Tensor y = constant<float>({1, 0}, {2, 1});
  Tensor x = constant<float>({0.0f, 0.0f}, {2, 1});
  EXPECT_NEAR((*bce)(y, x).item<float>(), std::log(2.0), 1e-6);
  auto cce = losses::CategoricalCrossentropy({.from_logits = true});
  EXPECT_NEAR(
      (*cce)(constant<float>({0, 1}, {1, 2}), constant<float>({0, 0}, {1, 2})).item<float>(),
      std::log(2.0), 1e-6);
  EXPECT_EQ(losses::Huber()->name(), "huber_loss");
}

TEST(LossClass, WrapperSqueezesATrailingOneOnPredictions) {
  // y_pred [b, 1] against y_true [b]: Keras squeezes y_pred so MSE averages per example.
  auto loss = losses::MeanSquaredError({.reduction = Reduction::NONE});
  Tensor out = (*loss)(constant<float>({1, 2}), constant<float>({0, 0}, {2, 1}));
  EXPECT_EQ(out.shape(), TensorShape{});  // mean over the (squeezed) last axis of [2]
  EXPECT_FLOAT_EQ(out.item<float>(), 2.5f);
}

TEST(LossClass, UserDefinedLossFromAFunction) {
  auto loss = losses::make_loss(
      [](const Tensor& t, const Tensor& p) { return strata::abs(strata::subtract(p, t)); }, "l1",
      Reduction::SUM);
  EXPECT_FLOAT_EQ((*loss)(constant<float>({1, 2}), constant<float>({0, 4})).item<float>(), 3.0f);
}

TEST(LossGet, ResolvesNamesAndAliases) {
  EXPECT_EQ(losses::get("mse")->name(), "mean_squared_error");
  EXPECT_EQ(losses::get("sparse_categorical_crossentropy")->name(),
            "sparse_categorical_crossentropy");
  EXPECT_EQ(losses::get("BinaryCrossentropy")->name(), "binary_crossentropy");
  EXPECT_THROW(losses::get("nope"), InvalidArgumentError);
}

TEST(ComputeWeightedLoss, IntegerLossesAreComputedInFloatAndCastBack) {
  Tensor out = losses::compute_weighted_loss(constant<int32_t>({1, 2, 4}), Tensor(),
                                             Reduction::SUM_OVER_BATCH_SIZE);
  EXPECT_EQ(out.dtype(), DType::int32);
  EXPECT_EQ(out.item<int32_t>(), 2);  // 7 / 3 = 2.33 -> 2
}

}  // namespace
}  // namespace strata::keras

namespace strata::keras {
namespace {

TEST(LossGradients, SparseCrossentropyFromLogitsGivesSoftmaxMinusOneHotOverBatch) {
  Variable logits(constant<double>({1.0, 2.0, 0.5, -1.0, 0.0, 3.0}, {2, 3}), {.name = "logits"});
  auto loss_fn = losses::SparseCategoricalCrossentropy({.from_logits = true});
  GradientTape tape;
  Tensor loss = (*loss_fn)(constant<int64_t>({2, 0}), logits.value());
  auto g = as_doubles(tape.gradient(loss, std::vector<Variable>{logits})[0]);
  const std::vector<std::vector<double>> rows = {{1.0, 2.0, 0.5}, {-1.0, 0.0, 3.0}};
  const int labels[2] = {2, 0};
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      const double softmax = std::exp(ref_log_softmax_at(rows[r], c));
      EXPECT_NEAR(g[r * 3 + c], (softmax - (c == labels[r] ? 1.0 : 0.0)) / 2.0, 1e-12)
          << r << "," << c;
    }
  }
}

TEST(LossGradients, MeanSquaredErrorWithSampleWeight) {
  Variable pred(constant<double>({1.0, 4.0}, {2, 1}), {.name = "pred"});
  auto loss_fn = losses::MeanSquaredError();
  GradientTape tape;
  Tensor loss =
      (*loss_fn)(constant<double>({0.0, 1.0}, {2, 1}), pred.value(), constant<double>({1.0, 0.5}));
  // loss = (1 * 1^2 + 0.5 * 3^2) / 2; d/dpred = w * 2 (p - t) / 2
  EXPECT_NEAR(loss.scalar_as_double(), 5.5 / 2, 1e-12);
  auto g = as_doubles(tape.gradient(loss, std::vector<Variable>{pred})[0]);
  EXPECT_NEAR(g[0], 1.0, 1e-12);
  EXPECT_NEAR(g[1], 1.5, 1e-12);
}

}  // namespace
}  // namespace strata::keras

namespace strata::keras {
namespace {

TEST(LossUnderStrategy, SumOverBatchSizeIsRefusedUnlessTheTrainingLoopAllowsIt) {
  strata::internal::reset_runtime_for_testing();
  distribute::MirroredStrategy strategy({"CPU:0"});
  auto mean_loss = losses::MeanAbsoluteError();
  auto sum_loss = losses::MeanAbsoluteError({.reduction = Reduction::SUM});
  Tensor t = constant<float>({0, 0}, {2, 1});
  Tensor p = constant<float>({1, 3}, {2, 1});
  EXPECT_FLOAT_EQ((*mean_loss)(t, p).item<float>(), 2.0f);  // no strategy: fine
  auto scope = strategy.scope();
  try {
    (*mean_loss)(t, p);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Reduction::SUM or Reduction::NONE"), std::string::npos)
        << e.what();
  }
  strategy.run([&] { EXPECT_THROW((*mean_loss)(t, p), InvalidArgumentError); });
  EXPECT_FLOAT_EQ((*sum_loss)(t, p).item<float>(), 4.0f);
  mean_loss->set_allow_sum_over_batch_size(true);
  EXPECT_FLOAT_EQ((*mean_loss)(t, p).item<float>(), 2.0f);
  // The functions themselves are unaffected.
  EXPECT_EQ(losses::mean_absolute_error(t, p).to_vector<float>(), (std::vector<float>{1, 3}));
}

}  // namespace
}  // namespace strata::keras
