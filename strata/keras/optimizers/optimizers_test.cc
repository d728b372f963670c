#include "strata/keras/optimizers/optimizers.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/keras/losses.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/training_ops.h"
#include "strata/testing/logical_devices.h"

namespace strata::keras {
namespace {

namespace opt = keras::optimizers;
using Vec = std::vector<double>;

// The gradient of sum(0.5 * a_i * var_i^2 + b_i * var_i) at `var`: a * var + b.
// It depends on the variable so that every step feeds back into the next.
Vec quadratic_grad(const Vec& var, const Vec& a, const Vec& b) {
  Vec g(var.size());
  for (size_t i = 0; i < var.size(); ++i) g[i] = a[i] * var[i] + b[i];
  return g;
}

const Vec kA = {1.0, 2.0, 0.5};
const Vec kB = {0.3, -0.2, 1.5};
const Vec kInit = {1.0, -2.0, 0.5};

double f32(double v) { return double(float(v)); }

Vec values_of(const Variable& v) {
  return strata::cast(v.value(), DType::float64).to_vector<double>();
}

// Runs `steps` steps of `optimizer` on a float64 variable from kInit with the
// quadratic gradient, and the same steps of `reference` (an independent
// scalar implementation: reference(var, grad, step t starting at 1)).
void expect_matches_reference(opt::Optimizer& optimizer,
                              const std::function<void(Vec& var, const Vec& g, int t)>& reference,
                              int steps = 3, double tol = 1e-12) {
  Variable var(constant<double>(kInit), {.name = "w"});
  Vec ref = kInit;
  for (int t = 1; t <= steps; ++t) {
    const Vec g = quadratic_grad(values_of(var), kA, kB);
    optimizer.apply_gradients({{constant<double>(g), var}});
    reference(ref, quadratic_grad(ref, kA, kB), t);
    const Vec got = values_of(var);
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_NEAR(got[i], ref[i], tol * std::max(1.0, std::abs(ref[i])))
          << "step " << t << " element " << i;
    }
  }
  EXPECT_EQ(optimizer.iterations(), steps);
}

// --- SGD -----------------------------------------------------------------------

TEST(SGD, PlainStepIsMinusLearningRateTimesGradient) {
  // Keras's docstring example: var 1, loss var^2 / 2, lr 0.1 -> 0.9.
  auto sgd = opt::SGD({.learning_rate = 0.1});
  Variable var(constant(1.0f));
  sgd->apply_gradients({{var.value(), var}});
  EXPECT_NEAR(var.value().item<float>(), 0.9f, 1e-7);
  EXPECT_EQ(sgd->name(), "SGD");
  EXPECT_NEAR(sgd->learning_rate(), 0.1, 1e-8);
}

TEST(Optimizer, ApplyTakesTheGradientsAndVariablesSideBySideAsKeras3) {
  // Keras 3: optimizer.apply(grads, trainable_variables), the same update as
  // apply_gradients(zip(grads, trainable_variables)).
  auto by_apply = opt::Adam({.learning_rate = 0.1});
  auto by_zip = opt::Adam({.learning_rate = 0.1});
  Variable a(constant(std::vector<float>{1.f, -2.f}, {2})), b(constant(0.5f));
  Variable a2(a.value()), b2(b.value());
  const std::vector<Tensor> grads = {constant(std::vector<float>{0.3f, -0.4f}, {2}), constant(2.f)};
  for (int step = 0; step < 3; ++step) {
    by_apply->apply(grads, {a, b});
    by_zip->apply_gradients(zip(grads, std::vector<Variable>{a2, b2}));
  }
  EXPECT_EQ(a.value().to_vector<float>(), a2.value().to_vector<float>());
  EXPECT_EQ(b.value().item<float>(), b2.value().item<float>());
  EXPECT_NE(a.value().to_vector<float>(), (std::vector<float>{1.f, -2.f}));
  EXPECT_EQ(by_apply->iterations(), 3);
  try {
    by_apply->apply(grads, {a});
    ADD_FAILURE() << "apply took 2 gradients for 1 variable";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("2 gradients for 1 variables"), std::string::npos)
        << e.what();
  }
}

TEST(SGD, MomentumStepsGrowAsInKerasDocs) {
  // Keras's docstring: lr 0.1, momentum 0.9: first step 0.1, second 0.18.
  auto sgd = opt::SGD({.learning_rate = 0.1, .momentum = 0.9});
  Variable var(constant(1.0f));
  sgd->apply_gradients({{var.value(), var}});
  const float v1 = var.value().item<float>();
  EXPECT_NEAR(1.0f - v1, 0.1f, 1e-6);
  sgd->apply_gradients({{var.value(), var}});
  EXPECT_NEAR(v1 - var.value().item<float>(), 0.18f, 1e-6);
}

