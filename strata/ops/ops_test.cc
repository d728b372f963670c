// Expected values are worked out by hand (small cases) or by naive loops in the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/kernels/internal/conv_direct.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/internal/kernel_opcode.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/op_kind.h"
#include "strata/ops/operators.h"
#include "strata/ops/random_ops.h"
#include "strata/ops/replica_count.h"

namespace strata {
namespace {

TEST(OpKind, PredicatesReadTheColumnsOfOpsDef) {
  static_assert(op_name(OpKind::MatMul) == "MatMul");
  static_assert(op_arity(OpKind::Select) == 3 && op_arity(OpKind::AddN) == -1);
  static_assert(op_kernel(OpKind::Exp) == OpKernel::Unary);
  static_assert(op_kernel(OpKind::Less) == OpKernel::Binary);
  static_assert(op_kernel(OpKind::Mean) == OpKernel::Reduce);
  static_assert(op_kernel(OpKind::Identity) == OpKernel::Own);
  static_assert(!op_is_differentiable(OpKind::ArgMax) && op_is_differentiable(OpKind::Cast));
  static_assert(!op_gradient_needs_inputs(OpKind::Add) && !op_gradient_needs_outputs(OpKind::Add));
  static_assert(!op_gradient_needs_inputs(OpKind::Exp) && op_gradient_needs_outputs(OpKind::Exp));
  static_assert(op_gradient_needs_inputs(OpKind::Mul) && !op_gradient_needs_outputs(OpKind::Mul));
  static_assert(op_gradient_needs_inputs(OpKind::Pow) && op_gradient_needs_outputs(OpKind::Pow));
  static_assert(op_is_elementwise(OpKind::ReluGrad) && !op_is_elementwise(OpKind::Sum));
  std::vector<std::string_view> names;
  names.reserve(kNumOpKinds);
  for (int k = 0; k < kNumOpKinds; ++k) names.push_back(op_name(static_cast<OpKind>(k)));
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << "duplicate op name";
}

TEST(OpKind, KernelOpcodesAreTheOpsOfTheSameName) {
  static_assert(internal::unary_opcode(OpKind::LogicalNot) == kernels::UnaryOp::LogicalNot);
  static_assert(internal::unary_opcode(OpKind::Softplus) == kernels::UnaryOp::Softplus);
  static_assert(internal::binary_opcode(OpKind::FloorDiv) == kernels::BinaryOp::FloorDiv);
  static_assert(internal::reduce_opcode(OpKind::Prod) == kernels::ReduceOp::Prod);
  // The op runs the kernel its row names.
  const Tensor x = constant({-1.5f, 0.25f, 2.f});
  EXPECT_EQ(
      softplus(x).to_vector<float>(),
      kernels::unary(internal::unary_opcode(OpKind::Softplus), x, 0.0, "t").to_vector<float>());
  EXPECT_EQ(floordiv(x, x * 0.5f).to_vector<float>(),
            kernels::binary(internal::binary_opcode(OpKind::FloorDiv), x, x * 0.5f, "t")
                .to_vector<float>());
}

TEST(MathOps, AddBroadcastsColumnAgainstRow) {
  Tensor a = constant({1.f, 2.f, 3.f}, {3, 1});
  Tensor b = constant({10.f, 20.f, 30.f, 40.f}, {1, 4});
  Tensor c = add(a, b);
  EXPECT_EQ(c.shape(), (TensorShape{3, 4}));
  EXPECT_EQ(c.to_vector<float>(),
            (std::vector<float>{11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43}));
}

TEST(MathOps, ScalarOperandAndPromotion) {
  Tensor a = constant({1, 2, 3});
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
  EXPECT_EQ(strided_slice(x, {1, -1}, {0, -4}, {-1, -2}).to_vector<int32_t>(),
            (std::vector<int32_t>{6, 4}));
  EXPECT_EQ(concat({x, x}, 1).shape(), (TensorShape{2, 6}));
  EXPECT_EQ(concat({x, x}, 1).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(gather(x, constant({2, 0}), 1).to_vector<int32_t>(),
            (std::vector<int32_t>{3, 1, 6, 4}));
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
  EXPECT_EQ(tile(constant({1, 2}), {3}).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(pad(constant({1, 2}), {{1, 2}}).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 1, 2, 0, 0}));
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
    return std::make_pair(reduce_sum(x).item<float>(),
                          reduce_sum(x, {.axis = {0}}).to_vector<float>());
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
  Tensor l = nn::sparse_softmax_cross_entropy_with_logits(constant({2}),
                                                          constant({1.f, 2.f, 3.f}, {1, 3}));
  EXPECT_NEAR(l.item<float>(), 0.40760596f, 1e-6);
  EXPECT_THROW(nn::sparse_softmax_cross_entropy_with_logits(constant({3}),
                                                            constant({1.f, 2.f, 3.f}, {1, 3})),
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
  for (float v : random::truncated_normal({1000}, {.seed = 5}).to_vector<float>())
    EXPECT_LE(std::abs(v), 2.f);
}

TEST(NnOps, ComputeAverageLossDividesByGlobalBatch) {
  Tensor l = nn::compute_average_loss(constant({1.f, 2.f, 3.f, 4.f}), {.global_batch_size = 8});
  EXPECT_FLOAT_EQ(l.item<float>(), 10.f / 8.f);
}

TEST(NnOps, ComputeAverageLossWeighsExamplesAsTensorFlow) {
  // tf.nn.compute_average_loss([1., 2., 3., 4.], sample_weight=[1., 0., 1., 0.],
  //                            global_batch_size=8)  ->  (1 + 3) / 8 = 0.5
  Tensor per_example = constant({1.f, 2.f, 3.f, 4.f});
  Tensor l = nn::compute_average_loss(
      per_example, {.sample_weight = constant({1.f, 0.f, 1.f, 0.f}), .global_batch_size = 8});
  EXPECT_FLOAT_EQ(l.item<float>(), 0.5f);
  // Weights of shape [4, 1] are squeezed to [4] (TF's squeeze_or_expand_dimensions),
  // not broadcast to [4, 4]; integer weights are cast to the loss's dtype:
  // (2*1 + 1*2 + 0*3 + 1*4) / 4 = 2.
  Tensor w = constant(std::vector<int32_t>{2, 1, 0, 1}, TensorShape{4, 1});
  EXPECT_FLOAT_EQ(nn::compute_average_loss(per_example, {.sample_weight = w}).item<float>(), 2.f);
  // A scalar weight scales every example: 10 * 0.5 / 4.
  EXPECT_FLOAT_EQ(
      nn::compute_average_loss(per_example, {.sample_weight = constant(0.5f)}).item<float>(),
      1.25f);
  // global_batch_size=0 gives 0 (div_no_nan); a scalar per-example loss is an error.
  EXPECT_FLOAT_EQ(nn::compute_average_loss(per_example, {.global_batch_size = 0}).item<float>(),
                  0.f);
  EXPECT_THROW(nn::compute_average_loss(constant(1.f)), InvalidArgumentError);
  EXPECT_THROW(nn::compute_average_loss(per_example, {.global_batch_size = -1}),
               InvalidArgumentError);
}

TEST(Operators, ScalarOperandsTakeTheTensorsDtypeAsTensorFlow) {
  // images = tf.constant([0, 255, 51], tf.uint8); images / 255.  -> float32 [0., 1., 0.2]
  Tensor images = constant(std::vector<uint8_t>{0, 255, 51}, TensorShape{3});
  Tensor scaled = images / 255.f;
  EXPECT_EQ(scaled.dtype(), DType::float32);
  EXPECT_EQ(scaled.to_vector<float>(), (std::vector<float>{0.f, 1.f, 0.2f}));
  EXPECT_EQ((images / images).dtype(), DType::float32);
  // tf.constant([1, 3]) / 2  -> float64 [0.5, 1.5] (TF's truediv of int32)
  Tensor halves = constant(std::vector<int32_t>{1, 3}, TensorShape{2}) / 2;
  EXPECT_EQ(halves.dtype(), DType::float64);
  EXPECT_EQ(halves.to_vector<double>(), (std::vector<double>{0.5, 1.5}));
  // tf.constant([1.5]) * 2.0  -> float32: a C++ double does not widen the tensor.
  EXPECT_EQ((constant({1.5f}) * 2.0).dtype(), DType::float32);
  EXPECT_EQ((2.0 * constant({1.5f})).to_vector<float>(), (std::vector<float>{3.f}));
  // tf.constant([1, 2]) * 0.5 and tf.constant([1], tf.uint8) + 300 raise TypeError in TF.
  EXPECT_THROW(constant(std::vector<int32_t>{1, 2}, TensorShape{2}) * 0.5f, InvalidArgumentError);
  EXPECT_THROW(images + 300, InvalidArgumentError);
  EXPECT_THROW(-1 + images, InvalidArgumentError);
  EXPECT_EQ((images + 0).dtype(), DType::uint8);
}

TEST(Operators, CompoundAssignmentRebindsTheNameAsPython) {
  // image = tf.constant([0, 255, 51], tf.uint8)
  // image = tf.cast(image, tf.float32)
  // image /= 255                       -> [0., 1., 0.2]
  Tensor image = constant(std::vector<uint8_t>{0, 255, 51}, TensorShape{3});
  const Tensor original = image;
  image = cast(image, DType::float32);
  image /= 255;
  EXPECT_EQ(image.dtype(), DType::float32);
  EXPECT_EQ(image.to_vector<float>(), (std::vector<float>{0.f, 1.f, 0.2f}));
  // The old value is untouched: `image` names a new tensor, as in Python.
  EXPECT_EQ(original.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 255, 51}));
  // images = tf.constant([0, 255, 51], tf.uint8); images /= 255  -> float32 (truediv)
  Tensor images = original;
  images /= 255;
  EXPECT_EQ(images.dtype(), DType::float32);

