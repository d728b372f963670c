#pragma once
// Keras losses (tf.keras.losses): per-example loss functions, the Loss classes
// that reduce them to a scalar, and the reductions.
//
//   namespace losses = strata::keras::losses;
//   Tensor per_example = losses::sparse_categorical_crossentropy(labels, logits, {.from_logits =
//   true}); auto loss_fn = losses::SparseCategoricalCrossentropy({.from_logits = true}); Tensor
//   loss = (*loss_fn)(labels, logits);               // mean over the batch (AUTO) Tensor weighted
//   = (*loss_fn)(labels, logits, weights);  // sum(l * w) / number of elements auto mse =
//   losses::MeanSquaredError({.reduction = losses::Reduction::SUM}); auto by_name =
//   losses::get("sparse_categorical_crossentropy");
//
// Functions return the per-example loss: the class axis (or the last axis for
// MSE/MAE/Huber/binary cross-entropy, which average over it) is reduced away.
// A Loss object's operator() applies sample_weight and its reduction as
// Keras's compute_weighted_loss:
//   NONE: the weighted per-example losses;  SUM: their sum;
//   SUM_OVER_BATCH_SIZE (and AUTO): their sum / their number of elements (0 when empty).
// Under a strategy a Loss object refuses AUTO / SUM_OVER_BATCH_SIZE unless the
// training loop allowed them (see Loss::operator()), as Keras: the global
// batch size is the right divisor there (nn::compute_average_loss); fit allows
// them and divides the replica's loss by num_replicas_in_sync (model.h).
// Functions are pure and Loss objects
// immutable after set-up: both are thread-safe.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json_fwd.hpp>

#include "strata/core/tensor.h"

namespace strata::keras::losses {

// tf.keras.losses.Reduction. AUTO means SUM_OVER_BATCH_SIZE outside Keras's
// compile/fit (the training loop may choose otherwise under a strategy).
enum class Reduction { AUTO, NONE, SUM, SUM_OVER_BATCH_SIZE };

// "auto", "none", "sum", "sum_over_batch_size" (Keras's spellings).
std::string reduction_name(Reduction reduction);

// Reduces already-weighted per-example losses (the table above).
Tensor reduce(const Tensor& per_example_loss, Reduction reduction);

// Keras's compute_weighted_loss: multiplies `losses` by `sample_weight`
// (undefined = 1; a weight of rank one more or one less than the losses is
// squeezed or expanded on its last axis first, then broadcast), then reduces.
// Integer losses are cast to float32 first. InvalidArgumentError if the
// weight does not broadcast.
Tensor compute_weighted_loss(const Tensor& losses, const Tensor& sample_weight = Tensor(),
                             Reduction reduction = Reduction::SUM_OVER_BATCH_SIZE);

// --- functions (per-example) ------------------------------------------------

// mean((y_true - y_pred)^2, axis=-1)
Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred);
// mean(|y_true - y_pred|, axis=-1)
Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred);

// keras.losses.sparse_categorical_crossentropy arguments (Keras's order).
struct SparseCategoricalCrossentropyFnOptions {
  bool from_logits = false;
  int64_t axis = -1;  // the class axis of y_pred
};
// Integer labels (shape of y_pred without the class axis; a trailing 1 is
// squeezed) against logits or probabilities. Not from logits: probabilities
// are clipped to [1e-7, 1 - 1e-7], their log is taken and used as logits, as
// keras.backend (so -log p[label] + log sum(p) for unnormalised p). Labels
// outside [0, classes) are an InvalidArgumentError.
Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                       const SparseCategoricalCrossentropyFnOptions& options = {});

// keras.losses.categorical_crossentropy arguments (Keras's order).
struct CategoricalCrossentropyFnOptions {
  bool from_logits = false;
  double label_smoothing = 0.0;  // in [0, 1]: y_true * (1 - s) + s / classes
  int64_t axis = -1;
};
// One-hot (or soft) labels, same shape as y_pred. Not from logits: y_pred is
// normalised to sum 1 along `axis`, clipped to [1e-7, 1 - 1e-7], and
// -sum(y_true * log(p)) is taken, as keras.backend.
Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                const CategoricalCrossentropyFnOptions& options = {});