TEST(SGD, MomentumMatchesTheScalarReference) {
  auto sgd = opt::SGD({.learning_rate = 0.05, .momentum = 0.9});
  Vec m(3, 0.0);
  const double lr = f32(0.05);
  expect_matches_reference(
      *sgd,
      [&](Vec& var, const Vec& g, int) {
        for (size_t i = 0; i < var.size(); ++i) {
          m[i] = 0.9 * m[i] - lr * g[i];
          var[i] += m[i];
        }
      },
      4);
}

TEST(SGD, NesterovMatchesTheScalarReference) {
  auto sgd = opt::SGD({.learning_rate = 0.05, .momentum = 0.8, .nesterov = true});
  EXPECT_TRUE(sgd->nesterov());
  Vec m(3, 0.0);
  const double lr = f32(0.05);
  expect_matches_reference(
      *sgd,
      [&](Vec& var, const Vec& g, int) {
        for (size_t i = 0; i < var.size(); ++i) {
          m[i] = 0.8 * m[i] - lr * g[i];
          var[i] += 0.8 * m[i] - lr * g[i];
        }
      },
      4);
}

TEST(SGD, MomentumOutsideZeroOneIsAnError) {
  EXPECT_THROW(opt::SGD({.momentum = 1.5}), InvalidArgumentError);
  EXPECT_THROW(opt::SGD({.momentum = -0.1}), InvalidArgumentError);
}

// --- Adam / AdamW ----------------------------------------------------------------

void adam_reference(Vec& var, const Vec& g, int t, Vec& m, Vec& v, Vec* vhat, double lr, double b1,
                    double b2, double eps) {
  const double alpha = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
  for (size_t i = 0; i < var.size(); ++i) {
    m[i] += (g[i] - m[i]) * (1 - b1);
    v[i] += (g[i] * g[i] - v[i]) * (1 - b2);
    double denom_v = v[i];
    if (vhat) {
      (*vhat)[i] = std::max((*vhat)[i], v[i]);
      denom_v = (*vhat)[i];
    }
    var[i] -= m[i] * alpha / (std::sqrt(denom_v) + eps);
  }
}

TEST(Adam, MatchesTheScalarReferenceWithKerasDefaults) {
  auto adam = opt::Adam({.learning_rate = 0.1});
  EXPECT_EQ(adam->epsilon(), 1e-7);
  Vec m(3, 0.0), v(3, 0.0);
  expect_matches_reference(
      *adam,
      [&](Vec& var, const Vec& g, int t) {
        adam_reference(var, g, t, m, v, nullptr, f32(0.1), 0.9, 0.999, 1e-7);
      },
      4);
}

TEST(Adam, FirstStepMovesByAboutTheLearningRate) {
  // Step 1: m = 0.1 g, v = 0.001 g^2, alpha = lr sqrt(0.001) / 0.1, so the step is
  // lr * g / (|g| + eps / sqrt(0.001)): epsilon is "epsilon hat", added to sqrt(v).
  auto adam = opt::Adam({.learning_rate = 0.01, .epsilon = 1e-3});
  Variable var(constant<double>({1.0, 1.0}));
  adam->apply_gradients({{constant<double>({3.0, -0.5}), var}});
  const Vec got = values_of(var);
  const double eps_scaled = 1e-3 / std::sqrt(1 - 0.999);
  EXPECT_NEAR(got[0], 1.0 - f32(0.01) * 3.0 / (3.0 + eps_scaled), 1e-12);
  EXPECT_NEAR(got[1], 1.0 + f32(0.01) * 0.5 / (0.5 + eps_scaled), 1e-12);
}

TEST(Adam, AmsgradKeepsTheMaximumSecondMoment) {
  // Gradients that shrink make v fall below its running maximum, where AMSGrad differs.
  auto ams = opt::Adam({.learning_rate = 0.1, .beta_1 = 0.5, .beta_2 = 0.6, .amsgrad = true});
  auto plain = opt::Adam({.learning_rate = 0.1, .beta_1 = 0.5, .beta_2 = 0.6});
  Variable a(constant<double>({1.0, 2.0}), {.name = "a"});
  Variable p(constant<double>({1.0, 2.0}), {.name = "p"});
  Vec ref = {1.0, 2.0}, m(2, 0.0), v(2, 0.0), vhat(2, 0.0);
  const std::vector<Vec> grads = {{4.0, -3.0}, {1.0, -0.5}, {0.2, 0.1}};
  for (int t = 1; t <= 3; ++t) {
    const Vec& g = grads[t - 1];
    ams->apply_gradients({{constant<double>(g), a}});
    plain->apply_gradients({{constant<double>(g), p}});
    adam_reference(ref, g, t, m, v, &vhat, f32(0.1), 0.5, 0.6, 1e-7);
    const Vec got = values_of(a);
    for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(got[i], ref[i], 1e-12) << "step " << t;
  }
  EXPECT_GT(std::abs(values_of(a)[0] - values_of(p)[0]), 1e-3);
  // Slots: iterations, m, v for the variable, then vhat (Keras's creation order).
  const auto vars = ams->variables();
  ASSERT_EQ(vars.size(), 4u);
  EXPECT_EQ(vars[0].name(), "Adam/iteration");
  EXPECT_EQ(vars[1].name(), "Adam/a/m");
  EXPECT_EQ(vars[2].name(), "Adam/a/v");
  EXPECT_EQ(vars[3].name(), "Adam/a/vhat");
  EXPECT_FALSE(vars[1].trainable());
}

