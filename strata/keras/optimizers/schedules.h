#pragma once
// keras.optimizers.schedules: learning rates as functions of the step. Pass
// one as an optimizer's learning_rate; the optimizer evaluates it at its
// `iterations` before each step (0 for the first).
//
//   auto lr = keras::optimizers::schedules::ExponentialDecay(
//       {.initial_learning_rate = 0.1, .decay_steps = 1000, .decay_rate = 0.96, .staircase =
//       true});
//   auto opt = keras::optimizers::SGD({.learning_rate = lr});
//   (*lr)(2500);                                      // 0.1 * 0.96^2
//   auto pw = keras::optimizers::schedules::PiecewiseConstantDecay({100, 110}, {1.0, 0.5, 0.1});
//   auto cos = keras::optimizers::schedules::CosineDecay(
//       {.initial_learning_rate = 0.0, .decay_steps = 1000, .warmup_target = 0.1, .warmup_steps =
//       100});
//
// The formulas are Keras 2.13's, computed in double (Keras computes in the
// dtype of initial_learning_rate, float32 for a Python float; the optimizer
// rounds the result to float32). Schedules are immutable, hence thread-safe.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/keras/optimizer.h"

namespace strata::keras::optimizers::schedules {

// keras.optimizers.schedules.ExponentialDecay arguments (Keras's order).
struct ExponentialDecayOptions {
  double initial_learning_rate = 0.0;
  double decay_steps = 0.0;  // > 0 (required)
  double decay_rate = 0.0;   // required
  bool staircase = false;
  std::string name = "";
};

// initial_learning_rate * decay_rate ^ (step / decay_steps); with staircase the
// exponent is floor(step / decay_steps).
class ExponentialDecaySchedule : public LearningRateSchedule {
 public:
  // InvalidArgumentError unless decay_steps > 0.
  explicit ExponentialDecaySchedule(const ExponentialDecayOptions& options);
  double operator()(int64_t step) const override;
  const ExponentialDecayOptions& options() const noexcept { return options_; }

 private:
  ExponentialDecayOptions options_;
};

std::shared_ptr<ExponentialDecaySchedule> ExponentialDecay(const ExponentialDecayOptions& options);

// values[0] while step <= boundaries[0], values[i] while
// boundaries[i-1] < step <= boundaries[i], values.back() after the last.
class PiecewiseConstantDecaySchedule : public LearningRateSchedule {
 public:
  // InvalidArgumentError unless values.size() == boundaries.size() + 1 and the
  // boundaries are strictly increasing.
  PiecewiseConstantDecaySchedule(std::vector<int64_t> boundaries, std::vector<double> values,
                                 std::string name = "");
  double operator()(int64_t step) const override;
  const std::vector<int64_t>& boundaries() const noexcept { return boundaries_; }
  const std::vector<double>& values() const noexcept { return values_; }

 private:
  std::vector<int64_t> boundaries_;
  std::vector<double> values_;
  std::string name_;
};

std::shared_ptr<PiecewiseConstantDecaySchedule> PiecewiseConstantDecay(
    std::vector<int64_t> boundaries, std::vector<double> values, std::string name = "");

// keras.optimizers.schedules.CosineDecay arguments (Keras 2.13's order).
struct CosineDecayOptions {
  double initial_learning_rate = 0.0;
  double decay_steps = 0.0;  // > 0 (required)
  double alpha = 0.0;        // the final rate as a fraction of the decayed-from rate
  std::string name = "";
  std::optional<double> warmup_target = std::nullopt;
  double warmup_steps = 0.0;
};

// Without warmup: step' = min(step, decay_steps),
//   initial_learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * step' / decay_steps)) + alpha).
// With warmup_target: step' = min(step, decay_steps + warmup_steps); while
// step' < warmup_steps the rate rises linearly from initial_learning_rate to
// warmup_target (initial + (target - initial) * step' / warmup_steps), then
// decays from warmup_target as above over step' - warmup_steps.
class CosineDecaySchedule : public LearningRateSchedule {
 public:
  // InvalidArgumentError unless decay_steps > 0 and warmup_steps >= 0.
  explicit CosineDecaySchedule(const CosineDecayOptions& options);
  double operator()(int64_t step) const override;
  const CosineDecayOptions& options() const noexcept { return options_; }

 private:
  CosineDecayOptions options_;
};

std::shared_ptr<CosineDecaySchedule> CosineDecay(const CosineDecayOptions& options);

// keras.optimizers.schedules.PolynomialDecay arguments (Keras's order).
struct PolynomialDecayOptions {
  double initial_learning_rate = 0.0;
  double decay_steps = 0.0;  // > 0 (required)
  double end_learning_rate = 0.0001;
  double power = 1.0;
  bool cycle = false;
  std::string name = "";
};

// (initial - end) * (1 - step' / steps')^power + end, where without cycle
// step' = min(step, decay_steps) and steps' = decay_steps, and with cycle
// step' = step and steps' = decay_steps * ceil(step / decay_steps) (1 at step 0).
class PolynomialDecaySchedule : public LearningRateSchedule {
 public:
  // InvalidArgumentError unless decay_steps > 0.
  explicit PolynomialDecaySchedule(const PolynomialDecayOptions& options);
  double operator()(int64_t step) const override;
  const PolynomialDecayOptions& options() const noexcept { return options_; }

 private:
  PolynomialDecayOptions options_;
};

std::shared_ptr<PolynomialDecaySchedule> PolynomialDecay(const PolynomialDecayOptions& options);

// keras.optimizers.schedules.InverseTimeDecay arguments (Keras's order).
struct InverseTimeDecayOptions {
  double initial_learning_rate = 0.0;
  double decay_steps = 0.0;  // > 0 (required)
  double decay_rate = 0.0;   // required
  bool staircase = false;
  std::string name = "";
};

// initial_learning_rate / (1 + decay_rate * step / decay_steps); with
// staircase the ratio is floor(step / decay_steps).
class InverseTimeDecaySchedule : public LearningRateSchedule {
 public:
  // InvalidArgumentError unless decay_steps > 0.
  explicit InverseTimeDecaySchedule(const InverseTimeDecayOptions& options);
  double operator()(int64_t step) const override;
  const InverseTimeDecayOptions& options() const noexcept { return options_; }

 private:
  InverseTimeDecayOptions options_;
};

std::shared_ptr<InverseTimeDecaySchedule> InverseTimeDecay(const InverseTimeDecayOptions& options);

}  // namespace strata::keras::optimizers::schedules
