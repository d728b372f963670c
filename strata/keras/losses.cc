#include "strata/keras/losses.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/activations.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras::losses {
namespace {
// Keras's backend.epsilon().
constexpr double kEpsilon = 1e-7;

Tensor scalar_like(double v, const Tensor& like) {
  return strata::cast(strata::constant(v), like.dtype());
}

int64_t normalize_axis(int64_t axis, int rank, const char* who) {
  STRATA_CHECK_ARG(axis >= -rank && axis < rank, who, ": axis ", axis, " is out of range for rank ",
                   rank);
  return axis < 0 ? axis + rank : axis;
}

// squeeze(t, -1) of a trailing dimension of 1 (the callers check it), as a
// reshape to the dimensions the shape already holds: no axis list to build
// on every step.
Tensor squeeze_last(const Tensor& t) {
  STRATA_INTERNAL_CHECK(t.rank() > 0 && t.shape()[-1] == 1, "squeeze_last of shape ", t.shape());
  return strata::internal::reshape_to(t, t.shape().removed(t.rank() - 1).dims());
}

// Keras's clip of probabilities to [epsilon, 1 - epsilon].
Tensor clip_probabilities(const Tensor& p) {
  return strata::minimum(strata::maximum(p, scalar_like(kEpsilon, p)),
                         scalar_like(1.0 - kEpsilon, p));
}

void check_label_smoothing(double s, const char* who) {
  STRATA_CHECK_ARG(s >= 0.0 && s <= 1.0, who, ".label_smoothing must be in [0, 1], got ", s);
}

}  // namespace

std::string reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::AUTO: return "auto";
    case Reduction::NONE: return "none";
    case Reduction::SUM: return "sum";
    case Reduction::SUM_OVER_BATCH_SIZE: return "sum_over_batch_size";
  }
  STRATA_INTERNAL_CHECK(false, "unknown Reduction");
  return "";
}

Tensor reduce(const Tensor& per_example_loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::NONE: return per_example_loss;
    case Reduction::SUM: return strata::reduce_sum(per_example_loss);
    case Reduction::AUTO:
    case Reduction::SUM_OVER_BATCH_SIZE: {
      // The per-replica mean; under a strategy fit rescales it by 1/replicas (model.h).
      // Keras divides with divide_no_nan: an empty loss gives 0.
      const double n = double(per_example_loss.shape().num_elements());
      return strata::divide(strata::reduce_sum(per_example_loss),
                            scalar_like(n > 0 ? n : 1.0, per_example_loss));
    }
  }
  STRATA_INTERNAL_CHECK(false, "unknown Reduction");
  return per_example_loss;
}