// The fused in-place kernel (strata::apply_adam) on a float32 variable larger
// than one parallel chunk, with a length that leaves a vector tail.
TEST(ApplyAdam, Float32InPlaceMatchesTheReferenceOverManyElements) {
  strata::internal::reset_runtime_for_testing();
  config::set_intra_op_parallelism_threads(2);  // two chunks run on two threads
  const int64_t n = 100003;
  std::vector<float> w0(n), g0(n);
  for (int64_t i = 0; i < n; ++i) {
    w0[i] = std::sin(0.001f * static_cast<float>(i));
    g0[i] = std::cos(0.003f * static_cast<float>(i)) - 0.25f;
  }
  Variable w(constant<float>(w0, {n}), {.name = "w"});
  Variable m(zeros({n}, DType::float32), {.name = "m"});
  Variable v(zeros({n}, DType::float32), {.name = "v"});
  Variable vhat(zeros({n}, DType::float32), {.name = "vhat"});
  const Tensor g = constant<float>(g0, {n});
  Vec ref(w0.begin(), w0.end()), rm(n, 0.0), rv(n, 0.0), rh(n, 0.0);
  const Vec gd(g0.begin(), g0.end());
  for (int t = 1; t <= 3; ++t) {
    const double alpha = 1e-2 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    strata::apply_adam(w, m, v, &vhat, g,
                       {.one_minus_beta_1 = 0.1, .one_minus_beta_2 = 0.001, .alpha = alpha});
    adam_reference(ref, gd, t, rm, rv, &rh, 1e-2, 0.9, 0.999, 1e-7);
  }
  const std::vector<float> got = w.value().to_vector<float>();
  const std::vector<float> got_m = m.value().to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(got[i], ref[i], 1e-5 * (1 + std::abs(ref[i]))) << "element " << i;
    ASSERT_NEAR(got_m[i], rm[i], 1e-6 * (1 + std::abs(rm[i]))) << "element " << i;
  }
}

TEST(ApplyAdam, MismatchedSlotOrGradientNamesTheVariable) {
  Variable w(constant<float>({1, 2}), {.name = "kernel"});
  Variable m(zeros({2}, DType::float32), {.name = "m"});
  Variable v(zeros({3}, DType::float32), {.name = "v"});
  Variable v2(zeros({2}, DType::float32), {.name = "v2"});
  try {
    strata::apply_adam(w, m, v, nullptr, constant<float>({1, 1}), {});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("kernel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3]"), std::string::npos) << msg;
  }
  EXPECT_THROW(strata::apply_adam(w, m, v2, nullptr, constant<double>({1, 1}), {}),
               InvalidArgumentError);
  Variable ints(constant<int32_t>({1, 2}), {.name = "ints"});
  EXPECT_THROW(strata::apply_adam(ints, m, v2, nullptr, constant<int32_t>({1, 1}), {}),
               InvalidArgumentError);
  EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{1, 2}));  // nothing changed
}

TEST(AdamW, DecaysTheVariableBeforeTheAdamStep) {
  auto adamw = opt::AdamW({.learning_rate = 0.05, .weight_decay = 0.1});
  EXPECT_EQ(adamw->name(), "AdamW");
  EXPECT_NEAR(adamw->weight_decay(), 0.1, 0);
  Vec m(3, 0.0), v(3, 0.0);
  const double lr = f32(0.05);
  expect_matches_reference(
      *adamw,
      [&](Vec& var, const Vec& g, int t) {
        for (double& x : var) x -= x * 0.1 * lr;
        adam_reference(var, g, t, m, v, nullptr, lr, 0.9, 0.999, 1e-7);
      },
      3);
}