  // total_loss = 0.0
  // total_loss += tf.constant(1.5)     -> 1.5
  // total_loss += tf.constant(2.25)    -> 3.75
  Tensor total_loss = constant(0.0f);
  const Tensor before = total_loss;
  total_loss += constant(1.5f);
  total_loss += constant(2.25f);
  EXPECT_EQ(total_loss.item<float>(), 3.75f);
  EXPECT_EQ(before.item<float>(), 0.f);

  // x = tf.constant([4., 6.]); x -= 1; x *= tf.constant([2., 0.5])  -> [6., 2.5]
  Tensor x = constant({4.f, 6.f});
  x -= 1;
  x *= constant({2.f, 0.5f});
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{6.f, 2.5f}));
  // The result is the left operand, so assignments chain as C++'s do.
  Tensor y = constant({1.f});
  EXPECT_EQ((y += 2.f).item<float>(), 3.f);
  EXPECT_EQ(y.item<float>(), 3.f);
  // A scalar the dtype cannot hold is an error, as for `+` (TF: TypeError).
  Tensor counts = constant(std::vector<int32_t>{1, 2}, TensorShape{2});
  EXPECT_THROW(counts *= 0.5f, InvalidArgumentError);
  EXPECT_EQ(counts.to_vector<int32_t>(), (std::vector<int32_t>{1, 2}));
}

TEST(NnOps, ScaleRegularizationLossDividesTheSumByTheReplicas) {
  // tf.nn.scale_regularization_loss([0.5, 1.5]) outside a strategy: 2.0;
  // inside strategy.run with 4 replicas in sync: 0.5.
  EXPECT_FLOAT_EQ(nn::scale_regularization_loss(constant({0.5f, 1.5f})).item<float>(), 2.f);
  NumReplicasInSyncScope four(4);
  EXPECT_FLOAT_EQ(nn::scale_regularization_loss(constant({0.5f, 1.5f})).item<float>(), 0.5f);
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
}