Tensor compute_weighted_loss(const Tensor& losses, const Tensor& sample_weight,
                             Reduction reduction) {
  STRATA_CHECK_ARG(losses.defined(), "compute_weighted_loss: undefined losses");
  // Keras computes non-float losses in float32 and casts the result back.
  const DType input_dtype = losses.dtype();
  const bool casted = !is_floating(input_dtype);
  Tensor l = casted ? strata::cast(losses, DType::float32) : losses;
  if (sample_weight.defined()) {
    Tensor w = strata::cast(sample_weight, l.dtype());
    // Keras's squeeze_or_expand_dimensions for the weights.
    if (w.rank() > 0) {
      if (l.rank() - w.rank() == 1) {
        w = strata::expand_dims(w, -1);
      } else if (w.rank() - l.rank() == 1 && w.shape()[-1] == 1) {
        w = squeeze_last(w);
      }
    }
    l = strata::multiply(l, w);
  }
  Tensor out = reduce(l, reduction);
  return casted ? strata::cast(out, input_dtype) : out;
}

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred) {
  Tensor t = strata::cast(y_true, y_pred.dtype());
  return strata::reduce_mean(strata::squared_difference(y_pred, t), {.axis = {-1}});
}

Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred) {
  Tensor t = strata::cast(y_true, y_pred.dtype());
  return strata::reduce_mean(strata::abs(strata::subtract(y_pred, t)), {.axis = {-1}});
}

Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                       const SparseCategoricalCrossentropyFnOptions& options) {
  STRATA_CHECK_ARG(y_pred.rank() >= 1,
                   "sparse_categorical_crossentropy: expected y_pred of rank >= 1, got shape ",
                   y_pred.shape());
  STRATA_CHECK_ARG(is_floating(y_pred.dtype()),
                   "sparse_categorical_crossentropy: expected floating y_pred, got dtype ",
                   dtype_name(y_pred.dtype()));
  Tensor logits = y_pred;
  if (!options.from_logits) logits = strata::log(clip_probabilities(y_pred));
  // Move the class axis last, as keras.backend does.
  const int rank = logits.rank();
  const int64_t axis = normalize_axis(options.axis, rank, "sparse_categorical_crossentropy");
  if (axis != rank - 1) {
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < rank; ++i) {
      if (i != axis) perm.push_back(i);
    }
    perm.push_back(axis);
    logits = strata::transpose(logits, perm);
  }
  const TensorShape& logits_shape = logits.shape();
  const TensorShape outer = logits_shape.removed(rank - 1);
  Tensor labels = strata::cast(y_true, DType::int64);
  if (labels.rank() == rank && rank > 0 && labels.shape()[-1] == 1) labels = squeeze_last(labels);
  const int64_t n = outer.num_elements();
  STRATA_CHECK_ARG(labels.num_elements() == n,
                   "sparse_categorical_crossentropy: expected labels of shape ", outer,
                   " (y_pred without its class axis), got ", y_true.shape());
  // Shapes as arrays (reshape_to): the loss runs on every training step.
  const std::array<int64_t, 1> flat_labels = {n};
  const std::array<int64_t, 2> flat_logits = {n, logits_shape[-1]};
  Tensor res = strata::nn::sparse_softmax_cross_entropy_with_logits(
      strata::internal::reshape_to(labels, flat_labels),
      strata::internal::reshape_to(logits, flat_logits));
  return strata::internal::reshape_to(res, outer.dims());
}

Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                const CategoricalCrossentropyFnOptions& options) {
  check_label_smoothing(options.label_smoothing, "CategoricalCrossentropyFnOptions");
  STRATA_CHECK_ARG(is_floating(y_pred.dtype()),
                   "categorical_crossentropy: expected floating y_pred, got dtype ",
                   dtype_name(y_pred.dtype()));
  STRATA_CHECK_ARG(
      y_pred.rank() >= 1 && y_true.shape() == y_pred.shape(),
      "categorical_crossentropy: expected y_true and y_pred of the same shape (rank >= 1), got ",
      y_true.shape(), " and ", y_pred.shape());
  const int64_t axis = normalize_axis(options.axis, y_pred.rank(), "categorical_crossentropy");
  Tensor target = strata::cast(y_true, y_pred.dtype());
  if (options.label_smoothing > 0) {
    const double classes = double(y_pred.shape()[static_cast<int>(axis)]);
    target = target * (1.0 - options.label_smoothing) + options.label_smoothing / classes;
  }
  if (options.from_logits)
    return strata::nn::softmax_cross_entropy_with_logits(target, y_pred, axis);
  Tensor p = y_pred / strata::reduce_sum(y_pred, {.axis = {axis}, .keepdims = true});
  p = clip_probabilities(p);
  return strata::negative(strata::reduce_sum(target * strata::log(p), {.axis = {axis}}));
}

Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                           const BinaryCrossentropyFnOptions& options) {
  check_label_smoothing(options.label_smoothing, "BinaryCrossentropyFnOptions");
  STRATA_CHECK_ARG(is_floating(y_pred.dtype()),
                   "binary_crossentropy: expected floating y_pred, got dtype ",
                   dtype_name(y_pred.dtype()));
  STRATA_CHECK_ARG(y_pred.rank() >= 1,
                   "binary_crossentropy: expected y_pred of rank >= 1, got shape ", y_pred.shape());
  const int64_t axis = normalize_axis(options.axis, y_pred.rank(), "binary_crossentropy");
  Tensor target = strata::cast(y_true, y_pred.dtype());
  if (options.label_smoothing > 0) {
    target = target * (1.0 - options.label_smoothing) + 0.5 * options.label_smoothing;
  }
  Tensor elementwise;
  // Keras 2's backend.binary_crossentropy: the output of a Keras sigmoid is
  // replaced by the logits it came from, which avoids the vanishing gradient
  // of clipped probabilities.
  const Tensor logits = options.from_logits ? y_pred : activations::keras_logits(y_pred);
  if (logits.defined()) {
    elementwise = strata::nn::sigmoid_cross_entropy_with_logits(target, logits);
  } else {
    // keras.backend.binary_crossentropy adds epsilon inside the logs after clipping.
    Tensor p = clip_probabilities(y_pred);
    Tensor bce =
        target * strata::log(p + kEpsilon) + (1.0 - target) * strata::log(1.0 - p + kEpsilon);
    elementwise = strata::negative(bce);
  }
  return strata::reduce_mean(elementwise, {.axis = {axis}});
}