// keras.losses.binary_crossentropy arguments (Keras's order).
struct BinaryCrossentropyFnOptions {
  bool from_logits = false;
  double label_smoothing = 0.0;  // in [0, 1]: y_true * (1 - s) + 0.5 * s
  int64_t axis = -1;             // the axis averaged over
};
// mean over `axis` of the element-wise binary cross-entropy. From logits:
// tf.nn.sigmoid_cross_entropy_with_logits. Otherwise, as keras.backend: p is
// clipped to [1e-7, 1 - 1e-7] and -(y log(p + 1e-7) + (1 - y) log(1 - p + 1e-7)).
Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                           const BinaryCrossentropyFnOptions& options = {});

// keras.losses.huber arguments.
struct HuberFnOptions {
  double delta = 1.0;
};
// mean over the last axis of 0.5 e^2 where |e| <= delta, else delta |e| - 0.5 delta^2
// (e = y_pred - y_true).
Tensor huber(const Tensor& y_true, const Tensor& y_pred, const HuberFnOptions& options = {});

// --- Loss classes -------------------------------------------------------------

// keras.losses.Loss. Subclasses implement call(); user losses may derive too.
class Loss {
 public:
  Loss(std::string name, Reduction reduction);
  virtual ~Loss() = default;
  Loss(const Loss&) = delete;
  Loss& operator=(const Loss&) = delete;

  // The per-example losses.
  virtual Tensor call(const Tensor& y_true, const Tensor& y_pred) const = 0;
  // call(), then compute_weighted_loss with this loss's reduction. As Keras,
  // AUTO and SUM_OVER_BATCH_SIZE are refused (InvalidArgumentError) while a
  // distribution strategy is current, because the per-replica mean would be
  // scaled wrongly: custom training loops use NONE or SUM and divide by the
  // global batch size (nn::compute_average_loss). Model::compile allows them
  // with set_allow_sum_over_batch_size(true) and scales the result itself.
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred,
                    const Tensor& sample_weight = Tensor()) const;

  const std::string& name() const noexcept { return name_; }
  Reduction reduction() const noexcept { return reduction_; }
  // The reduction operator() uses: AUTO resolves to SUM_OVER_BATCH_SIZE.
  Reduction resolved_reduction() const noexcept {
    return reduction_ == Reduction::AUTO ? Reduction::SUM_OVER_BATCH_SIZE : reduction_;
  }

  // Keras's private `_allow_sum_over_batch_size`, set by the training loop
  // (compile) for losses it scales across replicas itself.
  void set_allow_sum_over_batch_size(bool allow) noexcept { allow_sum_over_batch_size_ = allow; }
  bool allow_sum_over_batch_size() const noexcept { return allow_sum_over_batch_size_; }

 private:
  std::string name_;
  Reduction reduction_;
  std::atomic<bool> allow_sum_over_batch_size_ = false;
};

using LossPtr = std::shared_ptr<Loss>;
using LossFunction = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;

// keras.losses.LossFunctionWrapper: a Loss from a per-example function. Like
// Keras it first squeezes or expands y_pred/y_true's last axis when their
// ranks differ by one and that axis is 1.
// Keras's losses_utils.squeeze_or_expand_dimensions(y_pred, y_true), which
// every Keras loss applies before its function: a y_pred of one rank more
// whose last dimension is 1 is squeezed ([batch, 1] against labels [batch]),
// and so is a y_true of one rank more with a last dimension of 1. Returns
// {y_pred, y_true}.
//   # y_true [4], y_pred [4, 1] -> both [4], so the loss is not broadcast to [4, 4]
std::pair<Tensor, Tensor> squeeze_or_expand_dimensions(const Tensor& y_pred, const Tensor& y_true);

class LossFunctionWrapper : public Loss {
 public:
  LossFunctionWrapper(LossFunction fn, std::string name, Reduction reduction = Reduction::AUTO);
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;

 private:
  LossFunction fn_;
};

std::shared_ptr<LossFunctionWrapper> make_loss(LossFunction fn, std::string name,
                                               Reduction reduction = Reduction::AUTO);

struct SparseCategoricalCrossentropyOptions {
  bool from_logits = false;
  Reduction reduction = Reduction::AUTO;
  std::string name = "sparse_categorical_crossentropy";
};
class SparseCategoricalCrossentropyLoss : public LossFunctionWrapper {
 public:
  explicit SparseCategoricalCrossentropyLoss(
      const SparseCategoricalCrossentropyOptions& options = {});
  bool from_logits() const noexcept { return from_logits_; }