TEST(NnOps, Conv2DSamePaddingPutsTheOddRowAfterAndDilationSkipsCells) {
  // H = 4, a 4x1 all-ones window, SAME: 3 rows of padding, 1 before and 2 after (TF).
  Tensor x = constant({1.f, 2.f, 3.f, 4.f}, {1, 4, 1, 1});
  EXPECT_EQ(nn::conv2d(x, ones({4, 1, 1, 1}), {.padding = "SAME"}).to_vector<float>(),
            (std::vector<float>{6, 10, 9, 7}));
  // A 2x1 window dilated by 2 covers rows i and i + 2.
  Tensor x5 = constant({1.f, 2.f, 3.f, 4.f, 5.f}, {1, 5, 1, 1});
  EXPECT_EQ(nn::conv2d(x5, ones({2, 1, 1, 1}), {.dilations = {2, 1}}).to_vector<float>(),
            (std::vector<float>{4, 6, 8}));
}

// TensorFlow (the required positionals, then the keywords):
//   tf.nn.conv2d(x, f, strides=[1, 1], padding="SAME")
//   tf.nn.conv2d(x5, f2, [1, 1], "VALID", data_format="NHWC", dilations=[2, 1])
TEST(NnOps, Conv2DTakesTensorFlowsPositionalStridesAndPadding) {
  Tensor x = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f}, {1, 3, 3, 1});
  Tensor f = ones({2, 2, 1, 1});
  EXPECT_EQ(nn::conv2d(x, f, {1, 1}, "SAME").to_vector<float>(),
            (std::vector<float>{12, 16, 9, 24, 28, 15, 15, 17, 9}));
  EXPECT_EQ(nn::conv2d(x, f, {2, 2}, "VALID").to_vector<float>(), (std::vector<float>{12}));
  Tensor x5 = constant({1.f, 2.f, 3.f, 4.f, 5.f}, {1, 5, 1, 1});
  EXPECT_EQ(nn::conv2d(x5, ones({2, 1, 1, 1}), {1, 1}, "VALID",
                       {.data_format = "NHWC", .dilations = {2, 1}})
                .to_vector<float>(),
            (std::vector<float>{4, 6, 8}));
  EXPECT_THROW(nn::conv2d(x, f, {1, 1}, "SAME", {.data_format = "NCHW"}), UnimplementedError);
  EXPECT_THROW(nn::conv2d(x, f, {1, 1}, "SAME", {.data_format = "NWHC"}), InvalidArgumentError);
  EXPECT_THROW(nn::conv2d(x, f, {1, 1}, "FULL"), InvalidArgumentError);
}

TEST(NnOps, PoolsMatchHandComputedValues) {
  Tensor x = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f}, {1, 3, 3, 1});
  EXPECT_EQ(nn::max_pool2d(x, {2, 2}, {2, 2}, "SAME").to_vector<float>(),
            (std::vector<float>{5, 6, 8, 9}));
  // TF's one-element form applies to both dims.
  EXPECT_EQ(nn::max_pool2d(x, {2}, {2}, "SAME").to_vector<float>(),
            (std::vector<float>{5, 6, 8, 9}));
  EXPECT_EQ(nn::avg_pool2d(x, {2, 2}, {2, 2}, "SAME").to_vector<float>(),
            (std::vector<float>{3, 4.5f, 7.5f, 9}));
  Tensor dy = constant({1.f, 2.f, 3.f, 4.f}, {1, 2, 2, 1});
  EXPECT_EQ(
      nn::max_pool2d_grad(x, nn::max_pool2d(x, {2, 2}, {2, 2}, "SAME"), dy, {2, 2}, {2, 2}, "SAME")
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
    for (size_t j = 0; j < b.size(); ++j)
      ASSERT_EQ(cv[i * b.size() + j], a[i] - b[j]) << i << "," << j;
  Tensor t = transpose(c);
  auto tv = t.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < b.size(); ++j) ASSERT_EQ(tv[j * a.size() + i], a[i] - b[j]);
  internal::reset_runtime_for_testing();
}

}  // namespace
}  // namespace strata

// Kernels against naive reference loops (computed in double) over many
// geometries, in both floating dtypes.
namespace strata {
namespace {

std::vector<double> random_values(int64_t n, uint32_t seed, int levels = 0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::uniform_int_distribution<int> level(0, std::max(levels - 1, 0));
  std::vector<double> v(static_cast<size_t>(n));
  // `levels` > 0 draws from a few values only, so that windows have ties.
  for (double& e : v) e = levels > 0 ? static_cast<double>(level(gen)) : dist(gen);
  return v;
}

Tensor make(const std::vector<double>& v, const TensorShape& shape, DType dtype) {
  return cast(constant(v, shape), dtype);
}

std::vector<double> values(const Tensor& t) { return cast(t, DType::float64).to_vector<double>(); }

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i])))
        << what << " element " << i;
}

// One 2-D window geometry, derived independently of nn_ops.cc from TF's
// documented rule: window (k - 1) * d + 1; SAME: out = ceil(in / s), total
// padding max((out - 1) * s + window - in, 0), half of it (rounded down) before.
struct Geo {
  int64_t n, h, w, c, kh, kw, o, sh, sw, dh, dw;
  std::string padding;
  int64_t oh = 0, ow = 0, pt = 0, pl = 0;
  void derive() {
    auto one = [&](int64_t in, int64_t k, int64_t s, int64_t d, int64_t& out, int64_t& pad) {
      const int64_t win = (k - 1) * d + 1;
      if (padding == "SAME") {
        out = (in + s - 1) / s;
        pad = std::max<int64_t>((out - 1) * s + win - in, 0) / 2;
      } else {
        out = in >= win ? (in - win) / s + 1 : 0;
        pad = 0;
      }
    };
    one(h, kh, sh, dh, oh, pt);
    one(w, kw, sw, dw, ow, pl);
  }
  std::string str() const {
    return "n" + std::to_string(n) + " " + std::to_string(h) + "x" + std::to_string(w) + "x" +
           std::to_string(c) + " k" + std::to_string(kh) + "x" + std::to_string(kw) + " o" +
           std::to_string(o) + " s" + std::to_string(sh) + "," + std::to_string(sw) + " d" +
           std::to_string(dh) + "," + std::to_string(dw) + " " + padding;
  }
  // Calls fn(input index, filter index, output index) for every tap inside the input.
  void taps(const std::function<void(int64_t, int64_t, int64_t)>& fn) const {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x)
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t iy = y * sh + i * dh - pt, ix = x * sw + j * dw - pl;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              for (int64_t ci = 0; ci < c; ++ci)
                for (int64_t co = 0; co < o; ++co)
                  fn(((b * h + iy) * w + ix) * c + ci, ((i * kw + j) * c + ci) * o + co,
                     ((b * oh + y) * ow + x) * o + co);
            }
  }
};