Tensor huber(const Tensor& y_true, const Tensor& y_pred, const HuberFnOptions& options) {
  STRATA_CHECK_ARG(is_floating(y_pred.dtype()), "huber: expected floating y_pred, got dtype ",
                   dtype_name(y_pred.dtype()));
  Tensor error = y_pred - strata::cast(y_true, y_pred.dtype());
  Tensor abs_error = strata::abs(error);
  const double delta = options.delta;
  Tensor quadratic = strata::square(error) * 0.5;
  Tensor linear = abs_error * delta - 0.5 * delta * delta;
  return strata::reduce_mean(strata::where(abs_error <= delta, quadratic, linear), {.axis = {-1}});
}

// --- Loss classes ---------------------------------------------------------------

Loss::Loss(std::string name, Reduction reduction) : name_(std::move(name)), reduction_(reduction) {}

Tensor Loss::operator()(const Tensor& y_true, const Tensor& y_pred,
                        const Tensor& sample_weight) const {
  STRATA_CHECK_ARG(y_true.defined() && y_pred.defined(), "loss '", name_,
                   "' called with an undefined tensor");
  const Reduction reduction = resolved_reduction();
  STRATA_CHECK_ARG(
      reduction != Reduction::SUM_OVER_BATCH_SIZE || allow_sum_over_batch_size_ ||
          !distribute::has_strategy(),
      "loss '", name_, "': please use Reduction::SUM or Reduction::NONE for loss reduction (got ",
      reduction_name(reduction_),
      ") when losses are used with a tf.distribute.Strategy, except for losses given to "
      "Model::compile for use by the built-in training loop Model::fit; see the custom training "
      "tutorial (https://www.tensorflow.org/tutorials/distribute/custom_training)");
  return compute_weighted_loss(call(y_true, y_pred), sample_weight, reduction);
}

LossFunctionWrapper::LossFunctionWrapper(LossFunction fn, std::string name, Reduction reduction)
    : Loss(std::move(name), reduction), fn_(std::move(fn)) {
  STRATA_CHECK_ARG(fn_ != nullptr, "LossFunctionWrapper '", this->name(), "': empty function");
}

Tensor LossFunctionWrapper::call(const Tensor& y_true, const Tensor& y_pred) const {
  auto [p, t] = squeeze_or_expand_dimensions(y_pred, y_true);
  return fn_(t, p);
}

std::pair<Tensor, Tensor> squeeze_or_expand_dimensions(const Tensor& y_pred, const Tensor& y_true) {
  Tensor p = y_pred, t = y_true;
  const int diff = p.rank() - t.rank();
  // Keras's remove_squeezable_dimensions, skipped when y_true has one rank
  // less than a y_pred whose last dimension is > 1 (sparse labels).
  if (diff == 1 && p.shape()[-1] == 1) {
    p = squeeze_last(p);
  } else if (diff == -1 && t.shape()[-1] == 1) {
    t = squeeze_last(t);
  }
  return {p, t};
}

std::shared_ptr<LossFunctionWrapper> make_loss(LossFunction fn, std::string name,
                                               Reduction reduction) {
  return std::make_shared<LossFunctionWrapper>(std::move(fn), std::move(name), reduction);
}

SparseCategoricalCrossentropyLoss::SparseCategoricalCrossentropyLoss(
    const SparseCategoricalCrossentropyOptions& o)
    : LossFunctionWrapper(
          [from_logits = o.from_logits](const Tensor& t, const Tensor& p) {
            return sparse_categorical_crossentropy(t, p, {.from_logits = from_logits});
          },
          o.name, o.reduction),
      from_logits_(o.from_logits) {}

std::shared_ptr<SparseCategoricalCrossentropyLoss> SparseCategoricalCrossentropy(
    const SparseCategoricalCrossentropyOptions& options) {
  return std::make_shared<SparseCategoricalCrossentropyLoss>(options);
}

CategoricalCrossentropyLoss::CategoricalCrossentropyLoss(const CategoricalCrossentropyOptions& o)
    : LossFunctionWrapper(
          [fn = CategoricalCrossentropyFnOptions{.from_logits = o.from_logits,
                                                 .label_smoothing = o.label_smoothing,
                                                 .axis = o.axis}](
              const Tensor& t, const Tensor& p) { return categorical_crossentropy(t, p, fn); },
          o.name, o.reduction),
      options_(o) {
  check_label_smoothing(o.label_smoothing, "CategoricalCrossentropyOptions");
}

