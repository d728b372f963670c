// Expected values are worked out by hand (small cases) or by naive loops in the test.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/random_ops.h"
#include "strata/ops/operators.h"

namespace strata {
namespace {

TEST(MathOps, AddBroadcastsColumnAgainstRow) {
  Tensor a = constant({1.f, 2.f, 3.f}, {3, 1});
  Tensor b = constant({10.f, 20.f, 30.f, 40.f}, {1, 4});
  Tensor c = add(a, b);
  EXPECT_EQ(c.shape(), (TensorShape{3, 4}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43}));
}

TEST(MathOps, ScalarOperandAndPromotion) {
  Tensor a = constant({1, 2, 3}) ;
  Tensor c = a * 2;
  EXPECT_EQ(c.dtype(), DType::int32);
  EXPECT_EQ(c.to_vector<int32_t>(), (std::vector<int32_t>{2, 4, 6}));
  Tensor d = add(a, constant(0.5f));
  EXPECT_EQ(d.dtype(), DType::float32);
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{1.5f, 2.5f, 3.5f}));
}

TEST(MathOps, SizeZeroDimensionBroadcasts) {
  Tensor a = zeros({0, 3});
  Tensor c = add(a, constant({1.f, 2.f, 3.f}));
  EXPECT_EQ(c.shape(), (TensorShape{0, 3}));
}

TEST(MathOps, IncompatibleShapesNameBothShapes) {
  try {
    add(zeros({2, 3}), zeros({4}));
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3] and [4]"), std::string::npos) << e.what();
  }
}

TEST(MathOps, IntegerDivideIsTrueDivisionInFloat64) {
  Tensor c = divide(constant({int64_t{7}, int64_t{-7}}), constant({int64_t{2}, int64_t{2}}));
  EXPECT_EQ(c.dtype(), DType::float64);
  EXPECT_EQ(c.to_vector<double>(), (std::vector<double>{3.5, -3.5}));
}

TEST(MathOps, FloorDivAndFloorModFollowPython) {
  Tensor a = constant({7, -7, 7, -7});
  Tensor b = constant({2, 2, -2, -2});
  EXPECT_EQ(floordiv(a, b).to_vector<int32_t>(), (std::vector<int32_t>{3, -4, -4, 3}));
  EXPECT_EQ(floormod(a, b).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, -1, -1}));
  EXPECT_THROW(floordiv(a, constant(0)), InvalidArgumentError);
}

TEST(MathOps, RoundIsHalfToEven) {
  EXPECT_EQ(round(constant({0.5f, 1.5f, 2.5f, -0.5f})).to_vector<float>(),
            (std::vector<float>{0.f, 2.f, 2.f, -0.f}));
}

TEST(MathOps, ComparisonsReturnBool) {
  Tensor c = constant({1.f, 2.f, 3.f}) < 2.f;
  EXPECT_EQ(c.dtype(), DType::bool_);
  EXPECT_EQ(c.to_vector<bool>(), (std::vector<bool>{true, false, false}));
}

TEST(MathOps, ReduceSumOverAxesMatchesNaiveLoop) {
  std::vector<float> v(2 * 3 * 4);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  Tensor x = constant(v, {2, 3, 4});
  Tensor s = reduce_sum(x, {.axis = {0, 2}});
  std::vector<float> expect(3, 0.f);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) expect[j] += v[(i * 3 + j) * 4 + k];
  EXPECT_EQ(s.to_vector<float>(), expect);
  Tensor m = reduce_mean(x, {.axis = {1}, .keepdims = true});
  EXPECT_EQ(m.shape(), (TensorShape{2, 1, 4}));
  EXPECT_FLOAT_EQ(m.to_vector<float>()[0], (0.f + 4.f + 8.f) / 3.f);
  EXPECT_EQ(reduce_max(x).item<float>(), 23.f);
  EXPECT_THROW(reduce_sum(x, {.axis = {3}}), InvalidArgumentError);
}