std::vector<Geo> conv_geometries() {
  std::vector<Geo> gs = {
      {2, 5, 5, 2, 3, 3, 3, 1, 1, 1, 1, "VALID"},
      {2, 5, 5, 2, 3, 3, 3, 1, 1, 1, 1, "SAME"},
      {3, 7, 6, 3, 3, 2, 4, 2, 2, 1, 1, "SAME"},
      {3, 7, 6, 3, 3, 2, 4, 2, 3, 1, 1, "VALID"},
      {2, 8, 8, 2, 3, 3, 2, 1, 1, 2, 2, "SAME"},
      {2, 9, 7, 1, 2, 3, 2, 1, 2, 3, 1, "VALID"},
      {2, 6, 6, 4, 1, 1, 5, 1, 1, 1, 1, "VALID"},  // pointwise: no im2col
      {1, 6, 5, 4, 1, 1, 3, 2, 2, 1, 1, "SAME"},   // 1x1 with stride
      {1, 4, 4, 3, 4, 4, 2, 1, 1, 1, 1, "SAME"},   // padding 1 before, 2 after
      {2, 3, 3, 2, 5, 5, 2, 1, 1, 1, 1, "SAME"},   // window larger than the input
      {1, 2, 2, 1, 3, 3, 1, 1, 1, 1, 1, "VALID"},  // empty output
      {40, 6, 6, 3, 3, 3, 4, 1, 1, 1, 1, "SAME"},  // many chunks and filter-gradient groups
      {2, 4, 4, 0, 3, 3, 2, 1, 1, 1, 1, "SAME"},   // no input channels
      {2, 4, 4, 2, 3, 3, 0, 1, 1, 1, 1, "SAME"},   // no output channels
      {2, 3, 3, 2, 1, 1, 0, 1, 1, 1, 1, "VALID"},  // pointwise, no output channels
      {0, 4, 4, 2, 3, 3, 2, 2, 2, 1, 1, "SAME"},   // empty batch
      // At least 8 output channels: the direct float32 kernels on AVX-512 CPUs
      // (conv_direct.cc), including tails of 16-lane vectors and blocks of 64.
      {2, 7, 9, 3, 3, 3, 20, 1, 1, 1, 1, "SAME"},
      {2, 7, 9, 3, 3, 3, 20, 1, 1, 1, 1, "VALID"},
      {2, 9, 8, 9, 3, 3, 17, 2, 2, 1, 1, "SAME"},     // stride 2, odd sizes
      {2, 9, 8, 9, 3, 3, 8, 2, 3, 1, 1, "VALID"},     // unequal strides
      {1, 11, 10, 10, 3, 2, 70, 1, 1, 1, 1, "SAME"},  // 64 + 6 output channels
      {2, 10, 9, 12, 3, 3, 16, 1, 1, 2, 2, "SAME"},   // dilation
      {2, 10, 9, 12, 3, 3, 16, 1, 2, 2, 1, "VALID"},
      {1, 4, 4, 9, 4, 4, 8, 1, 1, 1, 1, "SAME"},       // padding 1 before, 2 after
      {3, 3, 3, 8, 5, 5, 9, 1, 1, 1, 1, "SAME"},       // window larger than the input
      {2, 3, 4, 8, 3, 3, 8, 1, 1, 1, 1, "VALID"},      // one output row (2 columns)
      {2, 28, 28, 1, 3, 3, 32, 1, 1, 1, 1, "VALID"},   // the CNN's first layer
      {2, 14, 14, 32, 3, 3, 64, 1, 1, 1, 1, "VALID"},  // and its second
      {1, 13, 15, 33, 3, 3, 49, 1, 1, 1, 1, "SAME"},
      {40, 6, 6, 9, 3, 3, 20, 1, 1, 1, 1, "SAME"},  // direct, many filter-gradient groups
  };
  for (Geo& g : gs) g.derive();
  return gs;
}

TEST(NnKernels, Conv2DAndBackpropsMatchNaiveLoops) {
  uint32_t seed = 1;
  for (DType dtype : {DType::float32, DType::float64}) {
    const double tol = dtype == DType::float32 ? 1e-5 : 1e-12;
    for (const Geo& g : conv_geometries()) {
      const std::string what = g.str() + (dtype == DType::float32 ? " f32" : " f64");
      const TensorShape xs{g.n, g.h, g.w, g.c}, fs{g.kh, g.kw, g.c, g.o}, ys{g.n, g.oh, g.ow, g.o};
      const auto xv = random_values(xs.num_elements(), seed++);
      const auto fv = random_values(fs.num_elements(), seed++);
      const auto dyv = random_values(ys.num_elements(), seed++);
      std::vector<double> y(ys.num_elements()), dx(xs.num_elements()), df(fs.num_elements());
      g.taps([&](int64_t xi, int64_t fi, int64_t yi) {
        y[yi] += xv[xi] * fv[fi];
        dx[xi] += fv[fi] * dyv[yi];
        df[fi] += xv[xi] * dyv[yi];
      });
      const nn::Conv2DOptions o{
          .strides = {g.sh, g.sw}, .padding = g.padding, .dilations = {g.dh, g.dw}};
      const Tensor x = make(xv, xs, dtype), f = make(fv, fs, dtype), dy = make(dyv, ys, dtype);
      const Tensor out = nn::conv2d(x, f, o);
      ASSERT_EQ(out.shape(), ys) << what;
      ASSERT_EQ(out.dtype(), dtype) << what;
      expect_near_all(values(out), y, tol, what + " conv2d");
      expect_near_all(values(nn::conv2d_backprop_input(xs, f, dy, o)), dx, tol,
                      what + " backprop_input");
      expect_near_all(values(nn::conv2d_backprop_filter(x, fs, dy, o)), df, tol,
                      what + " backprop_filter");
    }
  }
}

