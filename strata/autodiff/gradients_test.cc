// Numerical checks (central differences in float64) of the gradient table
// beyond op_table_test.cc's one sample per op: several shapes, broadcasting,
// attribute variants, higher orders and the choices TF makes at ties and kinks.

#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "strata/autodiff/gradient_tape.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/operators.h"
#include "strata/testing/gradient_check.h"

namespace strata {
namespace {

using strata::testing::check_gradients;
using strata::testing::GradientCheckOptions;
using strata::testing::random_uniform;
using V = std::vector<Tensor>;

Tensor rnd(const TensorShape& s, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return random_uniform(s, lo, hi, seed);
}

#define EXPECT_GRADIENTS_MATCH(f, inputs)                                     \
  do {                                                                        \
    auto r_ = check_gradients(f, inputs);                                     \
    EXPECT_TRUE(r_.ok) << "max error " << r_.max_error << "\n" << r_.message; \
  } while (false)

// Shape pairs exercising broadcasting.
const std::vector<std::pair<TensorShape, TensorShape>> kBinaryShapes = {
    {{3}, {3}}, {{2, 3}, {3}}, {{2, 1}, {1, 3}}, {{}, {2, 2}}, {{2, 3, 1}, {3, 4}}};

TEST(GradientCheckTest, AgreesOnCorrectGradients) {
  auto r =
      check_gradients([](const V& x) { return exp(x[0]) * x[1] + sigmoid(x[0]) * square(x[1]); },
                      (V{rnd({4}, 1), rnd({}, 2)}));
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_LT(r.max_error, 1e-7);
}

TEST(GradientCheckTest, DetectsAWrongGradient) {
  // stop_gradient hides half of d(x^2)/dx from the tape, so the check must fail.
  auto r = check_gradients([](const V& x) { return x[0] * stop_gradient(x[0]); },
                           (V{rnd({3}, 1, 0.5, 1.0)}));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("input 0 element 0"), std::string::npos) << r.message;
}

TEST(GradientsTest, ElementwiseBinaryOpsWithBroadcasting) {
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&, const Tensor&)>>>
      ops = {
          {"add", [](auto& a, auto& b) { return add(a, b); }},
          {"subtract", [](auto& a, auto& b) { return subtract(a, b); }},
          {"multiply", [](auto& a, auto& b) { return multiply(a, b); }},
          {"divide", [](auto& a, auto& b) { return divide(a, b); }},
          {"maximum", [](auto& a, auto& b) { return maximum(a, b); }},
          {"minimum", [](auto& a, auto& b) { return minimum(a, b); }},
          {"squared_difference", [](auto& a, auto& b) { return squared_difference(a, b); }},
      };
  uint64_t seed = 1;
  for (const auto& [name, op] : ops) {
    for (const auto& [sa, sb] : kBinaryShapes) {
      SCOPED_TRACE(std::string(name) + " " + sa.to_string() + " " + sb.to_string());
      // b in [0.5, 1.5] keeps divide away from 0; distinct ranges keep max/min away from ties.
      Tensor a = rnd(sa, seed++, -1.0, 1.0);
      Tensor b = rnd(sb, seed++, 0.5, 1.5);
      const auto& binary = op;  // a plain reference: clang 14 cannot capture structured bindings
      EXPECT_GRADIENTS_MATCH([&](const V& x) { return binary(x[0], x[1]); }, (V{a, b}));
    }
  }
}

TEST(GradientsTest, PowOfBothInputs) {
  for (const auto& [sa, sb] : kBinaryShapes) {
    SCOPED_TRACE(sa.to_string() + " " + sb.to_string());
    EXPECT_GRADIENTS_MATCH([](const V& x) { return pow(x[0], x[1]); },
                           (V{rnd(sa, 3, 0.5, 2.0), rnd(sb, 4, -2.0, 2.0)}));
  }
}