std::shared_ptr<CategoricalCrossentropyLoss> CategoricalCrossentropy(
    const CategoricalCrossentropyOptions& options) {
  return std::make_shared<CategoricalCrossentropyLoss>(options);
}

BinaryCrossentropyLoss::BinaryCrossentropyLoss(const BinaryCrossentropyOptions& o)
    : LossFunctionWrapper(
          [fn = BinaryCrossentropyFnOptions{.from_logits = o.from_logits,
                                            .label_smoothing = o.label_smoothing,
                                            .axis = o.axis}](const Tensor& t, const Tensor& p) {
            return binary_crossentropy(t, p, fn);
          },
          o.name, o.reduction),
      options_(o) {
  check_label_smoothing(o.label_smoothing, "BinaryCrossentropyOptions");
}

std::shared_ptr<BinaryCrossentropyLoss> BinaryCrossentropy(
    const BinaryCrossentropyOptions& options) {
  return std::make_shared<BinaryCrossentropyLoss>(options);
}

MeanSquaredErrorLoss::MeanSquaredErrorLoss(const MeanSquaredErrorOptions& o)
    : LossFunctionWrapper(mean_squared_error, o.name, o.reduction) {}

std::shared_ptr<MeanSquaredErrorLoss> MeanSquaredError(const MeanSquaredErrorOptions& options) {
  return std::make_shared<MeanSquaredErrorLoss>(options);
}

MeanAbsoluteErrorLoss::MeanAbsoluteErrorLoss(const MeanAbsoluteErrorOptions& o)
    : LossFunctionWrapper(mean_absolute_error, o.name, o.reduction) {}

std::shared_ptr<MeanAbsoluteErrorLoss> MeanAbsoluteError(const MeanAbsoluteErrorOptions& options) {
  return std::make_shared<MeanAbsoluteErrorLoss>(options);
}

HuberLoss::HuberLoss(const HuberOptions& o)
    : LossFunctionWrapper(
          [delta = o.delta](const Tensor& t, const Tensor& p) {
            return huber(t, p, {.delta = delta});
          },
          o.name, o.reduction),
      delta_(o.delta) {
  STRATA_CHECK_ARG(!std::isnan(o.delta), "HuberOptions.delta must be a number, got nan");
}

std::shared_ptr<HuberLoss> Huber(const HuberOptions& options) {
  return std::make_shared<HuberLoss>(options);
}

LossPtr get(const std::string& name) {
  if (name == "sparse_categorical_crossentropy" || name == "SparseCategoricalCrossentropy") {
    return SparseCategoricalCrossentropy();
  }
  if (name == "categorical_crossentropy" || name == "CategoricalCrossentropy")
    return CategoricalCrossentropy();
  if (name == "binary_crossentropy" || name == "BinaryCrossentropy") return BinaryCrossentropy();
  if (name == "mean_squared_error" || name == "mse" || name == "MSE" ||
      name == "MeanSquaredError") {
    return MeanSquaredError();
  }
  if (name == "mean_absolute_error" || name == "mae" || name == "MAE" ||
      name == "MeanAbsoluteError") {
    return MeanAbsoluteError();
  }
  if (name == "huber" || name == "huber_loss" || name == "Huber") return Huber();
  STRATA_CHECK_ARG(false, "keras::losses::get: unknown loss function: '", name, "'");
  return nullptr;
}

namespace {

Reduction reduction_from_name(const std::string& name) {
  if (name == "auto") return Reduction::AUTO;
  if (name == "none") return Reduction::NONE;
  if (name == "sum") return Reduction::SUM;
  if (name == "sum_over_batch_size") return Reduction::SUM_OVER_BATCH_SIZE;
  STRATA_CHECK_ARG(false, "keras::losses::deserialize: unknown reduction \"", name,
                   "\" (known: auto, none, sum, sum_over_batch_size)");
  return Reduction::AUTO;
}

template <typename T>
T config_value(const nlohmann::json& c, const std::string& cls, const char* key, T fallback) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  try {
    return c[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    STRATA_CHECK_ARG(false, "keras::losses::deserialize ", cls, ": \"", key,
                     "\" has the wrong type: ", c[key].dump());
    throw;
  }
}

}  // namespace

