#include "strata/keras/optimizers/schedules.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "strata/base/errors.h"

namespace strata::keras::optimizers::schedules {

ExponentialDecaySchedule::ExponentialDecaySchedule(const ExponentialDecayOptions& options)
    : options_(options) {
  STRATA_CHECK_ARG(options.decay_steps > 0, "ExponentialDecayOptions.decay_steps must be > 0, got ",
                   options.decay_steps);
}

double ExponentialDecaySchedule::operator()(int64_t step) const {
  double p = double(step) / options_.decay_steps;
  if (options_.staircase) p = std::floor(p);
  return options_.initial_learning_rate * std::pow(options_.decay_rate, p);
}

std::shared_ptr<ExponentialDecaySchedule> ExponentialDecay(const ExponentialDecayOptions& options) {
  return std::make_shared<ExponentialDecaySchedule>(options);
}

PiecewiseConstantDecaySchedule::PiecewiseConstantDecaySchedule(std::vector<int64_t> boundaries,
                                                               std::vector<double> values,
                                                               std::string name)
    : boundaries_(std::move(boundaries)), values_(std::move(values)), name_(std::move(name)) {
  STRATA_CHECK_ARG(
      boundaries_.size() + 1 == values_.size(),
      "PiecewiseConstantDecay: the length of boundaries should be 1 less than the length of "
      "values, got boundaries=",
      boundaries_, " of length ", boundaries_.size(), " and values=", values_, " of length ",
      values_.size());
  for (size_t i = 1; i < boundaries_.size(); ++i) {
    STRATA_CHECK_ARG(boundaries_[i - 1] < boundaries_[i],
                     "PiecewiseConstantDecay: boundaries must be strictly increasing, got ",
                     boundaries_);
  }
}

double PiecewiseConstantDecaySchedule::operator()(int64_t step) const {
  // The first interval is closed on the right: step == boundaries[i] still
  // gets values[i] (Keras: x <= boundaries[0], then low < x <= high).
  for (size_t i = 0; i < boundaries_.size(); ++i) {
    if (step <= boundaries_[i]) return values_[i];
  }
  return values_.back();
}

std::shared_ptr<PiecewiseConstantDecaySchedule> PiecewiseConstantDecay(
    std::vector<int64_t> boundaries, std::vector<double> values, std::string name) {
  return std::make_shared<PiecewiseConstantDecaySchedule>(std::move(boundaries), std::move(values),
                                                          std::move(name));
}

CosineDecaySchedule::CosineDecaySchedule(const CosineDecayOptions& options) : options_(options) {
  STRATA_CHECK_ARG(options.decay_steps > 0, "CosineDecayOptions.decay_steps must be > 0, got ",
                   options.decay_steps);
  STRATA_CHECK_ARG(options.warmup_steps >= 0, "CosineDecayOptions.warmup_steps must be >= 0, got ",
                   options.warmup_steps);
}

double CosineDecaySchedule::operator()(int64_t step) const {
  const CosineDecayOptions& o = options_;
  auto decay = [&](double s, double decay_from) {
    const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * s / o.decay_steps));
    return decay_from * ((1.0 - o.alpha) * cosine + o.alpha);
  };
  if (!o.warmup_target)
    return decay(std::min(double(step), o.decay_steps), o.initial_learning_rate);
  const double s = std::min(double(step), o.decay_steps + o.warmup_steps);
  if (s < o.warmup_steps) {
    return (*o.warmup_target - o.initial_learning_rate) * (s / o.warmup_steps) +
           o.initial_learning_rate;
  }
  return decay(s - o.warmup_steps, *o.warmup_target);
}

std::shared_ptr<CosineDecaySchedule> CosineDecay(const CosineDecayOptions& options) {
  return std::make_shared<CosineDecaySchedule>(options);
}

PolynomialDecaySchedule::PolynomialDecaySchedule(const PolynomialDecayOptions& options)
    : options_(options) {
  STRATA_CHECK_ARG(options.decay_steps > 0, "PolynomialDecayOptions.decay_steps must be > 0, got ",
                   options.decay_steps);
}

double PolynomialDecaySchedule::operator()(int64_t step) const {
  const PolynomialDecayOptions& o = options_;
  double s = double(step);
  double steps = o.decay_steps;
  if (o.cycle) {
    // The first multiple of decay_steps at or past the step (1 at step 0).
    steps *= s == 0 ? 1.0 : std::ceil(s / o.decay_steps);
  } else {
    s = std::min(s, o.decay_steps);
  }
  return (o.initial_learning_rate - o.end_learning_rate) * std::pow(1.0 - s / steps, o.power) +
         o.end_learning_rate;
}

std::shared_ptr<PolynomialDecaySchedule> PolynomialDecay(const PolynomialDecayOptions& options) {
  return std::make_shared<PolynomialDecaySchedule>(options);
}

InverseTimeDecaySchedule::InverseTimeDecaySchedule(const InverseTimeDecayOptions& options)
    : options_(options) {
  STRATA_CHECK_ARG(options.decay_steps > 0, "InverseTimeDecayOptions.decay_steps must be > 0, got ",
                   options.decay_steps);
}

double InverseTimeDecaySchedule::operator()(int64_t step) const {
  double p = double(step) / options_.decay_steps;
  if (options_.staircase) p = std::floor(p);
  return options_.initial_learning_rate / (1.0 + options_.decay_rate * p);
}

std::shared_ptr<InverseTimeDecaySchedule> InverseTimeDecay(const InverseTimeDecayOptions& options) {
  return std::make_shared<InverseTimeDecaySchedule>(options);
}

}  // namespace strata::keras::optimizers::schedules