std::vector<Geo> pool_geometries() {
  std::vector<Geo> gs = {
      {2, 5, 5, 2, 2, 2, 0, 2, 2, 1, 1, "VALID"}, {2, 5, 5, 2, 2, 2, 0, 2, 2, 1, 1, "SAME"},
      {1, 4, 4, 1, 3, 3, 0, 1, 1, 1, 1, "SAME"},  {1, 4, 4, 1, 3, 3, 0, 1, 1, 1, 1, "VALID"},
      {3, 7, 6, 3, 3, 2, 0, 2, 1, 1, 1, "SAME"},  {3, 7, 6, 3, 2, 3, 0, 1, 3, 1, 1, "VALID"},
      {2, 3, 3, 2, 4, 4, 0, 1, 1, 1, 1, "SAME"},  {1, 2, 2, 1, 3, 3, 0, 1, 1, 1, 1, "VALID"},
      {2, 4, 4, 0, 2, 2, 0, 2, 2, 1, 1, "SAME"},  {0, 4, 4, 2, 2, 2, 0, 2, 2, 1, 1, "VALID"},
  };
  for (Geo& g : gs) g.derive();
  return gs;
}

TEST(NnKernels, PoolsAndTheirGradientsMatchNaiveLoops) {
  uint32_t seed = 100;
  for (DType dtype : {DType::float32, DType::float64}) {
    const double tol = dtype == DType::float32 ? 1e-6 : 1e-13;
    for (const Geo& g : pool_geometries()) {
      const std::string what = g.str() + (dtype == DType::float32 ? " f32" : " f64");
      const TensorShape xs{g.n, g.h, g.w, g.c}, ys{g.n, g.oh, g.ow, g.c};
      // Three levels only: most max windows have ties, which go to the first max.
      const auto xv = random_values(xs.num_elements(), seed++, 3);
      const auto dyv = random_values(ys.num_elements(), seed++);
      std::vector<double> mx(ys.num_elements()), av(ys.num_elements()), dmx(xs.num_elements()),
          dav(xs.num_elements());
      for (int64_t b = 0; b < g.n; ++b)
        for (int64_t y = 0; y < g.oh; ++y)
          for (int64_t x = 0; x < g.ow; ++x)
            for (int64_t ch = 0; ch < g.c; ++ch) {
              const int64_t yi = ((b * g.oh + y) * g.ow + x) * g.c + ch;
              std::vector<int64_t> in;  // in-bounds input indices in row-major window order
              for (int64_t i = 0; i < g.kh; ++i)
                for (int64_t j = 0; j < g.kw; ++j) {
                  const int64_t iy = y * g.sh + i - g.pt, ix = x * g.sw + j - g.pl;
                  if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
                    in.push_back(((b * g.h + iy) * g.w + ix) * g.c + ch);
                }
              ASSERT_FALSE(in.empty()) << what;
              int64_t arg = in[0];
              double sum = 0;
              for (int64_t idx : in) {
                if (xv[idx] > xv[arg]) arg = idx;
                sum += xv[idx];
              }
              mx[yi] = xv[arg];
              av[yi] = sum / static_cast<double>(in.size());
              dmx[arg] += dyv[yi];
              for (int64_t idx : in) dav[idx] += dyv[yi] / static_cast<double>(in.size());
            }
      const Tensor x = make(xv, xs, dtype), dy = make(dyv, ys, dtype);
      const Tensor m = nn::max_pool2d(x, {g.kh, g.kw}, {g.sh, g.sw}, g.padding);
      ASSERT_EQ(m.shape(), ys) << what;
      ASSERT_EQ(m.dtype(), dtype) << what;
      expect_near_all(values(m), mx, 0, what + " max_pool2d");
      expect_near_all(values(nn::avg_pool2d(x, {g.kh, g.kw}, {g.sh, g.sw}, g.padding)), av, tol,
                      what + " avg_pool2d");
      expect_near_all(values(nn::max_pool2d_grad(x, m, dy, {g.kh, g.kw}, {g.sh, g.sw}, g.padding)),
                      dmx, tol, what + " max_pool2d_grad");
      expect_near_all(values(nn::avg_pool2d_grad(xs, dy, {g.kh, g.kw}, {g.sh, g.sw}, g.padding)),
                      dav, tol, what + " avg_pool2d_grad");
    }
  }
}

TEST(NnKernels, ConvResultsDoNotDependOnThreadCount) {
  // The batch-40 geometries: many chunks and filter-gradient groups, through
  // im2col + GEMM (4 output channels) and the direct kernels (20).
  for (const Geo& g : conv_geometries()) {
    if (g.n != 40) continue;
    const TensorShape xs{g.n, g.h, g.w, g.c}, fs{g.kh, g.kw, g.c, g.o}, ys{g.n, g.oh, g.ow, g.o};
    auto run = [&](int threads) {
      internal::reset_runtime_for_testing();
      config::set_intra_op_parallelism_threads(threads);
      const Tensor x = make(random_values(xs.num_elements(), 7), xs, DType::float32);
      const Tensor f = make(random_values(fs.num_elements(), 8), fs, DType::float32);
      const Tensor dy = make(random_values(ys.num_elements(), 9), ys, DType::float32);
      const nn::Conv2DOptions o{.padding = "SAME"};
      return std::vector<std::vector<float>>{
          nn::conv2d(x, f, o).to_vector<float>(),
          nn::conv2d_backprop_input(xs, f, dy, o).to_vector<float>(),
          nn::conv2d_backprop_filter(x, fs, dy, o).to_vector<float>()};
    };
    const auto one = run(1);
    const auto three = run(3);
    internal::reset_runtime_for_testing();
    EXPECT_EQ(one, three) << g.str();
  }
}

