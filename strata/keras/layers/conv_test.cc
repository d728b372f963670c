#include "strata/keras/layers/conv.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/keras/layers/testing/layer_test_util.h"
#include "strata/ops/array_ops.h"
#include "strata/testing/gradient_check.h"

namespace strata::keras::layers {
namespace {

using testing_util::all_close;
using testing_util::as_doubles;

struct ConvCase {
  int64_t kh, kw, sh, sw, dh, dw;
  bool same;
  int64_t groups = 1;
};

// A direct NHWC / HWIO convolution with TF's SAME rule (pad_total =
// max((out - 1) * s + dilated_k - in, 0), the smaller half before).
std::vector<double> naive_conv(const Tensor& x, const Tensor& k, const ConvCase& c,
                               TensorShape* out_shape) {
  const std::vector<double> xv = as_doubles(x), kv = as_doubles(k);
  const int64_t n = x.shape()[0], h = x.shape()[1], w = x.shape()[2], ci = x.shape()[3];
  const int64_t cig = k.shape()[2], co = k.shape()[3], cog = co / c.groups;
  const int64_t ekh = (c.kh - 1) * c.dh + 1, ekw = (c.kw - 1) * c.dw + 1;
  const int64_t oh = c.same ? (h + c.sh - 1) / c.sh : (h - ekh) / c.sh + 1;
  const int64_t ow = c.same ? (w + c.sw - 1) / c.sw : (w - ekw) / c.sw + 1;
  const int64_t ph = c.same ? std::max<int64_t>((oh - 1) * c.sh + ekh - h, 0) / 2 : 0;
  const int64_t pw = c.same ? std::max<int64_t>((ow - 1) * c.sw + ekw - w, 0) / 2 : 0;
  *out_shape = TensorShape{n, oh, ow, co};
  std::vector<double> out(n * oh * ow * co, 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t o = 0; o < co; ++o) {
          const int64_t g = o / cog;
          double s = 0;
          for (int64_t a = 0; a < c.kh; ++a)
            for (int64_t e = 0; e < c.kw; ++e) {
              const int64_t y = i * c.sh + a * c.dh - ph, z = j * c.sw + e * c.dw - pw;
              if (y < 0 || y >= h || z < 0 || z >= w) continue;
              for (int64_t q = 0; q < cig; ++q) {
                s += xv[((b * h + y) * w + z) * ci + g * cig + q] *
                     kv[((a * c.kw + e) * cig + q) * co + o];
              }
            }
          out[((b * oh + i) * ow + j) * co + o] = s;
        }
  return out;
}

TEST(Conv2DTest, MatchesADirectConvolution) {
  const std::vector<ConvCase> cases = {
      {3, 2, 1, 1, 1, 1, false},   {3, 3, 1, 1, 1, 1, true},     {3, 2, 2, 2, 1, 1, true},
      {2, 3, 2, 1, 1, 1, false},   {3, 3, 1, 1, 2, 2, false},    {2, 2, 1, 1, 2, 1, true},
      {3, 3, 1, 1, 1, 1, true, 2}, {1, 1, 2, 2, 1, 1, false, 4},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(
        std::vector<int64_t>{c.kh, c.kw, c.sh, c.sw, c.dh, c.dw, c.same, c.groups}));
    auto conv = Conv2D(4, {c.kh, c.kw},
                       {.strides = {c.sh, c.sw},
                        .padding = c.same ? "same" : "valid",
                        .dilation_rate = {c.dh, c.dw},
                        .groups = c.groups,
                        .bias_initializer = initializers::constant(0.5),
                        .dtype = DType::float64});
    const Tensor x = strata::testing::random_uniform({2, 7, 6, 4}, -1, 1, 3);
    const Tensor y = (*conv)(x);
    TensorShape want_shape;
    std::vector<double> want = naive_conv(x, conv->kernel().value(), c, &want_shape);
    for (double& v : want) v += 0.5;
    ASSERT_EQ(y.shape(), want_shape);
    EXPECT_EQ(conv->compute_output_shape(x.shape()), want_shape);
    EXPECT_TRUE(all_close(as_doubles(y), want, 1e-10));
    EXPECT_EQ(conv->kernel().shape(), (TensorShape{c.kh, c.kw, 4 / c.groups, 4}));
  }
}

TEST(Conv2DTest, ParameterCountsAndOutputShapesMatchKeras) {
  reset_uids_for_testing();
  auto conv = Conv2D(32, {3, 3}, {.activation = "relu"});
  EXPECT_EQ(conv->name(), "conv2d");
  conv->build({-1, 28, 28, 1});
  EXPECT_EQ(conv->count_params(), 320);
  EXPECT_EQ(conv->kernel().shape(), (TensorShape{3, 3, 1, 32}));
  EXPECT_EQ(conv->weights()[0].name(), "conv2d/kernel");
  EXPECT_EQ(conv->compute_output_shape({-1, 28, 28, 1}), (TensorShape{-1, 26, 26, 32}));
  EXPECT_EQ(
      Conv2D(8, 3, {.strides = {2}, .padding = "SAME"})->compute_output_shape({-1, 28, 27, 1}),
      (TensorShape{-1, 14, 14, 8}));
  EXPECT_EQ(Conv2D(8, 3, {.dilation_rate = {2, 2}})->compute_output_shape({5, 28, 28, 3}),
            (TensorShape{5, 24, 24, 8}));
  EXPECT_EQ(Conv2D(8, 3)->compute_output_shape({-1, -1, 10, 3}), (TensorShape{-1, -1, 8, 8}));
  EXPECT_EQ(Conv2D(8, 3)->name(), "conv2d_4");  // four Conv2D made above
  auto no_bias = Conv2D(16, {5, 5}, {.use_bias = false});
  no_bias->build({-1, 32, 32, 3});
  EXPECT_EQ(no_bias->count_params(), 5 * 5 * 3 * 16);
}

TEST(Conv2DTest, AppliesTheActivation) {
  auto conv = Conv2D(1, {1, 1}, {.activation = "relu", .kernel_initializer = initializers::ones()});
  const Tensor x = strata::constant({-1.f, 2.f, -3.f, 4.f}, {1, 2, 2, 1});
  EXPECT_EQ(as_doubles((*conv)(x)), (std::vector<double>{0, 2, 0, 4}));
}

TEST(Conv2DTest, GradientsMatchFiniteDifferences) {
  const std::vector<Conv2DOptions> options = {
      {.strides = {2, 2}, .padding = "same", .activation = "tanh", .dtype = DType::float64},
      {.dilation_rate = {2, 1}, .dtype = DType::float64},
      {.padding = "same", .groups = 2, .dtype = DType::float64},
  };
  for (size_t i = 0; i < options.size(); ++i) {
    SCOPED_TRACE(i);
    auto conv = Conv2D(2, {3, 2}, options[i]);
    const Tensor x = strata::testing::random_uniform({2, 5, 4, 2}, -1, 1, 9);
    auto input_check = strata::testing::check_gradients(
        [&](const std::vector<Tensor>& in) { return (*conv)(in[0]); }, {x});
    EXPECT_TRUE(input_check.ok) << input_check.message;
    auto weight_check = testing_util::check_weight_gradients(*conv, x);
    EXPECT_TRUE(weight_check.ok) << weight_check.message;
  }
}

TEST(Conv2DTest, RejectsBadArguments) {
  EXPECT_THROW(Conv2D(0, {3, 3}), InvalidArgumentError);
  EXPECT_THROW(Conv2D(4, {0, 3}), InvalidArgumentError);
  EXPECT_THROW(Conv2D(4, {1, 2, 3}), InvalidArgumentError);
  EXPECT_THROW(Conv2D(4, {3, 3}, {.strides = {0, 1}}), InvalidArgumentError);
  EXPECT_THROW(Conv2D(4, {3, 3}, {.padding = "full"}), InvalidArgumentError);
  EXPECT_THROW(Conv2D(4, {3, 3}, {.data_format = "channels_first"}), UnimplementedError);
  EXPECT_THROW(Conv2D(4, {3, 3}, {.strides = {2, 2}, .dilation_rate = {2, 2}}),
               InvalidArgumentError);
  EXPECT_THROW(Conv2D(4, {3, 3}, {.groups = 3}), InvalidArgumentError);
  EXPECT_THROW(Conv2D(4, {3, 3}, {.activation = "rleu"}), InvalidArgumentError);
  auto grouped = Conv2D(4, {3, 3}, {.groups = 2});
  EXPECT_THROW(grouped->build({-1, 8, 8, 3}), InvalidArgumentError);  // 3 channels, 2 groups
}

TEST(Conv2DTest, RejectsBadInputsNamingTheLayerAndShape) {
  auto conv = Conv2D(4, {3, 3}, {.name = "c1"});
  try {
    (*conv)(strata::ones({8, 8, 1}));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Conv2D 'c1'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[8, 8, 1]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(conv->build({-1, 8, 8, -1}), InvalidArgumentError);  // channels must be known
  (*conv)(strata::ones({1, 8, 8, 2}));
  EXPECT_THROW((*conv)(strata::ones({1, 8, 8, 3})), InvalidArgumentError);  // built for 2 channels
  EXPECT_THROW((*conv)(strata::ones({1, 2, 8, 2})),
               InvalidArgumentError);  // smaller than the kernel
}

struct Conv1DCase {
  int64_t k, s, d;
  std::string padding;
  int64_t groups = 1;
};

// A direct [b, t, c] x [k, c / g, f] convolution; TF's SAME rule, causal = left padding.
std::vector<double> naive_conv1d(const Tensor& x, const Tensor& k, const Conv1DCase& c,
                                 TensorShape* out_shape) {
  const std::vector<double> xv = as_doubles(x), kv = as_doubles(k);
  const int64_t n = x.shape()[0], t = x.shape()[1], ci = x.shape()[2];
  const int64_t cig = k.shape()[1], co = k.shape()[2], cog = co / c.groups;
  const int64_t ek = (c.k - 1) * c.d + 1;
  int64_t out = 0, pad = 0;
  if (c.padding == "valid") {
    out = (t - ek) / c.s + 1;
  } else if (c.padding == "same") {
    out = (t + c.s - 1) / c.s;
    pad = std::max<int64_t>((out - 1) * c.s + ek - t, 0) / 2;
  } else {
    pad = ek - 1;
    out = (t + pad - ek) / c.s + 1;
  }
  *out_shape = TensorShape{n, out, co};
  std::vector<double> y(n * out * co, 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < out; ++i)
      for (int64_t o = 0; o < co; ++o) {
        double acc = 0;
        for (int64_t a = 0; a < c.k; ++a) {
          const int64_t p = i * c.s + a * c.d - pad;
          if (p < 0 || p >= t) continue;
          for (int64_t q = 0; q < cig; ++q)
            acc += xv[(b * t + p) * ci + (o / cog) * cig + q] * kv[(a * cig + q) * co + o];
        }
        y[(b * out + i) * co + o] = acc;
      }
  return y;
}

TEST(Conv1DTest, MatchesADirectConvolution) {
  const std::vector<Conv1DCase> cases = {{3, 1, 1, "valid"},  {3, 2, 1, "same"},
                                         {2, 1, 1, "same"},   {3, 1, 2, "causal"},
                                         {2, 2, 1, "causal"}, {3, 1, 1, "same", 2}};
  for (const Conv1DCase& c : cases) {
    SCOPED_TRACE(c.padding + " k" + std::to_string(c.k) + " s" + std::to_string(c.s) + " d" +
                 std::to_string(c.d) + " g" + std::to_string(c.groups));
    auto conv = Conv1D(4, c.k,
                       {.strides = c.s,
                        .padding = c.padding,
                        .dilation_rate = c.d,
                        .groups = c.groups,
                        .bias_initializer = initializers::constant(-0.25),
                        .dtype = DType::float64});
    const Tensor x = strata::testing::random_uniform({2, 7, 4}, -1, 1, 21);
    const Tensor y = (*conv)(x);
    TensorShape want_shape;
    std::vector<double> want = naive_conv1d(x, conv->kernel().value(), c, &want_shape);
    for (double& v : want) v -= 0.25;
    ASSERT_EQ(y.shape(), want_shape);
    EXPECT_EQ(conv->compute_output_shape({-1, 7, 4}), want_shape.with_dim(0, -1));
    EXPECT_TRUE(all_close(as_doubles(y), want, 1e-10));
  }
}

TEST(Conv1DTest, ShapesCountsGradientsAndErrors) {
  reset_uids_for_testing();
  auto conv = Conv1D(
      16, 3,
      {.padding = "CAUSAL", .dilation_rate = 2, .activation = "tanh", .dtype = DType::float64});
  EXPECT_EQ(conv->name(), "conv1d");
  conv->build({-1, 10, 8});
  EXPECT_EQ(conv->kernel().shape(), (TensorShape{3, 8, 16}));
  EXPECT_EQ(conv->count_params(), 400);
  EXPECT_EQ(conv->compute_output_shape({-1, 10, 8}), (TensorShape{-1, 10, 16}));
  const Tensor x = strata::testing::random_uniform({2, 6, 8}, -1, 1, 22);
  auto input_check = strata::testing::check_gradients(
      [&](const std::vector<Tensor>& in) { return (*conv)(in[0]); }, {x});
  EXPECT_TRUE(input_check.ok) << input_check.message;
  auto small = Conv1D(2, 2, {.strides = 2, .padding = "same", .dtype = DType::float64});
  const Tensor xs = strata::testing::random_uniform({2, 5, 3}, -1, 1, 23);
  auto weight_check = testing_util::check_weight_gradients(*small, xs);
  EXPECT_TRUE(weight_check.ok) << weight_check.message;

  EXPECT_THROW(Conv1D(0, 3), InvalidArgumentError);
  EXPECT_THROW(Conv1D(4, 0), InvalidArgumentError);
  EXPECT_THROW(Conv1D(4, 3, {.padding = "full"}), InvalidArgumentError);
  EXPECT_THROW(Conv1D(4, 3, {.strides = 2, .dilation_rate = 2}), InvalidArgumentError);
  EXPECT_THROW(Conv1D(4, 3, {.data_format = "channels_first"}), UnimplementedError);
  EXPECT_THROW(Conv2D(4, 3, {.padding = "causal"}), InvalidArgumentError);  // 1-D only
  auto c = Conv1D(4, 3, {.name = "c"});
  try {
    (*c)(strata::ones({2, 5, 5, 1}));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Conv1D 'c'"), std::string::npos) << e.what();
  }
  (*c)(strata::ones({1, 5, 2}));
  EXPECT_THROW((*c)(strata::ones({1, 5, 3})), InvalidArgumentError);
  EXPECT_THROW((*c)(strata::ones({1, 2, 2})), InvalidArgumentError);  // shorter than the kernel
}

struct TransposeCase {
  int64_t k, s, d;
  bool same;
  int64_t output_padding = -1;  // -1: none
};

// The transposed convolution as a scatter: input (i, j) adds x * K[a, e, f, c]
// to output (i s + a d - pad_top, j s + e d - pad_left), TF's SAME padding
// computed on the output size.
std::vector<double> naive_transpose(const Tensor& x, const Tensor& k, const TransposeCase& c,
                                    const TensorShape& out_shape) {
  const std::vector<double> xv = as_doubles(x), kv = as_doubles(k);
  const int64_t n = x.shape()[0], h = x.shape()[1], w = x.shape()[2], ci = x.shape()[3];
  const int64_t oh = out_shape[1], ow = out_shape[2], f = k.shape()[2];
  const int64_t dk = (c.k - 1) * c.d + 1;
  const int64_t ph = c.same ? std::max<int64_t>((h - 1) * c.s + dk - oh, 0) / 2 : 0;
  const int64_t pw = c.same ? std::max<int64_t>((w - 1) * c.s + dk - ow, 0) / 2 : 0;
  std::vector<double> y(n * oh * ow * f, 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j)
        for (int64_t a = 0; a < c.k; ++a)
          for (int64_t e = 0; e < c.k; ++e) {
            const int64_t p = i * c.s + a * c.d - ph, q = j * c.s + e * c.d - pw;
            if (p < 0 || p >= oh || q < 0 || q >= ow) continue;
            for (int64_t o = 0; o < f; ++o)
              for (int64_t ch = 0; ch < ci; ++ch)
                y[((b * oh + p) * ow + q) * f + o] +=
                    xv[((b * h + i) * w + j) * ci + ch] * kv[((a * c.k + e) * f + o) * ci + ch];
          }
  return y;
}

TEST(Conv2DTransposeTest, MatchesADirectTransposedConvolution) {
  const std::vector<TransposeCase> cases = {
      {3, 1, 1, false}, {3, 2, 1, false},   {3, 2, 1, true},     {2, 2, 1, true},
      {2, 3, 1, false}, {3, 2, 1, true, 1}, {3, 2, 1, false, 1}, {3, 1, 2, false}};
  for (const TransposeCase& c : cases) {
    SCOPED_TRACE(
        ::testing::PrintToString(std::vector<int64_t>{c.k, c.s, c.d, c.same, c.output_padding}));
    Conv2DTransposeOptions o{.strides = {c.s, c.s},
                             .padding = c.same ? "same" : "valid",
                             .dilation_rate = {c.d, c.d},
                             .bias_initializer = initializers::constant(0.125),
                             .dtype = DType::float64};
    if (c.output_padding >= 0) o.output_padding = {c.output_padding};
    auto up = Conv2DTranspose(3, {c.k, c.k}, o);
    const Tensor x = strata::testing::random_uniform({2, 4, 3, 2}, -1, 1, 31);
    const Tensor y = (*up)(x);
    const int64_t dk = (c.k - 1) * c.d + 1;
    auto length = [&](int64_t in) {
      if (c.output_padding < 0)
        return c.same ? in * c.s : in * c.s + std::max<int64_t>(dk - c.s, 0);
      return (in - 1) * c.s + dk - 2 * (c.same ? dk / 2 : 0) + c.output_padding;
    };
    const TensorShape want_shape{2, length(4), length(3), 3};
    ASSERT_EQ(y.shape(), want_shape);
    EXPECT_EQ(up->kernel().shape(), (TensorShape{c.k, c.k, 3, 2}));
    std::vector<double> want = naive_transpose(x, up->kernel().value(), c, want_shape);
    for (double& v : want) v += 0.125;
    EXPECT_TRUE(all_close(as_doubles(y), want, 1e-10));
  }
}

TEST(Conv2DTransposeTest, ShapesCountsGradientsAndErrors) {
  reset_uids_for_testing();
  auto up = Conv2DTranspose(8, {3, 3}, {.strides = {2, 2}, .padding = "same"});
  EXPECT_EQ(up->name(), "conv2d_transpose");
  up->build({-1, 7, 7, 16});
  EXPECT_EQ(up->count_params(), 3 * 3 * 8 * 16 + 8);
  EXPECT_EQ(up->compute_output_shape({-1, 7, 7, 16}), (TensorShape{-1, 14, 14, 8}));
  EXPECT_EQ(up->compute_output_shape({-1, -1, 5, 16}), (TensorShape{-1, -1, 10, 8}));
  auto g = Conv2DTranspose(
      2, {3, 2},
      {.strides = {2, 1}, .padding = "same", .activation = "tanh", .dtype = DType::float64});
  const Tensor x = strata::testing::random_uniform({2, 3, 3, 2}, -1, 1, 32);
  auto input_check = strata::testing::check_gradients(
      [&](const std::vector<Tensor>& in) { return (*g)(in[0]); }, {x});
  EXPECT_TRUE(input_check.ok) << input_check.message;
  auto weight_check = testing_util::check_weight_gradients(*g, x);
  EXPECT_TRUE(weight_check.ok) << weight_check.message;
  EXPECT_THROW(Conv2DTranspose(0, {3, 3}), InvalidArgumentError);
  EXPECT_THROW(Conv2DTranspose(4, {3, 3}, {.strides = {2, 2}, .output_padding = {2}}),
               InvalidArgumentError);  // must be < stride
  EXPECT_THROW(Conv2DTranspose(4, {3, 3}, {.data_format = "channels_first"}), UnimplementedError);
  EXPECT_THROW((*up)(strata::ones({1, 7, 7, 15})), InvalidArgumentError);  // built for 16 channels
  EXPECT_THROW((*up)(strata::ones({7, 7, 16})), InvalidArgumentError);
}

}  // namespace
}  // namespace strata::keras::layers
