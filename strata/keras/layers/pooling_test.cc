#include "strata/keras/layers/pooling.h"

#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/keras/layers/testing/layer_test_util.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/testing/gradient_check.h"

namespace strata::keras::layers {
namespace {

using testing_util::as_doubles;

// [1, 4, 4, 1] holding 0 .. 15 in row-major order.
Tensor grid() {
  return strata::reshape(strata::cast(strata::range(16), DType::float32), {1, 4, 4, 1});
}

TEST(Pooling2DTest, MaxAndAverageOverTwoByTwoWindows) {
  auto max_pool = MaxPooling2D({2, 2});
  auto avg_pool = AveragePooling2D();
  EXPECT_EQ(as_doubles((*max_pool)(grid())), (std::vector<double>{5, 7, 13, 15}));
  EXPECT_EQ(as_doubles((*avg_pool)(grid())), (std::vector<double>{2.5, 4.5, 10.5, 12.5}));
  EXPECT_EQ((*max_pool)(grid()).shape(), (TensorShape{1, 2, 2, 1}));
  EXPECT_EQ(max_pool->compute_output_shape({-1, 26, 26, 32}), (TensorShape{-1, 13, 13, 32}));
  EXPECT_EQ(max_pool->compute_output_shape({-1, 27, 27, 32}), (TensorShape{-1, 13, 13, 32}));
}

TEST(Pooling2DTest, SamePaddingCountsOnlyInBoundsElements) {
  auto avg = AveragePooling2D({3, 3}, {.strides = {1, 1}, .padding = "same"});
  const std::vector<double> a = as_doubles((*avg)(grid()));
  ASSERT_EQ(a.size(), 16u);
  EXPECT_DOUBLE_EQ(a[0], (0 + 1 + 4 + 5) / 4.0);                       // corner: 4 elements
  EXPECT_DOUBLE_EQ(a[5], (0 + 1 + 2 + 4 + 5 + 6 + 8 + 9 + 10) / 9.0);  // interior: 9
  EXPECT_DOUBLE_EQ(a[3], (2 + 3 + 6 + 7) / 4.0);
  // ceil(4 / 2) = 2 outputs; TF pads one row/column after.
  auto max = MaxPooling2D({3, 3}, {.strides = {2, 2}, .padding = "SAME"});
  EXPECT_EQ(as_doubles((*max)(grid())), (std::vector<double>{10, 11, 14, 15}));
  EXPECT_EQ(max->compute_output_shape({-1, 5, 4, 3}), (TensorShape{-1, 3, 2, 3}));
}

TEST(Pooling2DTest, StridesDefaultToPoolSizeAndMayDiffer) {
  auto pool = MaxPooling2D({2, 2}, {.strides = {1, 2}});
  const Tensor y = (*pool)(grid());
  EXPECT_EQ(y.shape(), (TensorShape{1, 3, 2, 1}));
  EXPECT_EQ(as_doubles(y), (std::vector<double>{5, 7, 9, 11, 13, 15}));
}

TEST(Pooling2DTest, GradientsMatchFiniteDifferences) {
  const Tensor x = strata::testing::random_uniform({2, 5, 5, 3}, -1, 1, 4);
  for (auto pool :
       {MaxPooling2D({2, 2}), MaxPooling2D({3, 3}, {.strides = {2, 2}, .padding = "same"}),
        AveragePooling2D({2, 3}, {.strides = {1, 2}, .padding = "same"})}) {
    SCOPED_TRACE(pool->name());
    auto r = strata::testing::check_gradients(
        [&](const std::vector<Tensor>& in) { return (*pool)(in[0]); }, {x});
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST(Pooling2DTest, NamesAndErrors) {
  reset_uids_for_testing();
  EXPECT_EQ(MaxPooling2D()->name(), "max_pooling2d");
  EXPECT_EQ(AveragePooling2D()->name(), "average_pooling2d");
  EXPECT_EQ(MaxPooling2D()->name(), "max_pooling2d_1");
  EXPECT_EQ(GlobalAveragePooling2D()->name(), "global_average_pooling2d");
  EXPECT_THROW(MaxPooling2D({0, 2}), InvalidArgumentError);
  EXPECT_THROW(MaxPooling2D({2, 2}, {.strides = {-1}}), InvalidArgumentError);
  EXPECT_THROW(MaxPooling2D({2, 2}, {.padding = "causal"}), InvalidArgumentError);
  EXPECT_THROW(AveragePooling2D({2, 2}, {.data_format = "channels_first"}), UnimplementedError);
  auto pool = MaxPooling2D({2, 2}, {.name = "p"});
  try {
    (*pool)(strata::ones({4, 4}));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("MaxPooling2D 'p'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4, 4]"), std::string::npos) << e.what();
  }
  EXPECT_THROW((*pool)(strata::ones({1, 1, 4, 1})),
               InvalidArgumentError);  // smaller than the window
}

TEST(GlobalPooling2DTest, ReducesHeightAndWidth) {
  const Tensor x = strata::reshape(strata::cast(strata::range(12), DType::float32), {1, 2, 3, 2});
  // channel 0 holds 0, 2, ..., 10; channel 1 holds 1, 3, ..., 11.
  EXPECT_EQ(as_doubles((*GlobalAveragePooling2D())(x)), (std::vector<double>{5, 6}));
  EXPECT_EQ(as_doubles((*GlobalMaxPooling2D())(x)), (std::vector<double>{10, 11}));
  auto keep = GlobalAveragePooling2D({.keepdims = true});
  EXPECT_EQ((*keep)(x).shape(), (TensorShape{1, 1, 1, 2}));
  EXPECT_EQ(GlobalMaxPooling2D()->compute_output_shape({-1, 7, 7, 64}), (TensorShape{-1, 64}));
  auto r = strata::testing::check_gradients(
      [&](const std::vector<Tensor>& in) { return (*GlobalAveragePooling2D())(in[0]); },
      {strata::testing::random_uniform({2, 3, 3, 2}, -1, 1, 5)});
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_THROW((*GlobalMaxPooling2D())(strata::ones({2, 3})), InvalidArgumentError);
}

// [1, 5, 1] holding 0 .. 4.
Tensor sequence() {
  return strata::reshape(strata::cast(strata::range(5), DType::float32), {1, 5, 1});
}

TEST(Pooling1DTest, WindowsAlongTheStepsAxis) {
  reset_uids_for_testing();
  auto max = MaxPooling1D();
  EXPECT_EQ(max->name(), "max_pooling1d");
  EXPECT_EQ(as_doubles((*max)(sequence())), (std::vector<double>{1, 3}));  // strides = pool_size
  EXPECT_EQ((*max)(sequence()).shape(), (TensorShape{1, 2, 1}));
  auto avg = AveragePooling1D(2, {.strides = 1});
  EXPECT_EQ(avg->name(), "average_pooling1d");
  EXPECT_EQ(as_doubles((*avg)(sequence())), (std::vector<double>{0.5, 1.5, 2.5, 3.5}));
  auto same = MaxPooling1D(2, {.padding = "same"});
  EXPECT_EQ(as_doubles((*same)(sequence())), (std::vector<double>{1, 3, 4}));
  auto same_avg = AveragePooling1D(2, {.padding = "same"});
  EXPECT_EQ(as_doubles((*same_avg)(sequence())), (std::vector<double>{0.5, 2.5, 4}));
  EXPECT_EQ(same->compute_output_shape({-1, 9, 3}), (TensorShape{-1, 5, 3}));
  auto r =
      strata::testing::check_gradients([&](const std::vector<Tensor>& in) { return (*avg)(in[0]); },
                                       {strata::testing::random_uniform({2, 6, 3}, -1, 1, 7)});
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_THROW(MaxPooling1D(0), InvalidArgumentError);
  EXPECT_THROW(MaxPooling1D(2, {.strides = 0}), InvalidArgumentError);
  EXPECT_THROW((*max)(strata::ones({2, 4})), InvalidArgumentError);
}

TEST(GlobalPooling1DTest, ReducesTheStepsAxis) {
  reset_uids_for_testing();
  const Tensor x = strata::reshape(strata::cast(strata::range(6), DType::float32), {1, 3, 2});
  auto avg = GlobalAveragePooling1D();
  EXPECT_EQ(avg->name(), "global_average_pooling1d");
  EXPECT_EQ(as_doubles((*avg)(x)), (std::vector<double>{2, 3}));
  EXPECT_EQ(as_doubles((*GlobalMaxPooling1D())(x)), (std::vector<double>{4, 5}));
  EXPECT_EQ((*GlobalAveragePooling1D({.keepdims = true}))(x).shape(), (TensorShape{1, 1, 2}));
  EXPECT_EQ(avg->compute_output_shape({-1, 10, 16}), (TensorShape{-1, 16}));
  EXPECT_THROW((*avg)(strata::ones({2, 3})), InvalidArgumentError);
}

}  // namespace
}  // namespace strata::keras::layers