// The direct AVX-512 kernels called directly (not through nn::conv2d's
// choice of path) against the naive loops, over a deterministic random sweep
// of small geometries: odd sizes, 1..5 x 1..5 windows, strides 1..3,
// dilations 1..2, SAME/VALID, output channels from 8 to 130 (vector tails and
// several 64-channel blocks). Every geometry a *_supported() accepts is run.
TEST(NnKernels, DirectConvKernelsMatchNaiveLoopsOverASweep) {
  if (!kernels::internal::direct_conv_enabled()) {
    GTEST_SKIP() << "no AVX-512F on this CPU (or STRATA_CONV_DIRECT=0): im2col + GEMM only";
  }
  std::mt19937 gen(2024);
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(gen));
  };
  int forward = 0, input = 0, filter = 0;
  for (int trial = 0; (forward < 300 || input < 100) && trial < 5000; ++trial) {
    Geo g{pick({1, 2, 3}),
          pick({1, 2, 3, 5, 7, 8, 11, 13}),
          pick({1, 2, 4, 5, 6, 9, 12, 13}),
          pick({1, 2, 3, 5, 8, 9, 16, 17}),
          pick({1, 2, 3, 4, 5}),
          pick({1, 2, 3, 5}),
          pick({8, 9, 15, 16, 17, 31, 33, 48, 64, 65, 70, 130}),
          pick({1, 1, 2, 3}),
          pick({1, 1, 2, 3}),
          pick({1, 1, 2}),
          pick({1, 1, 2}),
          pick({0, 1}) == 0 ? "SAME" : "VALID"};
    g.derive();
    if (g.oh == 0 || g.ow == 0 || g.n * g.oh * g.ow * g.kh * g.kw * g.c * g.o > 1000000) continue;
    const kernels::ConvGeometry cg{.batch = g.n,
                                   .in_h = g.h,
                                   .in_w = g.w,
                                   .in_c = g.c,
                                   .filter_h = g.kh,
                                   .filter_w = g.kw,
                                   .out_c = g.o,
                                   .out_h = g.oh,
                                   .out_w = g.ow,
                                   .stride_h = g.sh,
                                   .stride_w = g.sw,
                                   .dilation_h = g.dh,
                                   .dilation_w = g.dw,
                                   .pad_top = g.pt,
                                   .pad_left = g.pl};
    const bool f_ok = kernels::internal::direct_forward_supported(cg);
    const bool i_ok = kernels::internal::direct_backprop_input_supported(cg);
    const bool w_ok = kernels::internal::direct_backprop_filter_supported(cg);
    // The predicates' documented limits: >= 8 output channels (input
    // channels for the input gradient, which is also stride 1 only).
    EXPECT_TRUE(f_ok && w_ok) << g.str();
    EXPECT_EQ(i_ok, g.sh == 1 && g.sw == 1 && g.c >= 8) << g.str();
    const int64_t nx = g.n * g.h * g.w * g.c, nf = g.kh * g.kw * g.c * g.o,
                  ny = g.n * g.oh * g.ow * g.o;
    const auto xv = random_values(nx, static_cast<uint32_t>(3 * trial + 1));
    const auto fv = random_values(nf, static_cast<uint32_t>(3 * trial + 2));
    const auto dyv = random_values(ny, static_cast<uint32_t>(3 * trial + 3));
    std::vector<double> y(static_cast<size_t>(ny)), dx(static_cast<size_t>(nx)),
        df(static_cast<size_t>(nf));
    g.taps([&](int64_t xi, int64_t fi, int64_t yi) {
      y[yi] += xv[xi] * fv[fi];
      dx[xi] += fv[fi] * dyv[yi];
      df[fi] += xv[xi] * dyv[yi];
    });
    const std::vector<float> x32(xv.begin(), xv.end()), f32(fv.begin(), fv.end()),
        dy32(dyv.begin(), dyv.end());
    // NaN-filled outputs: every element must be written.
    auto run = [](size_t n, const std::function<void(float*)>& kernel) {
      std::vector<float> out(n, std::numeric_limits<float>::quiet_NaN());
      kernel(out.data());
      return std::vector<double>(out.begin(), out.end());
    };
    if (f_ok) {
      ++forward;
      expect_near_all(run(y.size(),
                          [&](float* o) {
                            kernels::internal::direct_conv_forward(x32.data(), f32.data(), o, cg);
                          }),
                      y, 1e-5, g.str() + " direct forward");
    }
    if (i_ok) {
      ++input;
      expect_near_all(run(dx.size(),
                          [&](float* o) {
                            kernels::internal::direct_conv_backprop_input(f32.data(), dy32.data(),
                                                                          o, cg);
                          }),
                      dx, 1e-5, g.str() + " direct backprop input");
    }
    if (w_ok) {
      ++filter;
      expect_near_all(run(df.size(),
                          [&](float* o) {
                            kernels::internal::direct_conv_backprop_filter(x32.data(), dy32.data(),
                                                                           o, cg);
                          }),
                      df, 1e-5, g.str() + " direct backprop filter");
    }
    if (HasFatalFailure()) return;
  }
  // The sweep ran (it cannot pass by skipping everything).
  EXPECT_GE(forward, 300);
  EXPECT_GE(input, 100);
  EXPECT_EQ(filter, forward);
}

TEST(NnKernels, ReluGradPassesGradientsWherePositive) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {DType::float32, DType::float64}) {
    const Tensor g = make({1, 2, 3, 4, 5, 6, nan, nan}, {2, 4}, dtype);
    // Exactly zero passes nothing (so the relu's output works as features).
    const Tensor f = make({-1, 0, 0.5, -0.0, 2, -3, 1, -1}, {2, 4}, dtype);
    const Tensor out = nn::relu_grad(g, f);
    EXPECT_EQ(out.shape(), TensorShape({2, 4}));
    EXPECT_EQ(out.dtype(), dtype);
    const std::vector<double> v = values(out);
    const std::vector<double> want = {0, 0, 3, 0, 5, 0};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(v[i], want[i]) << i;
    // As TF's gradients * (features > 0): a NaN gradient stays NaN.
    EXPECT_TRUE(std::isnan(v[6]));
    EXPECT_TRUE(std::isnan(v[7]));
    // Large enough for several parallel chunks.
    const Tensor big_g = random::uniform({1000, 301}, {.dtype = dtype, .seed = 3});
    const Tensor big_f = random::uniform({1000, 301}, {.minval = -1, .dtype = dtype, .seed = 4});
    EXPECT_EQ(values(nn::relu_grad(big_g, big_f)),
              values(big_g * cast(greater(big_f, zeros_like(big_f)), dtype)));
    EXPECT_EQ(nn::relu_grad(zeros({0, 3}, dtype), zeros({0, 3}, dtype)).shape(),
              TensorShape({0, 3}));
  }
}