TEST(MathOps, ArgmaxReturnsFirstIndexAsInt64) {
  Tensor a = argmax(constant({1.f, 5.f, 5.f, 0.f, 2.f, 9.f}, {2, 3}), 1);
  EXPECT_EQ(a.dtype(), DType::int64);
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
}

TEST(MathOps, MatMulMatchesNaiveLoopWithTransposes) {
  std::vector<float> av(3 * 4), bv(5 * 4);
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i % 7) - 3.f;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i % 5) * 0.5f;
  Tensor c = matmul(constant(av, {3, 4}), constant(bv, {5, 4}), {.transpose_b = true});
  ASSERT_EQ(c.shape(), (TensorShape{3, 5}));
  auto cv = c.to_vector<float>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      float acc = 0;
      for (int k = 0; k < 4; ++k) acc += av[i * 4 + k] * bv[j * 4 + k];
      EXPECT_FLOAT_EQ(cv[i * 5 + j], acc);
    }
  EXPECT_THROW(matmul(zeros({2, 3}), zeros({2, 3})), InvalidArgumentError);
}

TEST(ArrayOps, TransposeSliceConcatGather) {
  Tensor x = constant({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(transpose(x).to_vector<int32_t>(), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(slice(x, {0, 1}, {2, -1}).to_vector<int32_t>(), (std::vector<int32_t>{2, 3, 5, 6}));
  EXPECT_EQ(strided_slice(x, {1, -1}, {0, -4}, {-1, -2}).to_vector<int32_t>(), (std::vector<int32_t>{6, 4}));
  EXPECT_EQ(concat({x, x}, 1).shape(), (TensorShape{2, 6}));
  EXPECT_EQ(concat({x, x}, 1).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(gather(x, constant({2, 0}), 1).to_vector<int32_t>(), (std::vector<int32_t>{3, 1, 6, 4}));
  try {
    gather(x, constant({0, 3}), 1);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("indices[1] = 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(stack({x, x}, 0).shape(), (TensorShape{2, 2, 3}));
  auto parts = split(x, 3, 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].to_vector<int32_t>(), (std::vector<int32_t>{3, 6}));
  EXPECT_EQ(tile(constant({1, 2}), {3}).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(pad(constant({1, 2}), {{1, 2}}).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 0, 0}));
  EXPECT_EQ(reshape(x, {3, -1}).shape(), (TensorShape{3, 2}));
}

TEST(ArrayOps, OneHotOutOfRangeGivesOffRow) {
  Tensor h = one_hot(constant({0, 3, 1}), 3);
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 0, 0, 0, 1, 0}));
}

TEST(ArrayOps, UnsortedSegmentSum) {
  Tensor s = unsorted_segment_sum(constant({1.f, 2.f, 3.f, 4.f}), constant({1, 0, 1, 1}), 3);
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{2.f, 8.f, 0.f}));
}

TEST(MathOps, ResultsDoNotDependOnThreadCount) {
  std::vector<float> v(300000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 1.f / static_cast<float>(i + 1);
  auto run = [&](int threads) {
    internal::reset_runtime_for_testing();
    config::set_intra_op_parallelism_threads(threads);
    Tensor x = constant(v, {300, 1000});
    return std::make_pair(reduce_sum(x).item<float>(), reduce_sum(x, {.axis = {0}}).to_vector<float>());
  };
  auto one = run(1);
  auto four = run(4);
  internal::reset_runtime_for_testing();
  EXPECT_EQ(one.first, four.first);
  EXPECT_EQ(one.second, four.second);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST(NnOps, SoftmaxIsStableForLargeLogits) {
  Tensor p = softmax(constant({1000.f, 1000.f}, {1, 2}));
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{0.5f, 0.5f}));
}

