#include "strata/keras/layers/reshaping.h"

#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/keras/layers/testing/layer_test_util.h"
#include "strata/ops/array_ops.h"
#include "strata/testing/gradient_check.h"

namespace strata::keras::layers {
namespace {

using testing_util::as_doubles;

TEST(FlattenTest, KeepsTheBatchAxisAndFlattensTheRestInRowMajorOrder) {
  auto flatten = Flatten();
  const Tensor x = strata::reshape(strata::cast(strata::range(12), DType::float32), {2, 3, 2, 1});
  const Tensor y = (*flatten)(x);
  EXPECT_EQ(y.shape(), (TensorShape{2, 6}));
  EXPECT_EQ(as_doubles(y), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(flatten->compute_output_shape({-1, 28, 28, 1}), (TensorShape{-1, 784}));
  EXPECT_EQ(flatten->compute_output_shape({-1, -1, 4}), (TensorShape{-1, -1}));
  // A rank-1 input gains a feature axis, as Keras's Flatten.
  EXPECT_EQ((*flatten)(strata::ones({3})).shape(), (TensorShape{3, 1}));
  EXPECT_EQ(flatten->count_params(), 0);
}

TEST(FlattenTest, PassesGradientsThrough) {
  auto flatten = Flatten();
  auto r =
      testing::check_gradients([&](const std::vector<Tensor>& in) { return (*flatten)(in[0]); },
                               {testing::random_uniform({2, 2, 3}, -1, 1, 3)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(FlattenTest, RejectsScalarsAndChannelsFirst) {
  auto flatten = Flatten({.name = "flat"});
  try {
    (*flatten)(strata::constant(1.f));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Flatten 'flat'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Flatten({.data_format = "channels_first"}), UnimplementedError);
  EXPECT_THROW(Flatten({.data_format = "nhwc"}), InvalidArgumentError);
}

TEST(ReshapeTest, InfersOneUnknownDimension) {
  auto reshape = Reshape({-1, 4});
  const Tensor x = strata::cast(strata::reshape(strata::range(16), {2, 8}), DType::float32);
  const Tensor y = (*reshape)(x);
  EXPECT_EQ(y.shape(), (TensorShape{2, 2, 4}));
  EXPECT_EQ(as_doubles(y), as_doubles(x));
  EXPECT_EQ(reshape->compute_output_shape({-1, 8}), (TensorShape{-1, 2, 4}));
  EXPECT_EQ(reshape->compute_output_shape({-1, -1}), (TensorShape{-1, -1, 4}));
  EXPECT_EQ(Reshape({3, 2})->compute_output_shape({5, 6}), (TensorShape{5, 3, 2}));
}

TEST(ReshapeTest, PassesGradientsThrough) {
  auto reshape = Reshape({3, 2});
  auto r =
      testing::check_gradients([&](const std::vector<Tensor>& in) { return (*reshape)(in[0]); },
                               {testing::random_uniform({2, 6}, -1, 1, 4)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(ReshapeTest, RejectsBadTargetShapesAndMismatchedInputs) {
  EXPECT_THROW(Reshape({-1, -1}), InvalidArgumentError);
  EXPECT_THROW(Reshape({0, 2}), InvalidArgumentError);
  EXPECT_THROW(Reshape({-2}), InvalidArgumentError);
  auto reshape = Reshape({4, 2}, {.name = "r"});
  try {
    (*reshape)(strata::ones({2, 6}));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Reshape 'r'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2, 6]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Reshape({-1, 4})->compute_output_shape({-1, 6}), InvalidArgumentError);
}

// [1, 2, 3, 1] holding 1 .. 6.
Tensor image() {
  return strata::reshape(strata::cast(strata::range(1, 7), DType::float32), {1, 2, 3, 1});
}

TEST(ZeroPadding2DTest, PadsEachSide) {
  reset_uids_for_testing();
  auto pad = ZeroPadding2D({1, 0, 0, 2});  // one row on top, two columns on the right
  EXPECT_EQ(pad->name(), "zero_padding2d");
  const Tensor y = (*pad)(image());
  EXPECT_EQ(y.shape(), (TensorShape{1, 3, 5, 1}));
  EXPECT_EQ(as_doubles(y), (std::vector<double>{0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0}));
  EXPECT_EQ(ZeroPadding2D()->compute_output_shape({-1, 28, 28, 3}), (TensorShape{-1, 30, 30, 3}));
  EXPECT_EQ(ZeroPadding2D({1, 2})->compute_output_shape({-1, -1, 4, 3}),
            (TensorShape{-1, -1, 8, 3}));
  EXPECT_THROW(ZeroPadding2D({1, 2, 3}), InvalidArgumentError);
  EXPECT_THROW(ZeroPadding2D({-1}), InvalidArgumentError);
  EXPECT_THROW((*pad)(strata::ones({2, 3})), InvalidArgumentError);
  auto r = testing::check_gradients([&](const std::vector<Tensor>& in) { return (*pad)(in[0]); },
                                    {testing::random_uniform({2, 2, 3, 2}, -1, 1, 9)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Cropping2DTest, RemovesEdges) {
  auto crop = Cropping2D({0, 1, 1, 0});  // the bottom row and the left column
  const Tensor y = (*crop)(image());
  EXPECT_EQ(y.shape(), (TensorShape{1, 1, 2, 1}));
  EXPECT_EQ(as_doubles(y), (std::vector<double>{2, 3}));
  EXPECT_EQ(as_doubles((*Cropping2D())(image())), as_doubles(image()));
  EXPECT_EQ(Cropping2D({2, 4})->compute_output_shape({-1, 28, 28, 1}),
            (TensorShape{-1, 24, 20, 1}));
  EXPECT_THROW((*Cropping2D({1}))(image()), InvalidArgumentError);  // nothing would remain
  auto r = testing::check_gradients([&](const std::vector<Tensor>& in) { return (*crop)(in[0]); },
                                    {testing::random_uniform({2, 3, 3, 2}, -1, 1, 10)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(UpSampling2DTest, RepeatsRowsAndColumns) {
  auto up = UpSampling2D({2, 1});
  const Tensor y = (*up)(image());
  EXPECT_EQ(y.shape(), (TensorShape{1, 4, 3, 1}));
  EXPECT_EQ(as_doubles(y), (std::vector<double>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(as_doubles((*UpSampling2D({1, 2}))(image())),
            (std::vector<double>{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6}));
  EXPECT_EQ(UpSampling2D()->compute_output_shape({-1, 7, 7, 64}), (TensorShape{-1, 14, 14, 64}));
  EXPECT_THROW(UpSampling2D({2, 2}, {.interpolation = "bilinear"}), UnimplementedError);
  EXPECT_THROW(UpSampling2D({2, 2}, {.interpolation = "cubic"}), InvalidArgumentError);
  EXPECT_THROW(UpSampling2D({0, 2}), InvalidArgumentError);
  // Each input element's gradient sums the rows * cols copies.
  auto r = testing::check_gradients(
      [&](const std::vector<Tensor>& in) {
        return (*UpSampling2D({2, 3}))(in[0]);
      },
      {testing::random_uniform({2, 2, 2, 3}, -1, 1, 11)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(PermuteTest, ReordersTheNonBatchAxes) {
  reset_uids_for_testing();
  auto permute = Permute({2, 1});
  EXPECT_EQ(permute->name(), "permute");
  const Tensor x = strata::reshape(strata::cast(strata::range(6), DType::float32), {1, 2, 3});
  const Tensor y = (*permute)(x);
  EXPECT_EQ(y.shape(), (TensorShape{1, 3, 2}));
  EXPECT_EQ(as_doubles(y), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(Permute({3, 1, 2})->compute_output_shape({-1, 4, 5, 6}), (TensorShape{-1, 6, 4, 5}));
  EXPECT_THROW(Permute({0, 1}), InvalidArgumentError);
  EXPECT_THROW(Permute({1, 1}), InvalidArgumentError);
  EXPECT_THROW((*permute)(strata::ones({2, 3})), InvalidArgumentError);
  auto r =
      testing::check_gradients([&](const std::vector<Tensor>& in) { return (*permute)(in[0]); },
                               {testing::random_uniform({2, 2, 3}, -1, 1, 12)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(RepeatVectorTest, RepeatsEachExample) {
  auto repeat = RepeatVector(3);
  const Tensor y = (*repeat)(strata::constant({1.f, 2.f, 3.f, 4.f}, {2, 2}));
  EXPECT_EQ(y.shape(), (TensorShape{2, 3, 2}));
  EXPECT_EQ(as_doubles(y), (std::vector<double>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  EXPECT_EQ(repeat->compute_output_shape({-1, 32}), (TensorShape{-1, 3, 32}));
  EXPECT_THROW(RepeatVector(0), InvalidArgumentError);
  EXPECT_THROW((*repeat)(strata::ones({2, 2, 2})), InvalidArgumentError);
  auto r = testing::check_gradients([&](const std::vector<Tensor>& in) { return (*repeat)(in[0]); },
                                    {testing::random_uniform({2, 3}, -1, 1, 13)});
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace strata::keras::layers