TEST(NnKernels, ReluGradArgumentErrorsNameTheValues) {
  auto message = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const InvalidArgumentError& e) {
      return e.what();
    }
    return "no InvalidArgumentError";
  };
  EXPECT_NE(message([] {
              nn::relu_grad(zeros({2, 3}), zeros({3, 2}));
            }).find("[2, 3] and [3, 2]"),
            std::string::npos);
  EXPECT_NE(message([] {
              nn::relu_grad(zeros({2}), zeros({2}, DType::float64));
            }).find("float32 and float64"),
            std::string::npos);
  EXPECT_NE(message([] {
              nn::relu_grad(zeros({2}, DType::int32), zeros({2}, DType::int32));
            }).find("int32"),
            std::string::npos);
}

TEST(NnKernels, TiledConvKernelsComputeOneWindowOfTheWholeConvolution) {
  if (!kernels::internal::direct_conv_enabled()) {
    GTEST_SKIP() << "no AVX-512F on this CPU (or STRATA_CONV_DIRECT=0): no tiled kernels";
  }
  // [2, 12, 10, 8] held as 3 x 2 tiles [2, 4, 5, 8]; conv 16 3x3 SAME.
  const Tensor x = random::normal({2, 12, 10, 8}, {.seed = 81});
  const Tensor w = random::normal({3, 3, 8, 16}, {.seed = 82});
  const Tensor dy = random::normal({2, 12, 10, 16}, {.seed = 83});
  kernels::ConvGeometry g;
  g.batch = 2, g.in_h = 12, g.in_w = 10, g.in_c = 8, g.filter_h = 3, g.filter_w = 3, g.out_c = 16;
  g.out_h = 12, g.out_w = 10, g.pad_top = 1, g.pad_left = 1;
  ASSERT_TRUE(kernels::tiled_conv2d_supported(g) &&
              kernels::tiled_conv2d_backprop_input_supported(g));
  auto tiles_of = [](const Tensor& t) {
    kernels::ConvTileGrid grid{{}, 3, 2};
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j)
        grid.tiles.push_back(slice(t, {0, i * 4, j * 5, 0}, {-1, 4, 5, -1}));
    return grid;
  };
  const kernels::ConvWindow window{3, 9, 2, 7};  // crosses every tile boundary
  auto part = [&](const Tensor& t) { return slice(t, {0, 3, 2, 0}, {-1, 6, 5, -1}); };
  EXPECT_EQ(kernels::tiled_conv2d(tiles_of(x), w, g, window).to_vector<float>(),
            part(kernels::conv2d(x, w, g)).to_vector<float>());
  EXPECT_EQ(kernels::tiled_conv2d_backprop_input(w, tiles_of(dy), g, window).to_vector<float>(),
            part(kernels::conv2d_backprop_input(w, dy, g)).to_vector<float>());
  // The filter gradient of the window: that of the whole conv with dy zero outside it.
  const Tensor masked = pad(part(dy), {{0, 0}, {3, 3}, {2, 3}, {0, 0}});
  const Tensor df = kernels::tiled_conv2d_backprop_filter(tiles_of(x), part(dy), g, window);
  const std::vector<float> a = df.to_vector<float>(),
                           b = kernels::conv2d_backprop_filter(x, masked, g).to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4 * (1 + std::abs(b[i]))) << i;
  // Invalid tiles or windows name the bad values.
  kernels::ConvTileGrid short_grid = tiles_of(x);
  short_grid.tiles.pop_back();
  EXPECT_THROW(kernels::tiled_conv2d(short_grid, w, g, window), InvalidArgumentError);
  kernels::ConvTileGrid wrong = tiles_of(x);
  wrong.grid_cols = 3, wrong.grid_rows = 2;
  try {
    kernels::tiled_conv2d(wrong, w, g, window);
    ADD_FAILURE() << "no InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 12, 10, 8]"), std::string::npos) << e.what();
  }
  try {
    kernels::tiled_conv2d(tiles_of(x), w, g, {0, 13, 0, 10});
    ADD_FAILURE() << "no InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("[0, 13)"), std::string::npos) << e.what();
  }
}

TEST(NnKernels, ConvAndPoolArgumentErrorsNameTheValues) {
  auto message = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const InvalidArgumentError& e) {
      return e.what();
    }
    return "no InvalidArgumentError";
  };
  const Tensor x = zeros({1, 4, 4, 2});
  EXPECT_NE(message([&] {
              nn::conv2d(x, zeros({3, 3, 3, 1}));
            }).find("[1, 4, 4, 2] and [3, 3, 3, 1]"),
            std::string::npos);
  EXPECT_THROW(nn::conv2d(x, zeros({3, 3, 1, 1})), UnimplementedError);  // TF: 2 groups
  EXPECT_NE(message([&] {
              nn::conv2d(x, zeros({3, 3, 2, 1}, DType::float64));
            }).find("float32 and float64"),
            std::string::npos);
  EXPECT_NE(message([&] {
              nn::conv2d(cast(x, DType::int32), zeros({3, 3, 2, 1}, DType::int32));
            }).find("int32"),
            std::string::npos);
  EXPECT_NE(message([&] {
              nn::conv2d(x, zeros({3, 3, 2, 1}), {.padding = "FULL"});
            }).find("\"FULL\""),
            std::string::npos);
  EXPECT_NE(message([&] {
              nn::conv2d(x, zeros({3, 3, 2, 1}), {.dilations = {0, 1}});
            }).find("dilations"),
            std::string::npos);
  EXPECT_NE(message([&] {
              nn::conv2d(x, zeros({6, 1, 2, 1}));
            }).find("height 4 is smaller than the window 6"),
            std::string::npos);
  EXPECT_NE(message([&] {
              nn::conv2d_backprop_input({1, 4, 4, 2}, zeros({3, 3, 2, 1}), zeros({1, 4, 4, 1}));
            }).find("expected out_backprop shape [1, 2, 2, 1], got [1, 4, 4, 1]"),
            std::string::npos);
  EXPECT_NE(message([&] {
              nn::max_pool2d(cast(x, DType::int32), {2, 2}, {2, 2});
            }).find("int32"),
            std::string::npos);
  EXPECT_NE(message([&] {
              nn::avg_pool2d(zeros({4, 4}), {2, 2}, {2, 2});
            }).find("[4, 4]"),
            std::string::npos);
  EXPECT_NE(message([&] { nn::max_pool2d(x, {2, 2}, {0, 2}); }).find("strides"), std::string::npos);
}