TEST(NnOps, SparseCrossEntropyMatchesLogSumExp) {
  // loss = log(e^1 + e^2 + e^3) - 3 = 0.40760596 (by hand: log(30.19287) - 3).
  Tensor l = nn::sparse_softmax_cross_entropy_with_logits(constant({2}), constant({1.f, 2.f, 3.f}, {1, 3}));
  EXPECT_NEAR(l.item<float>(), 0.40760596f, 1e-6);
  EXPECT_THROW(nn::sparse_softmax_cross_entropy_with_logits(constant({3}), constant({1.f, 2.f, 3.f}, {1, 3})),
               InvalidArgumentError);
}

TEST(RandomOps, SeededUniformIsReproducibleAndInRange) {
  Tensor a = random::uniform({1000}, {.seed = 3});
  Tensor b = random::uniform({1000}, {.seed = 3});
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  for (float v : a.to_vector<float>()) {
    EXPECT_GE(v, 0.f);
    EXPECT_LT(v, 1.f);
  }
  for (float v : random::truncated_normal({1000}, {.seed = 5}).to_vector<float>()) EXPECT_LE(std::abs(v), 2.f);
}

TEST(NnOps, ComputeAverageLossDividesByGlobalBatch) {
  Tensor l = nn::compute_average_loss(constant({1.f, 2.f, 3.f, 4.f}), {.global_batch_size = 8});
  EXPECT_FLOAT_EQ(l.item<float>(), 10.f / 8.f);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST(NnOps, Conv2DSameStride1MatchesHandComputedSums) {
  // 1x3x3x1 input 1..9, 2x2 all-ones filter, SAME: pads bottom/right.
  Tensor x = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f}, {1, 3, 3, 1});
  Tensor f = ones({2, 2, 1, 1});
  Tensor y = nn::conv2d(x, f, {.padding = "SAME"});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{12, 16, 9, 24, 28, 15, 15, 17, 9}));
  Tensor v = nn::conv2d(x, f, {.strides = {2, 2}, .padding = "VALID"});
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{12}));
  EXPECT_THROW(nn::conv2d(x, f, {.dilations = {2, 2}}), UnimplementedError);
}

TEST(NnOps, PoolsMatchHandComputedValues) {
  Tensor x = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f}, {1, 3, 3, 1});
  EXPECT_EQ(nn::max_pool2d(x, {2, 2}, {2, 2}, "SAME").to_vector<float>(), (std::vector<float>{5, 6, 8, 9}));
  EXPECT_EQ(nn::avg_pool2d(x, {2, 2}, {2, 2}, "SAME").to_vector<float>(), (std::vector<float>{3, 4.5f, 7.5f, 9}));
  Tensor dy = constant({1.f, 2.f, 3.f, 4.f}, {1, 2, 2, 1});
  EXPECT_EQ(nn::max_pool2d_grad(x, nn::max_pool2d(x, {2, 2}, {2, 2}, "SAME"), dy, {2, 2}, {2, 2}, "SAME")
                .to_vector<float>(),
            (std::vector<float>{0, 0, 0, 0, 1, 2, 0, 3, 4}));
  EXPECT_EQ(nn::avg_pool2d_grad(x.shape(), dy, {2, 2}, {2, 2}, "SAME").to_vector<float>(),
            (std::vector<float>{0.25f, 0.25f, 1, 0.25f, 0.25f, 1, 1.5f, 1.5f, 4}));
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST(MathOps, LargeBroadcastOnFourThreadsMatchesNaiveLoop) {
  internal::reset_runtime_for_testing();
  config::set_intra_op_parallelism_threads(4);
  std::vector<float> a(301), b(997);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) * 0.5f;
  Tensor c = subtract(constant(a, {301, 1}), constant(b, {1, 997}));
  auto cv = c.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < b.size(); ++j) ASSERT_EQ(cv[i * b.size() + j], a[i] - b[j]) << i << "," << j;
  Tensor t = transpose(c);
  auto tv = t.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < b.size(); ++j) ASSERT_EQ(tv[j * a.size() + i], a[i] - b[j]);
  internal::reset_runtime_for_testing();
}

}  // namespace
}  // namespace strata