nlohmann::json serialize(const Loss& loss) {
  nlohmann::json c = {{"name", loss.name()}, {"reduction", reduction_name(loss.reduction())}};
  std::string cls;
  if (const auto* scce = dynamic_cast<const SparseCategoricalCrossentropyLoss*>(&loss)) {
    cls = "SparseCategoricalCrossentropy";
    c["from_logits"] = scce->from_logits();
    c["ignore_class"] = nullptr;
  } else if (const auto* cce = dynamic_cast<const CategoricalCrossentropyLoss*>(&loss)) {
    cls = "CategoricalCrossentropy";
    c["from_logits"] = cce->options().from_logits;
    c["label_smoothing"] = cce->options().label_smoothing;
    c["axis"] = cce->options().axis;
  } else if (const auto* bce = dynamic_cast<const BinaryCrossentropyLoss*>(&loss)) {
    cls = "BinaryCrossentropy";
    c["from_logits"] = bce->options().from_logits;
    c["label_smoothing"] = bce->options().label_smoothing;
    c["axis"] = bce->options().axis;
  } else if (dynamic_cast<const MeanSquaredErrorLoss*>(&loss)) {
    cls = "MeanSquaredError";
  } else if (dynamic_cast<const MeanAbsoluteErrorLoss*>(&loss)) {
    cls = "MeanAbsoluteError";
  } else if (const auto* huber = dynamic_cast<const HuberLoss*>(&loss)) {
    cls = "Huber";
    c["delta"] = huber->delta();
  } else {
    STRATA_CHECK(UNIMPLEMENTED, false, "keras::losses::serialize: loss '", loss.name(),
                 "' is not one of Keras's loss classes, so it has no config");
  }
  return {
      {"module", "keras.losses"}, {"class_name", cls}, {"config", c}, {"registered_name", nullptr}};
}

LossPtr deserialize(const nlohmann::json& config) {
  if (config.is_string()) return get(config.get<std::string>());
  STRATA_CHECK_ARG(
      config.is_object() && config.contains("class_name") && config["class_name"].is_string(),
      "keras::losses::deserialize: expected {\"class_name\": ..., \"config\": ...} "
      "or a name, got ",
      config.dump());
  const std::string cls = config["class_name"].get<std::string>();
  const nlohmann::json c = config.value("config", nlohmann::json::object());
  STRATA_CHECK_ARG(c.is_object(), "keras::losses::deserialize ", cls,
                   ": expected a config object, got ", c.dump());
  const Reduction reduction =
      reduction_from_name(config_value<std::string>(c, cls, "reduction", "auto"));
  auto name = [&](const char* fallback) {
    return config_value<std::string>(c, cls, "name", fallback);
  };
  if (cls == "SparseCategoricalCrossentropy") {
    return SparseCategoricalCrossentropy(
        {.from_logits = config_value<bool>(c, cls, "from_logits", false),
         .reduction = reduction,
         .name = name("sparse_categorical_crossentropy")});
  }
  if (cls == "CategoricalCrossentropy") {
    return CategoricalCrossentropy(
        {.from_logits = config_value<bool>(c, cls, "from_logits", false),
         .label_smoothing = config_value<double>(c, cls, "label_smoothing", 0.0),
         .axis = config_value<int64_t>(c, cls, "axis", -1),
         .reduction = reduction,
         .name = name("categorical_crossentropy")});
  }
  if (cls == "BinaryCrossentropy") {
    return BinaryCrossentropy(
        {.from_logits = config_value<bool>(c, cls, "from_logits", false),
         .label_smoothing = config_value<double>(c, cls, "label_smoothing", 0.0),
         .axis = config_value<int64_t>(c, cls, "axis", -1),
         .reduction = reduction,
         .name = name("binary_crossentropy")});
  }
  if (cls == "MeanSquaredError")
    return MeanSquaredError({.reduction = reduction, .name = name("mean_squared_error")});
  if (cls == "MeanAbsoluteError")
    return MeanAbsoluteError({.reduction = reduction, .name = name("mean_absolute_error")});
  if (cls == "Huber") {
    return Huber({.delta = config_value<double>(c, cls, "delta", 1.0),
                  .reduction = reduction,
                  .name = name("huber_loss")});
  }
  STRATA_CHECK_ARG(false, "keras::losses::deserialize: unknown loss class \"", cls, "\"");
  return nullptr;
}

}  // namespace strata::keras::losses