TEST(GradientsTest, ElementwiseUnaryOps) {
  struct U {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    double lo, hi;
  };
  const std::vector<U> ops = {
      {"identity", [](auto& x) { return identity(x); }, -1, 1},
      {"negative", [](auto& x) { return negative(x); }, -1, 1},
      {"abs", [](auto& x) { return abs(x); }, 0.1, 1},
      {"abs_neg", [](auto& x) { return abs(x); }, -1, -0.1},
      {"exp", [](auto& x) { return exp(x); }, -1, 1},
      {"log", [](auto& x) { return log(x); }, 0.5, 2},
      {"log1p", [](auto& x) { return log1p(x); }, -0.5, 2},
      {"sqrt", [](auto& x) { return sqrt(x); }, 0.5, 2},
      {"rsqrt", [](auto& x) { return rsqrt(x); }, 0.5, 2},
      {"square", [](auto& x) { return square(x); }, -1, 1},
      {"reciprocal", [](auto& x) { return reciprocal(x); }, 0.5, 2},
      {"sin", [](auto& x) { return sin(x); }, -3, 3},
      {"cos", [](auto& x) { return cos(x); }, -3, 3},
      {"relu", [](auto& x) { return relu(x); }, -1, 1},
      {"relu6", [](auto& x) { return relu6(x); }, -2, 8},
      {"leaky_relu", [](auto& x) { return leaky_relu(x, 0.3); }, -1, 1},
      {"elu", [](auto& x) { return elu(x); }, -1, 1},
      {"sigmoid", [](auto& x) { return sigmoid(x); }, -3, 3},
      {"tanh", [](auto& x) { return tanh(x); }, -2, 2},
      {"softplus", [](auto& x) { return softplus(x); }, -3, 3},
  };
  const std::vector<TensorShape> shapes = {{}, {5}, {2, 3}, {2, 2, 3}};
  uint64_t seed = 100;
  for (const auto& u : ops) {
    for (const auto& s : shapes) {
      SCOPED_TRACE(std::string(u.name) + " " + s.to_string());
      Tensor x = rnd(s, seed++, u.lo, u.hi);
      // Keep relu-like kinks away from the finite-difference step.
      if (std::string(u.name).find("relu") != std::string::npos || std::string(u.name) == "elu") {
        x = where(abs(x) < 0.05, x + 0.1, x);
        if (std::string(u.name) == "relu6") x = where(abs(x - 6.0) < 0.05, x + 0.1, x);
      }
      EXPECT_GRADIENTS_MATCH([&](const V& v) { return u.f(v[0]); }, (V{x}));
    }
  }
}

TEST(GradientsTest, CastBetweenFloatTypesAndSelect) {
  {
    // F = sum(w * f32(x) * x): the analytic gradient takes the float32 round
    // trip as the identity (TF), the central difference sees its rounding,
    // |f32(x) - x| <= |x| * eps32 / 2, in both F(x + h) and F(x - h). With
    // |x| <= 1 and weights w < 1.5 (check_gradients) the difference quotient
    // is off by at most 1.5 * (1 + h)^2 * eps32 / (2h); the quadratic itself
    // is differenced exactly. A large step keeps that bound small; twice the
    // bound is the tolerance (a wrong gradient errs by ~|x|, far above it).
    GradientCheckOptions o;
    o.delta = 1e-2;
    const double eps32 = std::numeric_limits<float>::epsilon();
    o.tolerance = 2 * 1.5 * (1 + o.delta) * (1 + o.delta) * eps32 / (2 * o.delta);
    auto r = check_gradients(
        [](const V& x) { return cast(cast(x[0], DType::float32), DType::float64) * x[0]; },
        (V{rnd({4}, 5)}), o);
    EXPECT_TRUE(r.ok) << "max error " << r.max_error << "\n" << r.message;
  }
  const Tensor cond = constant({true, false, true}, {3});
  for (const auto& [sa, sb] :
       std::vector<std::pair<TensorShape, TensorShape>>{{{3}, {3}}, {{2, 3}, {}}}) {
    EXPECT_GRADIENTS_MATCH([&](const V& x) { return where(cond, x[0], x[1]); },
                           (V{rnd(sa, 6), rnd(sb, 7)}));
  }
  EXPECT_GRADIENTS_MATCH(
      [](const V& x) {
        return add_n({x[0], x[1], x[0]});
      },
      (V{rnd({2, 2}, 8), rnd({2, 2}, 9)}));
}