TEST(AdamW, ExcludedVariablesAreNotDecayed) {
  auto adamw = opt::AdamW({.learning_rate = 1.0, .weight_decay = 0.5});
  Variable kernel(constant<double>({2.0}), {.name = "dense/kernel"});
  Variable bias(constant<double>({2.0}), {.name = "dense/bias"});
  adamw->exclude_from_weight_decay({}, {"bias"});
  // Zero gradients: Adam's step is 0 (m = 0), only the decay moves the variable.
  adamw->apply_gradients({{constant<double>({0.0}), kernel}, {constant<double>({0.0}), bias}});
  EXPECT_DOUBLE_EQ(values_of(kernel)[0], 1.0);  // 2 - 2 * 0.5 * 1
  EXPECT_DOUBLE_EQ(values_of(bias)[0], 2.0);
  EXPECT_THROW(adamw->exclude_from_weight_decay({kernel}), FailedPreconditionError);
  EXPECT_THROW(opt::AdamW()->exclude_from_weight_decay({}, {"("}), InvalidArgumentError);
}

TEST(WeightDecay, AppliesToEveryOptimizerAsInKerasDocs) {
  // Keras's docstring: SGD(1, weight_decay=0.004), zero grads, var2 excluded -> [1.992, 2.0].
  auto sgd = opt::SGD({.learning_rate = 1.0, .weight_decay = 0.004});
  Variable var1(constant(2.0f)), var2(constant(2.0f));
  sgd->exclude_from_weight_decay({var2});
  sgd->apply_gradients({{constant(0.0f), var1}, {constant(0.0f), var2}});
  EXPECT_NEAR(var1.value().item<float>(), 1.992f, 1e-6);
  EXPECT_EQ(var2.value().item<float>(), 2.0f);
}

// --- RMSprop ---------------------------------------------------------------------

TEST(RMSprop, KerasDocstringExample) {
  // RMSprop(0.1), var 10, grad = var -> 9.683772.
  auto rms = opt::RMSprop({.learning_rate = 0.1});
  Variable var(constant(10.0f));
  rms->apply_gradients({{var.value(), var}});
  EXPECT_NEAR(var.value().item<float>(), 9.683772f, 1e-5);
}

TEST(RMSprop, PlainWithMomentumMatchesTheScalarReference) {
  auto rms = opt::RMSprop({.learning_rate = 0.01, .rho = 0.8, .momentum = 0.5});
  Vec vel(3, 0.0), mom(3, 0.0);
  const double lr = f32(0.01);
  expect_matches_reference(
      *rms,
      [&](Vec& var, const Vec& g, int) {
        for (size_t i = 0; i < var.size(); ++i) {
          vel[i] = 0.8 * vel[i] + 0.2 * g[i] * g[i];
          const double inc = lr * g[i] / std::sqrt(vel[i] + 1e-7);
          mom[i] = 0.5 * mom[i] + inc;
          var[i] -= mom[i];
        }
      },
      4);
}

TEST(RMSprop, CenteredMatchesTheScalarReference) {
  auto rms = opt::RMSprop({.learning_rate = 0.01, .centered = true});
  Vec vel(3, 0.0), avg(3, 0.0);
  const double lr = f32(0.01);
  expect_matches_reference(
      *rms,
      [&](Vec& var, const Vec& g, int) {
        for (size_t i = 0; i < var.size(); ++i) {
          vel[i] = 0.9 * vel[i] + (1 - 0.9) * g[i] * g[i];
          avg[i] = 0.9 * avg[i] + (1 - 0.9) * g[i];
          var[i] -= lr * g[i] / std::sqrt(vel[i] - avg[i] * avg[i] + 1e-7);
        }
      },
      4, 1e-11);
  // Slots: velocity and average_gradient (no momentum slot with momentum 0).
  EXPECT_EQ(rms->variables().size(), 3u);
}

// --- Adagrad ---------------------------------------------------------------------

TEST(Adagrad, AccumulatorStartsAtInitialValueAndMatchesTheScalarReference) {
  auto ada = opt::Adagrad({.learning_rate = 0.1});
  EXPECT_EQ(ada->initial_accumulator_value(), 0.1);
  Vec acc(3, 0.1);
  const double lr = f32(0.1);
  expect_matches_reference(
      *ada,
      [&](Vec& var, const Vec& g, int) {
        for (size_t i = 0; i < var.size(); ++i) {
          acc[i] += g[i] * g[i];
          var[i] -= lr * g[i] / std::sqrt(acc[i] + 1e-7);
        }
      },
      4);
  EXPECT_THROW(opt::Adagrad({.initial_accumulator_value = -1.0}), InvalidArgumentError);
}

// --- clipping ------------------------------------------------------------------------