 private:
  bool from_logits_;
};
std::shared_ptr<SparseCategoricalCrossentropyLoss> SparseCategoricalCrossentropy(
    const SparseCategoricalCrossentropyOptions& options = {});

struct CategoricalCrossentropyOptions {
  bool from_logits = false;
  double label_smoothing = 0.0;
  int64_t axis = -1;
  Reduction reduction = Reduction::AUTO;
  std::string name = "categorical_crossentropy";
};
class CategoricalCrossentropyLoss : public LossFunctionWrapper {
 public:
  // InvalidArgumentError unless 0 <= label_smoothing <= 1.
  explicit CategoricalCrossentropyLoss(const CategoricalCrossentropyOptions& options = {});
  const CategoricalCrossentropyOptions& options() const noexcept { return options_; }

 private:
  CategoricalCrossentropyOptions options_;
};
std::shared_ptr<CategoricalCrossentropyLoss> CategoricalCrossentropy(
    const CategoricalCrossentropyOptions& options = {});

struct BinaryCrossentropyOptions {
  bool from_logits = false;
  double label_smoothing = 0.0;
  int64_t axis = -1;
  Reduction reduction = Reduction::AUTO;
  std::string name = "binary_crossentropy";
};
class BinaryCrossentropyLoss : public LossFunctionWrapper {
 public:
  // InvalidArgumentError unless 0 <= label_smoothing <= 1.
  explicit BinaryCrossentropyLoss(const BinaryCrossentropyOptions& options = {});
  const BinaryCrossentropyOptions& options() const noexcept { return options_; }

 private:
  BinaryCrossentropyOptions options_;
};
std::shared_ptr<BinaryCrossentropyLoss> BinaryCrossentropy(
    const BinaryCrossentropyOptions& options = {});

struct MeanSquaredErrorOptions {
  Reduction reduction = Reduction::AUTO;
  std::string name = "mean_squared_error";
};
class MeanSquaredErrorLoss : public LossFunctionWrapper {
 public:
  explicit MeanSquaredErrorLoss(const MeanSquaredErrorOptions& options = {});
};
std::shared_ptr<MeanSquaredErrorLoss> MeanSquaredError(const MeanSquaredErrorOptions& options = {});

struct MeanAbsoluteErrorOptions {
  Reduction reduction = Reduction::AUTO;
  std::string name = "mean_absolute_error";
};
class MeanAbsoluteErrorLoss : public LossFunctionWrapper {
 public:
  explicit MeanAbsoluteErrorLoss(const MeanAbsoluteErrorOptions& options = {});
};
std::shared_ptr<MeanAbsoluteErrorLoss> MeanAbsoluteError(
    const MeanAbsoluteErrorOptions& options = {});

struct HuberOptions {
  double delta = 1.0;
  Reduction reduction = Reduction::AUTO;
  std::string name = "huber_loss";
};
class HuberLoss : public LossFunctionWrapper {
 public:
  // InvalidArgumentError if delta is NaN (Keras accepts any other value).
  explicit HuberLoss(const HuberOptions& options = {});
  double delta() const noexcept { return delta_; }

 private:
  double delta_;
};
std::shared_ptr<HuberLoss> Huber(const HuberOptions& options = {});

// keras.losses.get for a string: a fresh Loss object with Keras's defaults.
// Accepts the function names and aliases ("sparse_categorical_crossentropy",
// "categorical_crossentropy", "binary_crossentropy", "mean_squared_error" /
// "mse", "mean_absolute_error" / "mae", "huber" / "huber_loss") and the class
// names ("SparseCategoricalCrossentropy", ...). InvalidArgumentError otherwise.
LossPtr get(const std::string& name);

// keras.losses.serialize: {"module": "keras.losses", "class_name":
// "SparseCategoricalCrossentropy", "config": {"name", "reduction" ("auto",
// "none", "sum", "sum_over_batch_size"), then the class's arguments:
// "from_logits" (and "ignore_class": null); "from_logits", "label_smoothing",
// "axis"; "delta"}, "registered_name": null} for the loss classes above.
// UnimplementedError for any other Loss (a LossFunctionWrapper around a
// function of the program's), which has no config.
nlohmann::json serialize(const Loss& loss);
// keras.losses.deserialize: a fresh loss from serialize()'s output, or get()
// for a name string. InvalidArgumentError naming an unknown class or a
// mistyped key.
LossPtr deserialize(const nlohmann::json& config);

}  // namespace strata::keras::losses