TEST(GradientsTest, Reductions) {
  const std::vector<ReduceOptions> opts = {
      {}, {.axis = {0}}, {.axis = {1}, .keepdims = true}, {.axis = {-1}}, {.axis = {0, 2}}};
  uint64_t seed = 200;
  for (const auto& o : opts) {
    const Tensor x = rnd({2, 3, 4}, seed++, 0.5, 1.5);
    EXPECT_GRADIENTS_MATCH([&](const V& v) { return reduce_sum(v[0], o); }, (V{x}));
    EXPECT_GRADIENTS_MATCH([&](const V& v) { return reduce_mean(v[0], o); }, (V{x}));
    EXPECT_GRADIENTS_MATCH([&](const V& v) { return reduce_max(v[0], o); }, (V{x}));
    EXPECT_GRADIENTS_MATCH([&](const V& v) { return reduce_min(v[0], o); }, (V{x}));
    EXPECT_GRADIENTS_MATCH([&](const V& v) { return reduce_prod(v[0], o); }, (V{x}));
  }
}

TEST(GradientsTest, MaxReductionSharesTiesEqually) {
  const Tensor x = constant({1.f, 3.f, 3.f});
  GradientTape tape;
  tape.watch(x);
  const Tensor g = tape.gradient(reduce_max(x), x);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{0.f, 0.5f, 0.5f}));
}

TEST(GradientsTest, MatMulWithTransposesAndBatches) {
  uint64_t seed = 300;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::to_string(ta) + std::to_string(tb));
      const TensorShape sa = ta ? TensorShape{3, 2} : TensorShape{2, 3};
      const TensorShape sb = tb ? TensorShape{4, 3} : TensorShape{3, 4};
      const MatMulOptions o{.transpose_a = ta, .transpose_b = tb};
      EXPECT_GRADIENTS_MATCH([&](const V& x) { return matmul(x[0], x[1], o); },
                             (V{rnd(sa, seed++), rnd(sb, seed++)}));
      // Batched, with the batch dim of b broadcast.
      const TensorShape ba = TensorShape{2}.concatenate(sa);
      const TensorShape bb = TensorShape{1}.concatenate(sb);
      EXPECT_GRADIENTS_MATCH([&](const V& x) { return matmul(x[0], x[1], o); },
                             (V{rnd(ba, seed++), rnd(bb, seed++)}));
    }
  }
  EXPECT_GRADIENTS_MATCH([](const V& x) { return matmul(x[0], x[1]); },
                         (V{rnd({2, 2, 3}, 9), rnd({3, 2}, 10)}));
}

TEST(GradientsTest, ShapeAndLayoutOps) {
  const Tensor x = rnd({2, 3, 4}, 400);
  EXPECT_GRADIENTS_MATCH(
      [](const V& v) {
        return reshape(v[0], {4, -1}) * rnd({4, 6}, 1);
      },
      (V{x}));
  EXPECT_GRADIENTS_MATCH([](const V& v) { return transpose(v[0], {2, 0, 1}); }, (V{x}));
  EXPECT_GRADIENTS_MATCH([](const V& v) { return transpose(v[0]); }, (V{x}));
  EXPECT_GRADIENTS_MATCH(
      [](const V& v) {
        return broadcast_to(v[0], {2, 2, 3});
      },
      (V{rnd({2, 1, 3}, 401)}));
  EXPECT_GRADIENTS_MATCH(
      [](const V& v) {
        return concat({v[0], v[1], v[0]}, 1);
      },
      (V{rnd({2, 2}, 402), rnd({2, 3}, 403)}));
  EXPECT_GRADIENTS_MATCH(
      [](const V& v) {
        return stack({v[0], v[1]}, 1);
      },
      (V{rnd({2, 3}, 404), rnd({2, 3}, 405)}));
  EXPECT_GRADIENTS_MATCH([](const V& v) { return split(v[0], 2, 1)[1] * 2.0; },
                         (V{rnd({3, 4}, 406)}));
  EXPECT_GRADIENTS_MATCH([](const V& v) { return slice(v[0], {0, 1, 1}, {-1, 2, 2}); }, (V{x}));
  EXPECT_GRADIENTS_MATCH(
      [](const V& v) {
        return strided_slice(v[0], {1, 0, 3}, {2, 3, 0}, {1, 2, -2});
      },
      (V{x}));
  EXPECT_GRADIENTS_MATCH(
      [](const V& v) {
        return pad(v[0], {{1, 0}, {0, 2}}, 3.0);
      },
      (V{rnd({2, 3}, 407)}));
  EXPECT_GRADIENTS_MATCH([](const V& v) { return tile(v[0], {2, 1, 3}); }, (V{x}));
  EXPECT_GRADIENTS_MATCH([](const V& v) { return expand_dims(squeeze(v[0]), 0); },
                         (V{rnd({1, 3, 1}, 408)}));
}