TEST(Clipping, ClipnormScalesEachGradientToTheNorm) {
  auto sgd = opt::SGD({.learning_rate = 1.0, .clipnorm = 1.0});
  Variable a(constant<double>({0.0, 0.0}));
  Variable b(constant<double>({0.0}));
  // ||(3, 4)|| = 5 -> (0.6, 0.8); ||0.5|| < 1 stays.
  sgd->apply_gradients({{constant<double>({3.0, 4.0}), a}, {constant<double>({0.5}), b}});
  EXPECT_NEAR(values_of(a)[0], -0.6, 1e-12);
  EXPECT_NEAR(values_of(a)[1], -0.8, 1e-12);
  EXPECT_NEAR(values_of(b)[0], -0.5, 1e-12);
}

TEST(Clipping, GlobalClipnormScalesAllGradientsTogether) {
  auto sgd = opt::SGD({.learning_rate = 1.0, .global_clipnorm = 2.5});
  Variable a(constant<double>({0.0, 0.0}));
  Variable b(constant<double>({0.0}));
  // global norm sqrt(9 + 16 + 0) = 5 with b's gradient 0: scale 0.5.
  sgd->apply_gradients({{constant<double>({3.0, 4.0}), a}, {constant<double>({0.0}), b}});
  EXPECT_NEAR(values_of(a)[0], -1.5, 1e-12);
  EXPECT_NEAR(values_of(a)[1], -2.0, 1e-12);
  // Below the threshold nothing changes.
  sgd->apply_gradients({{constant<double>({0.3, 0.4}), a}, {constant<double>({1.0}), b}});
  EXPECT_NEAR(values_of(a)[0], -1.8, 1e-12);
  EXPECT_NEAR(values_of(b)[0], -1.0, 1e-12);
}

TEST(Clipping, ClipvalueClampsEachElementAsInKerasDocs) {
  // Keras's docstring: SGD(1, clipvalue=1), grads [2, 2], vars 2 -> [1, 1].
  auto sgd = opt::SGD({.learning_rate = 1.0, .clipvalue = 1.0});
  Variable var1(constant(2.0f)), var2(constant(2.0f));
  sgd->apply_gradients({{constant(2.0f), var1}, {constant(2.0f), var2}});
  EXPECT_EQ(var1.value().item<float>(), 1.0f);
  EXPECT_EQ(var2.value().item<float>(), 1.0f);
  auto sgd2 = opt::SGD({.learning_rate = 1.0, .clipvalue = 1.0});
  Variable v(constant<double>({0.0, 0.0, 0.0}));
  sgd2->apply_gradients({{constant<double>({-3.0, 0.25, 1.0}), v}});
  EXPECT_EQ(values_of(v), (Vec{1.0, -0.25, -1.0}));
}

TEST(Clipping, ClipnormAndGlobalClipnormTogetherAreAnError) {
  EXPECT_THROW(opt::SGD({.clipnorm = 1.0, .global_clipnorm = 1.0}), InvalidArgumentError);
}

// --- base behaviour ------------------------------------------------------------------

TEST(Optimizer, IterationsCountsAppliedSteps) {
  auto sgd = opt::SGD();
  Variable var(constant<double>({1.0}));
  EXPECT_EQ(sgd->iterations(), 0);
  sgd->apply_gradients({});  // no-op, as Keras
  EXPECT_EQ(sgd->iterations(), 0);
  for (int i = 0; i < 3; ++i) sgd->apply_gradients({{constant<double>({1.0}), var}});
  EXPECT_EQ(sgd->iterations(), 3);
  EXPECT_EQ(sgd->iterations_variable().dtype(), DType::int64);
}

TEST(Optimizer, UnconnectedGradientIsSkipped) {
  auto sgd = opt::SGD({.learning_rate = 0.5, .momentum = 0.5});
  Variable used(constant<double>({1.0}), {.name = "used"});
  Variable unused(constant<double>({7.0}), {.name = "unused"});
  sgd->apply_gradients({{constant<double>({2.0}), used}, {Tensor(), unused}});
  EXPECT_EQ(values_of(used)[0], 0.0);
  EXPECT_EQ(values_of(unused)[0], 7.0);
  EXPECT_EQ(sgd->iterations(), 1);
  // Slots exist for both (Keras builds on the whole list).
  EXPECT_EQ(sgd->variables().size(), 3u);
  // Later the unused variable may get a gradient.
  sgd->apply_gradients({{Tensor(), used}, {constant<double>({2.0}), unused}});
  EXPECT_EQ(values_of(unused)[0], 6.0);
}

TEST(Optimizer, AllGradientsUndefinedIsAnErrorAndChangesNothing) {
  auto sgd = opt::SGD();
  Variable var(constant<double>({1.0}), {.name = "lonely"});
  try {
    sgd->apply_gradients({{Tensor(), var}});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("No gradients provided for any variable"),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find("lonely"), std::string::npos);
  }
  EXPECT_EQ(sgd->iterations(), 0);
}