// Reference batched matmul: broadcast batch indices by hand.
std::vector<double> matmul_ref(const std::vector<double>& a, const TensorShape& as,
                               const std::vector<double>& b, const TensorShape& bs, bool ta,
                               bool tb, TensorShape& out_shape) {
  const int ra = as.rank(), rb = bs.rank();
  const int64_t m = ta ? as[ra - 1] : as[ra - 2], k = ta ? as[ra - 2] : as[ra - 1];
  const int64_t n = tb ? bs[rb - 2] : bs[rb - 1];
  const int r = std::max(ra, rb) - 2;
  std::vector<int64_t> bd(r), adim(r, 1), bdim(r, 1);
  for (int i = 0; i < ra - 2; ++i) adim[r - (ra - 2) + i] = as[i];
  for (int i = 0; i < rb - 2; ++i) bdim[r - (rb - 2) + i] = bs[i];
  int64_t batch = 1;
  for (int i = 0; i < r; ++i) batch *= (bd[i] = std::max(adim[i], bdim[i]));
  std::vector<int64_t> dims = bd;
  dims.push_back(m);
  dims.push_back(n);
  out_shape = TensorShape(dims);
  std::vector<double> out(static_cast<size_t>(batch * m * n));
  for (int64_t t = 0; t < batch; ++t) {
    int64_t rem = t, ai = 0, bi = 0, astride = 1, bstride = 1;
    for (int i = r - 1; i >= 0; --i) {
      const int64_t idx = rem % bd[i];
      rem /= bd[i];
      ai += (adim[i] == 1 ? 0 : idx) * astride;
      bi += (bdim[i] == 1 ? 0 : idx) * bstride;
      astride *= adim[i];
      bstride *= bdim[i];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double av = a[ai * m * k + (ta ? p * m + i : i * k + p)];
          const double bv = b[bi * k * n + (tb ? j * k + p : p * n + j)];
          acc += av * bv;
        }
        out[t * m * n + i * n + j] = acc;
      }
  }
  return out;
}

TEST(MathOps, BatchMatMulBroadcastsBatchDimsLikeNumPy) {
  struct Case {
    std::vector<int64_t> a_batch, b_batch;
  };
  const std::vector<Case> cases = {{{}, {}},     {{3}, {3}},   {{2, 1}, {4}}, {{1}, {2, 3}},
                                   {{}, {2, 2}}, {{3, 2}, {}}, {{4}, {1}},    {{5}, {}}};
  uint32_t seed = 500;
  for (DType dtype : {DType::float32, DType::float64, DType::int32}) {
    for (const Case& c : cases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          const int64_t m = 3, k = 4, n = 5;
          std::vector<int64_t> ad = c.a_batch, bd = c.b_batch;
          ad.push_back(ta ? k : m);
          ad.push_back(ta ? m : k);
          bd.push_back(tb ? n : k);
          bd.push_back(tb ? k : n);
          const TensorShape as(ad), bs(bd);
          // Small integers: exact in every dtype.
          auto av = random_values(as.num_elements(), seed++, 5);
          auto bv = random_values(bs.num_elements(), seed++, 5);
          TensorShape want_shape;
          const auto want = matmul_ref(av, as, bv, bs, ta, tb, want_shape);
          const Tensor out = matmul(make(av, as, dtype), make(bv, bs, dtype),
                                    {.transpose_a = ta, .transpose_b = tb});
          const std::string what = "a " + as.to_string() + " b " + bs.to_string() + " ta " +
                                   std::to_string(ta) + " tb " + std::to_string(tb) + " " +
                                   std::string(dtype_name(dtype));
          ASSERT_EQ(out.shape(), want_shape) << what;
          ASSERT_EQ(out.dtype(), dtype) << what;
          expect_near_all(values(out), want, 0, what);
        }
      }
    }
  }
}

TEST(MathOps, MatMulShapeErrorsNameBothShapes) {
  try {
    matmul(zeros({2, 3}), zeros({4, 5}));
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3] and [4, 5]"), std::string::npos) << e.what();
  }
  try {
    matmul(zeros({2, 2, 3}), zeros({3, 3, 4}));
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("batch dimensions [2] and [3]"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("[2, 2, 3] and [3, 3, 4]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(matmul(zeros({3}), zeros({3, 1})), InvalidArgumentError);
  EXPECT_THROW(matmul(constant({true, false}, {1, 2}), constant({true, false}, {2, 1})),
               InvalidArgumentError);
}

TEST(NnOps, SoftmaxAndLogSoftmaxMatchNaiveRowsOnManyThreads) {
  internal::reset_runtime_for_testing();
  config::set_intra_op_parallelism_threads(3);
  const int64_t rows = 700, n = 123;
  auto v = random_values(rows * n, 900);
  for (double& e : v) e *= 30;  // large logits: exp would overflow without the max shift in float32
  for (DType dtype : {DType::float32, DType::float64}) {
    const double tol = dtype == DType::float32 ? 2e-6 : 1e-14;
    const Tensor x = make(v, {rows, n}, dtype);
    const auto xq = values(x);  // the values as stored in `dtype`
    std::vector<double> p(v.size()), lp(v.size());
    for (int64_t r = 0; r < rows; ++r) {
      const double* in = xq.data() + r * n;
      const double mx = *std::max_element(in, in + n);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += std::exp(in[i] - mx);
      for (int64_t i = 0; i < n; ++i) {
        p[r * n + i] = std::exp(in[i] - mx) / sum;
        lp[r * n + i] = in[i] - mx - std::log(sum);
      }
    }
    expect_near_all(values(softmax(x)), p, tol, "softmax");
    expect_near_all(values(log_softmax(x)), lp, tol, "log_softmax");
  }
  internal::reset_runtime_for_testing();
}

}  // namespace
}  // namespace strata