TEST(GradientsTest, GatherScatterAddsIntoParams) {
  const Tensor idx = constant({int64_t{2}, int64_t{0}, int64_t{2}}, {3});
  const Tensor idx2 = constant({int64_t{1}, int64_t{1}, int64_t{0}, int64_t{2}}, {2, 2});
  EXPECT_GRADIENTS_MATCH([&](const V& v) { return gather(v[0], idx, 0); }, (V{rnd({3, 2}, 500)}));
  EXPECT_GRADIENTS_MATCH([&](const V& v) { return gather(v[0], idx2, 1); },
                         (V{rnd({2, 3, 2}, 501)}));
  const Tensor seg = constant({int64_t{1}, int64_t{0}, int64_t{1}}, {3});
  EXPECT_GRADIENTS_MATCH([&](const V& v) { return unsorted_segment_sum(v[0], seg, 3); },
                         (V{rnd({3, 2}, 502)}));
  // Repeated indices accumulate: d sum(gather(p, [2, 0, 2])) / dp = [1, 0, 2].
  const Tensor p = constant({1.f, 2.f, 3.f});
  GradientTape tape;
  tape.watch(p);
  EXPECT_EQ(tape.gradient(gather(p, idx), p).to_vector<float>(),
            (std::vector<float>{1.f, 0.f, 2.f}));
}

TEST(GradientsTest, SoftmaxAndLosses) {
  EXPECT_GRADIENTS_MATCH([](const V& v) { return softmax(v[0]); }, (V{rnd({3, 4}, 600, -2, 2)}));
  EXPECT_GRADIENTS_MATCH([](const V& v) { return log_softmax(v[0]); },
                         (V{rnd({3, 4}, 601, -2, 2)}));
  const Tensor labels = constant({int64_t{1}, int64_t{3}, int64_t{0}}, {3});
  EXPECT_GRADIENTS_MATCH(
      [&](const V& v) { return nn::sparse_softmax_cross_entropy_with_logits(labels, v[0]); },
      (V{rnd({3, 4}, 602, -2, 2)}));
}

TEST(GradientsTest, Conv2DInputAndFilter) {
  for (const char* padding : {"VALID", "SAME"}) {
    for (int64_t stride : {1, 2}) {
      SCOPED_TRACE(std::string(padding) + " stride " + std::to_string(stride));
      const nn::Conv2DOptions o{.strides = {stride, stride}, .padding = padding};
      EXPECT_GRADIENTS_MATCH([&](const V& v) { return nn::conv2d(v[0], v[1], o); },
                             (V{rnd({2, 5, 5, 2}, 700), rnd({3, 3, 2, 3}, 701)}));
    }
  }
}

TEST(GradientsTest, ConvBackpropOpsHaveGradients) {
  const nn::Conv2DOptions o{.strides = {1, 1}, .padding = "SAME"};
  EXPECT_GRADIENTS_MATCH(
      [&](const V& v) {
        return nn::conv2d_backprop_input({1, 4, 4, 2}, v[0], v[1], o);
      },
      (V{rnd({3, 3, 2, 3}, 710), rnd({1, 4, 4, 3}, 711)}));
  EXPECT_GRADIENTS_MATCH(
      [&](const V& v) {
        return nn::conv2d_backprop_filter(v[0], {3, 3, 2, 3}, v[1], o);
      },
      (V{rnd({1, 4, 4, 2}, 712), rnd({1, 4, 4, 3}, 713)}));
}

TEST(GradientsTest, Pooling) {
  for (const char* padding : {"VALID", "SAME"}) {
    SCOPED_TRACE(padding);
    EXPECT_GRADIENTS_MATCH(
        [&](const V& v) {
          return nn::max_pool2d(v[0], {2, 2}, {2, 2}, padding);
        },
        (V{rnd({2, 5, 5, 2}, 800)}));
    EXPECT_GRADIENTS_MATCH(
        [&](const V& v) {
          return nn::max_pool2d(v[0], {3, 3}, {1, 1}, padding);
        },
        (V{rnd({1, 4, 4, 1}, 801)}));
    EXPECT_GRADIENTS_MATCH(
        [&](const V& v) {
          return nn::avg_pool2d(v[0], {2, 2}, {2, 2}, padding);
        },
        (V{rnd({2, 5, 5, 2}, 802)}));
    EXPECT_GRADIENTS_MATCH(
        [&](const V& v) {
          return nn::avg_pool2d(v[0], {3, 3}, {1, 1}, padding);
        },
        (V{rnd({1, 4, 4, 1}, 803)}));
  }
}