TEST(Optimizer, ShapeMismatchNamesTheVariableAndChangesNothing) {
  auto sgd = opt::SGD({.learning_rate = 1.0});
  Variable good(constant<double>({1.0}), {.name = "good"});
  Variable bad(constant<double>({1.0, 2.0}), {.name = "dense/kernel"});
  try {
    sgd->apply_gradients(
        {{constant<double>({1.0}), good}, {constant<double>({1.0, 2.0, 3.0}), bad}});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("dense/kernel"), std::string::npos) << m;
    EXPECT_NE(m.find("[3]"), std::string::npos) << m;
  }
  EXPECT_EQ(values_of(good)[0], 1.0);
  EXPECT_EQ(sgd->iterations(), 0);
  EXPECT_THROW(sgd->apply_gradients({{constant<float>({1.0f}), good}}),
               InvalidArgumentError);  // dtype
}

TEST(Optimizer, VariableNotInTheBuiltListIsAnError) {
  auto sgd = opt::SGD();
  Variable a(constant<double>({1.0}), {.name = "a"});
  Variable b(constant<double>({1.0}), {.name = "b"});
  sgd->apply_gradients({{constant<double>({1.0}), a}});
  EXPECT_THROW(sgd->apply_gradients({{constant<double>({1.0}), b}}), InvalidArgumentError);
}

TEST(Optimizer, BuildCreatesSlotsUpFront) {
  auto rms = opt::RMSprop({.momentum = 0.9, .centered = true});
  Variable a(constant<double>({1.0, 2.0}), {.name = "a"});
  Variable b(constant<double>({1.0}), {.name = "b"});
  rms->build({a, b});
  EXPECT_TRUE(rms->built());
  const auto vars = rms->variables();
  ASSERT_EQ(vars.size(), 7u);
  EXPECT_EQ(vars[1].name(), "RMSprop/a/velocity");
  EXPECT_EQ(vars[2].name(), "RMSprop/b/velocity");
  EXPECT_EQ(vars[3].name(), "RMSprop/a/momentum");
  EXPECT_EQ(vars[5].name(), "RMSprop/a/average_gradient");
  EXPECT_EQ(vars[5].shape(), (TensorShape{2}));
  rms->build({a});  // no-op
  EXPECT_EQ(rms->variables().size(), 7u);
}

TEST(Optimizer, CustomNameAndSlotsThroughTheVariableCreatorStack) {
  int created = 0;
  VariableCreatorScope scope([&](const NextVariableCreator& next, VariableArgs args) {
    ++created;
    return next(std::move(args));
  });
  auto sgd = opt::SGD({.name = "my_sgd"});
  EXPECT_EQ(sgd->name(), "my_sgd");
  EXPECT_EQ(created, 1);  // iterations
  Variable var(constant<double>({1.0}));
  EXPECT_EQ(created, 2);
  sgd->apply_gradients({{constant<double>({1.0}), var}});
  EXPECT_EQ(created, 3);  // the momentum slot
}

TEST(Optimizer, SetLearningRate) {
  auto sgd = opt::SGD({.learning_rate = 0.1});
  sgd->set_learning_rate(0.5);
  EXPECT_EQ(sgd->learning_rate(), 0.5);
  Variable var(constant<double>({1.0}));
  sgd->apply_gradients({{constant<double>({1.0}), var}});
  EXPECT_EQ(values_of(var)[0], 0.5);
  auto scheduled =
      opt::SGD({.learning_rate = opt::schedules::PiecewiseConstantDecay({1}, {1.0, 0.5})});
  EXPECT_THROW(scheduled->set_learning_rate(0.1), InvalidArgumentError);
  scheduled->set_learning_rate(opt::schedules::PiecewiseConstantDecay({0}, {2.0, 3.0}));
  EXPECT_EQ(scheduled->learning_rate(), 2.0);
}

TEST(Optimizer, ScheduleIsEvaluatedAtIterationsBeforeEachStep) {
  // Steps 0 and 1 use 1.0 (step <= 1), step 2 uses 0.5, step 3+ 0.25.
  auto sgd =
      opt::SGD({.learning_rate = opt::schedules::PiecewiseConstantDecay({1, 2}, {1.0, 0.5, 0.25})});
  Variable var(constant<double>({0.0}));
  EXPECT_EQ(sgd->learning_rate(), 1.0);
  const Vec expected = {-1.0, -2.0, -2.5, -2.75};
  const Vec lr_after = {1.0, 1.0, 0.5, 0.25};
  for (size_t i = 0; i < expected.size(); ++i) {
    sgd->apply_gradients({{constant<double>({1.0}), var}});
    EXPECT_EQ(values_of(var)[0], expected[i]) << "step " << i;
    EXPECT_EQ(sgd->learning_rate(), lr_after[i]) << "step " << i;  // the rate the step used
  }
}