TEST(GradientsTest, PoolGradientsAreDifferentiableUnderAnOuterTape) {
  // With the checker's tape recording, the inner max-pool gradient takes the
  // composed (differentiable) path; without one, the MaxPoolGrad kernel. Both
  // must agree, and the composed one must have the right derivative.
  auto inner = [](const V& v, const char* padding) {
    GradientTape tape;
    tape.watch(v[0]);
    const Tensor y = reduce_sum(square(nn::max_pool2d(v[0], {3, 3}, {2, 2}, padding))) +
                     reduce_sum(square(nn::avg_pool2d(v[0], {2, 2}, {1, 1}, padding)));
    return tape.gradient(y, v[0]);
  };
  for (const char* padding : {"VALID", "SAME"}) {
    SCOPED_TRACE(padding);
    const Tensor x = rnd({2, 5, 5, 2}, 850);
    EXPECT_GRADIENTS_MATCH([&](const V& v) { return inner(v, padding); }, (V{x}));
    GradientTape outer;
    outer.watch(x);
    const Tensor composed = inner({x}, padding);
    const Tensor direct = inner({x}, padding);
    EXPECT_EQ(composed.to_vector<double>(), direct.to_vector<double>());
  }
}

TEST(GradientsTest, SecondOrderThroughTheGradientTable) {
  // d/dx of (d/dx sum(sigmoid(x) * x)), checked numerically against the first derivative.
  auto first = [](const V& v) {
    GradientTape inner;
    inner.watch(v[0]);
    const Tensor y = reduce_sum(sigmoid(v[0]) * v[0] + square(v[0]) * v[0]);
    return inner.gradient(y, v[0]);
  };
  EXPECT_GRADIENTS_MATCH(first, (V{rnd({3}, 900)}));
}

// Features kept away from the kink at zero (finite differences must not cross it).
Tensor away_from_zero(const Tensor& x) { return where(abs(x) < 0.05, x + 0.1, x); }

TEST(GradientsTest, ReluGradIsLinearInTheGradientsAndConstantInTheFeatures) {
  // As TF's _ReluGradGrad: d/d gradients = relu_grad(upstream, features),
  // d/d features = 0.
  EXPECT_GRADIENTS_MATCH([](const V& v) { return nn::relu_grad(v[0] * v[0], v[1]) * v[1]; },
                         (V{rnd({2, 5}, 910), away_from_zero(rnd({2, 5}, 911))}));
  const Tensor g = rnd({6}, 912), f = away_from_zero(rnd({6}, 913)), w = rnd({6}, 914);
  GradientTape tape;
  tape.watch(g);
  tape.watch(f);
  const std::vector<Tensor> d = tape.gradient(reduce_sum(nn::relu_grad(g, f) * w), {g, f});
  ASSERT_TRUE(d[0].defined());
  ASSERT_TRUE(d[1].defined());
  EXPECT_EQ(d[0].to_vector<double>(),
            (w * cast(greater(f, zeros_like(f)), DType::float64)).to_vector<double>());
  EXPECT_EQ(d[1].to_vector<double>(), std::vector<double>(6, 0.0));
}

TEST(GradientsTest, SecondOrderThroughRelu) {
  // relu's gradient is the ReluGrad op; under an outer tape it is recorded
  // and differentiated again: d/dx (d/dx sum(relu(x) * x^2)) = 6x where x > 0.
  auto first = [](const V& v) {
    GradientTape inner;
    inner.watch(v[0]);
    return inner.gradient(reduce_sum(relu(v[0]) * square(v[0])), v[0]);
  };
  const Tensor x = away_from_zero(rnd({7}, 920));
  EXPECT_GRADIENTS_MATCH(first, (V{x}));
  GradientTape outer;
  outer.watch(x);
  const Tensor second = outer.gradient(reduce_sum(first({x})), x);
  const std::vector<double> xv = x.to_vector<double>(), sv = second.to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(sv[i], xv[i] > 0 ? 6 * xv[i] : 0.0, 1e-12);
}

}  // namespace
}  // namespace strata