TEST(Optimizer, LearningRateIsRoundedToFloat32) {
  auto sgd = opt::SGD({.learning_rate = 0.1});
  EXPECT_EQ(sgd->learning_rate(), double(0.1f));
}

TEST(OptimizersGet, ResolvesNamesCaseInsensitively) {
  EXPECT_EQ(opt::get("adam")->name(), "Adam");
  EXPECT_EQ(opt::get("SGD")->name(), "SGD");
  EXPECT_EQ(opt::get("rmsprop")->name(), "RMSprop");
  EXPECT_EQ(opt::get("Adagrad")->name(), "Adagrad");
  EXPECT_EQ(opt::get("adamw")->name(), "AdamW");
  EXPECT_THROW(opt::get("lion"), InvalidArgumentError);
}

TEST(Optimizer, AnOptimizerMadeOutsideTheScopeIsRefusedOnSeveralReplicas) {
  strata::testing::use_logical_cpus(2);
  distribute::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  auto sgd = opt::SGD();
  Variable var(constant<double>({1.0}));
  try {
    strategy.run([&] { sgd->apply_gradients({{constant<double>({1.0}), var}}); });
    FAIL();
  } catch (const FailedPreconditionError& e) {
    EXPECT_NE(std::string(e.what()).find("inside the strategy's scope"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(values_of(var)[0], 1.0);
}

TEST(Optimizer, ReplicasSumTheirGradientsAndKeepTheCopiesEqual) {
  strata::testing::use_logical_cpus(3);
  distribute::MirroredStrategy strategy({"CPU:0", "CPU:1", "CPU:2"});
  Variable var;
  Variable unconnected;
  std::shared_ptr<opt::SGDOptimizer> sgd;
  {
    auto scope = strategy.scope();
    var = Variable(constant<double>({1.0, 2.0}), {.name = "w"});
    unconnected = Variable(constant<double>({5.0}), {.name = "u"});
    sgd = opt::SGD({.learning_rate = 0.1, .momentum = 0.5});
  }
  // Replica r's gradient is (r + 1) * [1, -1]: the sum over 3 replicas is 6 * [1, -1].
  auto step = [&] {
    const double r = distribute::get_replica_context()->replica_id_in_sync_group();
    sgd->apply_gradients({{constant<double>({r + 1.0, -(r + 1.0)}), var}, {Tensor(), unconnected}});
  };
  strategy.run(step);
  strategy.run(step);
  // Independent computation (Keras rounds lr to float32): m1 = -6 lr; m2 = 0.5 m1 - 6 lr = -9 lr;
  // w = [1, 2] + (m1 + m2) * [1, -1] = [1 - 15 lr, 2 + 15 lr].
  const double lr = double(0.1f);
  for (const Variable& copy : distribute::distributed_components(var)) {
    const std::vector<double> w = copy.value().to_vector<double>();
    EXPECT_NEAR(w[0], 1.0 - 15 * lr, 1e-12);
    EXPECT_NEAR(w[1], 2.0 + 15 * lr, 1e-12);
  }
  for (const Variable& copy : distribute::distributed_components(unconnected)) {
    EXPECT_EQ(copy.value().to_vector<double>()[0], 5.0);
  }
  EXPECT_EQ(sgd->iterations(), 2);
}

}  // namespace
}  // namespace strata::keras

namespace strata::keras {
namespace {

TEST(OptimizerUnderStrategy, OneReplicaUpdatesTheMirroredVariableAndDistributedSlots) {
  strata::internal::reset_runtime_for_testing();
  distribute::MirroredStrategy strategy({"CPU:0"});
  Variable var;
  std::shared_ptr<opt::SGDOptimizer> sgd;
  {
    auto scope = strategy.scope();
    var = Variable(constant<double>({1.0, 2.0}), {.name = "w"});
    sgd = opt::SGD({.learning_rate = 0.5, .momentum = 0.5});
    sgd->build({var});
    EXPECT_TRUE(distribute::is_mirrored_variable(sgd->iterations_variable()));
    EXPECT_TRUE(distribute::is_mirrored_variable(sgd->variables()[1]));
  }
  for (int step = 0; step < 2; ++step) {
    strategy.run([&] { sgd->apply_gradients({{constant<double>({1.0, -1.0}), var}}); });
  }
  // m: -0.5, then -0.25 - 0.5 = -0.75; var: 1 - 0.5 - 0.75, 2 + 0.5 + 0.75.
  EXPECT_EQ(values_of(var), (Vec{-0.25, 3.25}));
  EXPECT_EQ(sgd->iterations(), 2);
}

}  // namespace
}  // namespace strata::keras

namespace strata::keras {
namespace {

TEST(OptimizerEndToEnd, EveryOptimizerFitsALinearModelWithTheTape) {
  // y = 2 x - 1 on four points; mean squared error through the tape.
  Tensor x = constant<float>({0, 1, 2, 3}, {4, 1});
  Tensor y = constant<float>({-1, 1, 3, 5}, {4, 1});
  auto loss_fn = losses::MeanSquaredError();
  std::vector<std::shared_ptr<opt::Optimizer>> optimizers = {
      opt::SGD({.learning_rate = 0.05, .momentum = 0.9}), opt::Adam({.learning_rate = 0.1}),
      opt::AdamW({.learning_rate = 0.1, .weight_decay = 1e-4}),
      opt::RMSprop({.learning_rate = 0.02}), opt::Adagrad({.learning_rate = 0.5})};
  for (const auto& optimizer : optimizers) {
    Variable w(constant<float>({0.0f}, {1, 1}), {.name = "w"});
    Variable b(constant<float>({0.0f}), {.name = "b"});
    double first = 0, last = 0;
    for (int step = 0; step < 300; ++step) {
      GradientTape tape;
      Tensor pred = strata::add(strata::matmul(x, w.value()), b.value());
      Tensor loss = (*loss_fn)(y, pred);
      if (step == 0) first = loss.scalar_as_double();
      last = loss.scalar_as_double();
      auto grads = tape.gradient(loss, std::vector<Variable>{w, b});
      optimizer->apply_gradients(strata::zip(grads, std::vector<Variable>{w, b}));
    }
    EXPECT_LT(last, first * 1e-2) << optimizer->name();
    EXPECT_NEAR(values_of(w)[0], 2.0, 0.15) << optimizer->name();
    EXPECT_EQ(optimizer->iterations(), 300);
  }
}

}  // namespace
}  // namespace strata::keras

namespace strata::keras {
namespace {

TEST(Optimizer, MinimizeRecordsTheLossAndApplies) {
  // Keras's docstring: SGD(0.1), loss var^2 / 2 -> 0.9.
  auto sgd = opt::SGD({.learning_rate = 0.1});
  Variable var(constant(1.0f));
  sgd->minimize([&] { return strata::multiply(strata::square(var.value()), constant(0.5f)); },
                {var});
  EXPECT_NEAR(var.value().item<float>(), 0.9f, 1e-7);
  EXPECT_EQ(sgd->iterations(), 1);
}

TEST(OptimizerUnderStrategy, SkippingAggregationOnTwoReplicasAppliesTheCallersAllReducedGradients) {
  strata::testing::use_logical_cpus(2);
  distribute::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  Variable var;
  std::shared_ptr<opt::AdamOptimizer> adam;
  {
    auto scope = strategy.scope();
    var = Variable(constant<double>({1.0, -1.0}), {.name = "w"});
    adam = opt::Adam({.learning_rate = 0.1});
  }
  // Not built: replica threads cannot create the slots.
  EXPECT_THROW(strategy.run([&] {
    adam->apply_gradients({{constant<double>({1.0, 1.0}), var}},
                          {.skip_gradients_aggregation = true});
  }),
               FailedPreconditionError);
  {
    auto scope = strategy.scope();
    adam->build({var});
  }
  Vec ref = {1.0, -1.0}, m(2, 0.0), v(2, 0.0);
  for (int t = 1; t <= 3; ++t) {
    strategy.run([&] {
      distribute::ReplicaContext& ctx = *distribute::get_replica_context();
      // Per-replica gradients (r + 1) * (1, 2), summed by the caller: (3, 6).
      const double r = ctx.replica_id_in_sync_group() + 1;
      Tensor g = ctx.all_reduce(distribute::ReduceOp::SUM, constant<double>({r, 2 * r}));
      adam->apply_gradients({{g, var}}, {.skip_gradients_aggregation = true});
    });
    adam_reference(ref, {3.0, 6.0}, t, m, v, nullptr, f32(0.1), 0.9, 0.999, 1e-7);
  }
  // Both replicas' copies took the same steps.
  for (const Variable& component : distribute::distributed_components(var)) {
    const Vec got = values_of(component);
    EXPECT_NEAR(got[0], ref[0], 1e-12);
    EXPECT_NEAR(got[1], ref[1], 1e-12);
  }
  EXPECT_EQ(adam->iterations(), 3);
}

}  // namespace
}  // namespace strata::keras
