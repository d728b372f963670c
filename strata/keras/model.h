#pragma once
// keras.Model: a layer with a training loop (compile / fit / evaluate / predict).
//
//   auto model = keras::Sequential({keras::layers::Dense(10, {.input_shape = {784}})});
//   model->compile({.optimizer = keras::optimizers::SGD({.learning_rate = 0.1}),
//                   .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
//   keras::History h = model->fit(x_train, y_train, {.batch_size = 32, .epochs = 5});
//   h.history["loss"];                         // one value per epoch
//   keras::Logs r = model->evaluate(x_test, y_test);   // {"loss": ..., "accuracy": ...}
//   Tensor probs = model->predict(x_test);
//
// Subclassing (as Keras): derive from Model, create layers with track_layer()
// as members, implement call(); override train_step/test_step/predict_step to
// change what one step does. fit calls train_step(data) once per batch, where
// data = {x, y} or {x, y, sample_weight} (Keras's data tuple).
//
// Training loop semantics (Keras 2.x):
//   * the "loss" log is the running mean of the per-batch loss over the epoch,
//     weighted by the batch size (Keras's loss tracker, a Mean metric);
//     metrics are reset at the start of every epoch and of every evaluate;
//   * "accuracy"/"acc" resolve from the shapes of the first batch as Keras's
//     compile_utils: binary accuracy when y_pred's last dimension is 1, sparse
//     categorical when y_true has lower rank than y_pred (or a last dimension
//     of 1), categorical otherwise;
//   * fit(x, y) batches in-memory tensors by batch_size (default 32) and, when
//     shuffle is true, permutes the examples each epoch with a seed derived
//     from CompileOptions::seed and the epoch index, so runs are reproducible
//     and a run resumed at epoch k (BackupAndRestore) sees epoch k's order;
//   * fit(dataset) runs each epoch until the dataset ends (a fresh iterator
//     per epoch) or, with steps_per_epoch, takes that many batches from one
//     iterator kept across epochs (Keras: when it runs dry, training stops
//     with a warning).
//
// Distribution: a model remembers distribute::get_strategy() at construction.
// When that is not the default strategy, compile creates the metrics under
// the strategy's scope; fit/evaluate/predict distribute the dataset with
// strategy.experimental_distribute_dataset (batches are global batches) and
// run train_step via strategy.run on each PerReplica batch. Inside a replica
// context with N replicas a loss with reduction SUM_OVER_BATCH_SIZE or AUTO
// (and a plain loss function) is divided by N before the gradient (Keras's
// scale_loss_for_distribution), so the optimizer's SUM all-reduce of
// gradients yields the gradient of the global mean — exactly so when the
// replicas' batches are equal (a partial last batch weighs its examples
// unequally, as in Keras). After each step the logs are the model metrics read in cross-replica
// context (the loss tracker and compiled metrics accumulate every replica's
// batches); other values a custom train_step returns are averaged over the
// replicas with strategy.reduce(MEAN). Before the first distributed step the
// model, the optimizer's slots and the compiled metrics are built in
// cross-replica context, so replica threads never create variables.
//
// Thread-safety: one fit/evaluate/predict at a time per model.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "strata/base/errors.h"
#include "strata/core/tensor.h"
#include "strata/data/dataset.h"
#include "strata/keras/callbacks/callback.h"
#include "strata/keras/layer.h"
#include "strata/keras/losses.h"
#include "strata/keras/metric.h"
#include "strata/keras/metrics/mean.h"
#include "strata/keras/optimizer.h"
#include "strata/keras/saving/object_registration.h"

namespace strata::distribute {
class ReplicaContext;
class Strategy;
template <typename T>
class PerReplica;
}  // namespace strata::distribute

namespace strata::keras {

namespace callbacks {
class HistoryCallback;
}  // namespace callbacks

// keras.callbacks.History's contents: fit's return value.
struct History {
  std::vector<int> epoch = {};                              // epochs run (0-based)
  std::map<std::string, std::vector<double>> history = {};  // name -> one value per epoch
  callbacks::CallbackParams params = {};
};

// A loss function for compile: per-example losses (or a scalar) from
// (y_true, y_pred); compile reduces them with SUM_OVER_BATCH_SIZE, as Keras
// wraps plain functions (LossFunctionWrapper with reduction AUTO).
using LossFunction = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;

// What CompileOptions::loss accepts: nothing, a name (losses::get's: "mse",
// "sparse_categorical_crossentropy", "categorical_crossentropy", ...), a
// LossFunction, or a pointer to a loss object (losses::Loss or any type
// callable as (*loss)(y_true, y_pred[, sample_weight]) -> scalar) whose
// reduction() (when it has one) tells whether it is scaled under a strategy.
class LossSpec {
 public:
  LossSpec() = default;
  LossSpec(const char* name) : LossSpec(std::string(name)) {}  // NOLINT: as Keras
  LossSpec(const std::string& name);                           // NOLINT
  LossSpec(LossFunction fn);                                   // NOLINT
  LossSpec(Tensor (*fn)(const Tensor&, const Tensor&))         // NOLINT
      : LossSpec(LossFunction(fn)) {}
  template <typename L>
  requires requires(L& l, const Tensor& t) {
    { l(t, t) } -> std::convertible_to<Tensor>;
  }
  LossSpec(std::shared_ptr<L> loss) {  // NOLINT
    name_ = loss_object_name(*loss);
    if constexpr (std::is_base_of_v<losses::Loss, L>) loss_object_ = loss;
    // compile's loop scales a mean loss for distribution itself (compute_loss),
    // so the loss object may reduce by the per-replica batch (Keras's
    // _allow_sum_over_batch_size).
    if constexpr (requires(L & l) { l.set_allow_sum_over_batch_size(true); })
      loss->set_allow_sum_over_batch_size(true);
    if constexpr (requires(L & l) {
                    { l.reduction() } -> std::convertible_to<losses::Reduction>;
                  }) {
      reduction_ = loss->reduction();
    } else {
      reduction_ = losses::Reduction::SUM_OVER_BATCH_SIZE;
    }
    if constexpr (requires(L & l, const Tensor& t) {
                    { l(t, t, t) } -> std::convertible_to<Tensor>;
                  }) {
      weighted_ = [loss](const Tensor& y, const Tensor& p, const Tensor& w) -> Tensor {
        return w.defined() ? (*loss)(y, p, w) : (*loss)(y, p);
      };
    } else {
      weighted_ = [loss](const Tensor& y, const Tensor& p, const Tensor& w) -> Tensor {
        STRATA_CHECK(UNIMPLEMENTED, !w.defined(), "loss does not accept a sample_weight");
        return (*loss)(y, p);
      };
    }
  }

  bool defined() const noexcept { return weighted_ != nullptr || per_example_ != nullptr; }
  const std::string& name() const noexcept { return name_; }
  // The name given ("mse"), "" when given otherwise (compile's config keeps it).
  const std::string& identifier() const noexcept { return identifier_; }
  // The keras::losses::Loss object given or made from the name, nullptr for a
  // function or another callable.
  const std::shared_ptr<const losses::Loss>& loss_object() const noexcept { return loss_object_; }
  // The reduced (scalar) loss for a batch; sample_weight may be undefined.
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) const;
  // The reduction applied (a function's is SUM_OVER_BATCH_SIZE).
  losses::Reduction reduction() const noexcept { return reduction_; }
  // Whether Keras scales this loss under a strategy (AUTO / SUM_OVER_BATCH_SIZE).
  bool scaled_for_distribution() const noexcept {
    return reduction_ == losses::Reduction::AUTO ||
           reduction_ == losses::Reduction::SUM_OVER_BATCH_SIZE;
  }

 private:
  template <typename L>
  static std::string loss_object_name(const L& loss) {
    if constexpr (requires {
                    { loss.name() } -> std::convertible_to<std::string>;
                  }) {
      return std::string(loss.name());
    } else {
      return "loss";
    }
  }
  std::string name_;
  std::string identifier_;
  std::shared_ptr<const losses::Loss> loss_object_;
  losses::Reduction reduction_ = losses::Reduction::SUM_OVER_BATCH_SIZE;
  LossFunction per_example_;
  std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> weighted_;
};

// What CompileOptions::metrics accepts: a name ("accuracy", "acc",
// "sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy",
// "mse", "mae", ...) or a metric object.
class MetricSpec {
 public:
  MetricSpec(const char* name) : name_(name) {}             // NOLINT: as Keras
  MetricSpec(std::string name) : name_(std::move(name)) {}  // NOLINT
  template <typename M>
  requires std::is_base_of_v<metrics::Metric, M> MetricSpec(std::shared_ptr<M> metric)
      : metric_(std::move(metric)) {}  // NOLINT
  const std::string& name() const noexcept { return name_; }
  const metrics::MetricPtr& metric() const noexcept { return metric_; }

 private:
  std::string name_;
  metrics::MetricPtr metric_;
};

// keras.Model.compile arguments, in Keras's order.
// compile's optimizer, as Keras accepts it: an optimizer object, or a name
// ("adam", "sgd", "rmsprop", "adagrad", "adamw"; any case) that compile turns into
// a fresh optimizer with Keras's defaults (keras.optimizers.get), inside the
// model's strategy scope.
//
//   model->compile({.optimizer = "adam", .loss = "sparse_categorical_crossentropy"});
//   model->compile({.optimizer = keras::optimizers::SGD({.learning_rate = 0.1})});
class OptimizerSpec {
 public:
  OptimizerSpec() = default;
  OptimizerSpec(std::nullptr_t) {}  // NOLINT: as an optimizer pointer
  template <typename O>
  requires std::is_base_of_v<optimizers::Optimizer, O> OptimizerSpec(
      std::shared_ptr<O> optimizer)  // NOLINT: as Keras
      : optimizer_(std::move(optimizer)) {}
  OptimizerSpec(const char* name) : name_(name) {}             // NOLINT: as Keras
  OptimizerSpec(std::string name) : name_(std::move(name)) {}  // NOLINT: as Keras
  // The optimizer object, or nullptr when given by name or not at all.
  const optimizers::OptimizerPtr& optimizer() const noexcept { return optimizer_; }
  // The name given, "" when given as an object or not at all.
  const std::string& name() const noexcept { return name_; }

 private:
  optimizers::OptimizerPtr optimizer_;
  std::string name_;
};

struct CompileOptions {
  OptimizerSpec optimizer = nullptr;  // required for fit
  LossSpec loss = {};                 // required for fit/evaluate
  std::vector<MetricSpec> metrics = {};
  // One weight for the single output's loss (Keras's list form); empty = 1.
  std::vector<double> loss_weights = {};
  std::vector<MetricSpec> weighted_metrics = {};   // updated with sample_weight
  std::optional<bool> run_eagerly = std::nullopt;  // Strata always runs eagerly
  int64_t steps_per_execution = 1;                 // batch hooks fire once per this many steps
  std::optional<bool> jit_compile = std::nullopt;  // ignored: no compiler (Keras default: off)
  // Strata: the seed of fit's per-epoch shuffling of in-memory data (Keras uses
  // the global random seed; fixed here so runs are reproducible).
  uint64_t seed = 0;
};

// Keras's verbose argument: 0 (silent), 1 (progress bar), 2 (one line per
// epoch) or "auto" (1, drawn live only when stdout is a terminal).
class Verbosity {
 public:
  Verbosity(int level = kAuto) : level_(level) {}  // NOLINT: as Keras
  Verbosity(const char* level);                    // NOLINT: "auto"
  static constexpr int kAuto = -1;
  // The effective level: 0, 1 or 2.
  int resolve() const noexcept { return level_ == kAuto ? 1 : level_; }
  int level() const noexcept { return level_; }

 private:
  int level_;
};

// Validation data for fit: a dataset of (x, y) batches or in-memory (x, y).
class ValidationData {
 public:
  ValidationData() = default;
  ValidationData(data::Dataset dataset) : dataset_(std::move(dataset)) {}  // NOLINT
  ValidationData(const std::pair<Tensor, Tensor>& xy)
      : x_(xy.first), y_(xy.second), tensors_(true) {}  // NOLINT
  bool has_value() const noexcept { return dataset_.has_value() || tensors_; }
  const std::optional<data::Dataset>& dataset() const noexcept { return dataset_; }
  const Tensor& x() const noexcept { return x_; }
  const Tensor& y() const noexcept { return y_; }

 private:
  std::optional<data::Dataset> dataset_;
  Tensor x_, y_;
  bool tensors_ = false;
};

// keras.Model.fit arguments, in Keras's order (x and y are positional).
struct FitOptions {
  std::optional<int64_t> batch_size =
      std::nullopt;  // in-memory data: default 32; ignored for datasets
  int epochs = 1;
  Verbosity verbose = {};
  std::vector<callbacks::CallbackPtr> callbacks = {};
  double validation_split = 0.0;  // in-memory data only: the last fraction
  ValidationData validation_data = {};
  bool shuffle = true;  // in-memory data only
  int initial_epoch = 0;
  std::optional<int64_t> steps_per_epoch = std::nullopt;
  std::optional<int64_t> validation_steps = std::nullopt;
  std::optional<int64_t> validation_batch_size = std::nullopt;
  int validation_freq = 1;
};

// keras.Model.evaluate arguments, in Keras's order.
struct EvaluateOptions {
  std::optional<int64_t> batch_size = std::nullopt;
  Verbosity verbose = {};
  std::optional<int64_t> steps = std::nullopt;
  std::vector<callbacks::CallbackPtr> callbacks = {};
};

// keras.Model.predict arguments, in Keras's order.
struct PredictOptions {
  std::optional<int64_t> batch_size = std::nullopt;
  Verbosity verbose = {};
  std::optional<int64_t> steps = std::nullopt;
  std::vector<callbacks::CallbackPtr> callbacks = {};
};

namespace internal {
class CompiledMetrics;
struct StepInput;
struct PsTraining;
}  // namespace internal

class DatasetCreator;
class Model;
std::shared_ptr<Model> build_registered_model(const std::string& name);

class Model : public Layer {
 public:
  // `class_name` ("Model", "Sequential") is what summary() shows; the model's
  // name defaults to a unique `default_name` ("model", "sequential"). The
  // strategy current now is the model's distribute_strategy().
  explicit Model(std::string class_name = "Model", const std::string& default_name = "model",
                 const LayerArgs& args = {});
  ~Model() override;

  // Subclassed models have no static output shape: UnimplementedError unless overridden.
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

  // Keras's Model.from_config: a functional model from its get_config()
  // (functional.h describes the shape), with new weights.
  // custom_objects: as layers::deserialize (saving/object_registration.h).
  static std::shared_ptr<Model> from_config(const nlohmann::json& config,
                                            const saving::CustomObjects& custom_objects = {});

  void compile(const CompileOptions& options);
  bool compiled() const noexcept { return compiled_; }
  // Keras 3's model.get_compile_config(): compile's arguments as JSON, what
  // model.save stores as "compile_config": {"optimizer":
  // optimizers::serialize(optimizer) (null without one), "loss": the name
  // given, or losses::serialize of a loss object, or null for a function (it
  // has no config), "loss_weights": null or [w], "metrics" and
  // "weighted_metrics": the names of the metrics given (a metric object by
  // its name(); null when none), "run_eagerly", "steps_per_execution",
  // "jit_compile"}. FailedPreconditionError before compile; UnimplementedError
  // for an optimizer or loss that has no config (optimizers::serialize,
  // losses::serialize).
  nlohmann::json get_compile_config() const;
  // Keras 3's model.compile_from_config(config): compile with the optimizer,
  // loss and metrics deserialized from get_compile_config()'s output (a fresh
  // optimizer: no slots, iterations 0), under the model's strategy.
  // InvalidArgumentError naming a key that cannot be read.
  void compile_from_config(const nlohmann::json& config);

  History fit(const data::Dataset& dataset, const FitOptions& options = {});
  History fit(const Tensor& x, const Tensor& y, const FitOptions& options = {});
  // fit on a registered dataset function (strata/keras/ps/ps_training.h,
  // defined in the strata::keras_ps target): under a strategy whose
  // extended().should_use_with_coordinator() (ParameterServerStrategy) the
  // steps are scheduled through its coordinator on the workers
  // (steps_per_epoch required); under any other strategy it trains on the
  // function's dataset for InputContext().
  History fit(const DatasetCreator& creator, const FitOptions& options = {});
  // The loss and metric results (Keras's evaluate(return_dict=True)).
  Logs evaluate(const data::Dataset& dataset, const EvaluateOptions& options = {});
  Logs evaluate(const Tensor& x, const Tensor& y, const EvaluateOptions& options = {});
  // The model outputs for every batch, concatenated along the batch axis.
  // Dataset elements are {x} or {x, y, ...} (only x is used).
  Tensor predict(const data::Dataset& dataset, const PredictOptions& options = {});
  Tensor predict(const Tensor& x, const PredictOptions& options = {});

  // One optimisation step on data = {x, y[, sample_weight]}: forward under a
  // GradientTape, compute_loss, gradients, optimizer->apply_gradients, metric
  // updates; returns get_metrics_result(). Override to customise (Keras).
  virtual Logs train_step(const data::Element& data);
  virtual Logs test_step(const data::Element& data);
  virtual Tensor predict_step(const data::Element& data);
  // The total loss (scaled for distribution, see above); updates the loss tracker.
  virtual Tensor compute_loss(const Tensor& x, const Tensor& y, const Tensor& y_pred,
                              const Tensor& sample_weight);
  // Updates the compiled metrics; returns get_metrics_result().
  virtual Logs compute_metrics(const Tensor& x, const Tensor& y, const Tensor& y_pred,
                               const Tensor& sample_weight);

  // The loss tracker then the compiled metrics (Keras's model.metrics).
  std::vector<metrics::MetricPtr> metrics() const;
  std::vector<std::string> metrics_names() const;
  void reset_metrics();
  Logs get_metrics_result() const;

  const optimizers::OptimizerPtr& optimizer() const noexcept { return optimizer_; }
  distribute::Strategy& distribute_strategy() const noexcept { return *strategy_; }
  int64_t steps_per_execution() const noexcept { return steps_per_execution_; }
  uint64_t seed() const noexcept { return seed_; }

  // Prints the Keras summary table (summary.h) to `out`.
  void summary(std::ostream& out) const;
  void summary() const;

  // Weights IO (format: docs/formats/weights.md; weights_io.h).
  void save_weights(const std::string& path) const;
  void load_weights(const std::string& path);
  // keras Model.save: the architecture (get_config), the compile state
  // (get_compile_config), the weights and the optimizer's variables in one
  // file, written atomically; keras::models::load_model rebuilds the model
  // from it (saving/saving_api.h; format: docs/formats/saved_model.md).
  void save(const std::string& path) const;

  // Keras's model.stop_training: callbacks set it to end fit after this epoch.
  bool stop_training = false;
  // The History of the last fit.
  const History& history() const noexcept { return history_; }

  // How many of a data element's leading components are model inputs (a
  // functional model with several inputs takes {x1, ..., xn, y[, w]}).
  virtual int num_model_inputs() const { return 1; }

  // BackupAndRestore: called from on_train_begin, makes fit continue at `epoch`
  // or, with `step` > 0, at batch `step` of that epoch. The epoch's first `step`
  // batches are drawn from its data and dropped untrained, so the run continues
  // with the batch an uninterrupted run would train next (TF restarts the
  // epoch's data instead, its iterator not being checkpointed; the step counts
  // agree). When no batch is left there (with steps_per_epoch: step >=
  // steps_per_epoch), fit goes on with the next epoch, as TF's
  // maybe_load_initial_counters_from_ckpt.
  void resume_at_epoch(int epoch, int64_t step = 0);

  // The name build_registered_model built this model under ("" otherwise).
  const std::string& registered_builder() const noexcept { return registered_builder_; }

 private:
  friend struct internal::PsTraining;
  friend std::shared_ptr<Model> build_registered_model(const std::string& name);
  History fit_on_coordinator(const DatasetCreator& creator, const FitOptions& options);
  // What every fit starts with: the callback list (History last), on_train_begin
  // called, and where to start (BackupAndRestore may ask, in on_train_begin, to
  // continue after its backup).
  struct TrainingStart {
    callbacks::CallbackList callbacks;
    std::shared_ptr<callbacks::HistoryCallback> history;
    int initial_epoch;
    int64_t initial_step;
  };
  TrainingStart begin_training(const FitOptions& options, int verbose,
                               std::optional<int64_t> steps);
  void check_compiled(const char* who) const;
  // compute_loss with the distribution divisor given: the replicas in sync,
  // or the micro-batches of a deterministic step.
  Tensor compute_loss_scaled(const Tensor& x, const Tensor& y, const Tensor& y_pred,
                             const Tensor& sample_weight, int divisor);
  // train_step under CommunicationOptions.deterministic_reduction (model.cc).
  Logs deterministic_train_step(const data::Element& data, const distribute::ReplicaContext& rc,
                                int micro_batches);
  distribute::Strategy* distributed_strategy_or_null() const;
  void prepare_distributed_step(const data::Element& first_batch, bool training);
  Logs merge_replica_logs(const distribute::PerReplica<Logs>& per_replica);
  // One step, on this thread or through strategy.run.
  Logs run_train_step(const internal::StepInput& in);
  Logs run_test_step(const internal::StepInput& in);
  Tensor run_predict_step(const internal::StepInput& in);
  History fit_impl(const std::function<data::Dataset(int epoch)>& epoch_dataset,
                   const FitOptions& options, const ValidationData& validation,
                   const std::function<data::Dataset()>& validation_dataset,
                   std::optional<int64_t> steps_hint);
  Logs evaluate_impl(const data::Dataset& dataset, std::optional<int64_t> steps,
                     callbacks::CallbackList& cbs);

  distribute::Strategy* strategy_;
  bool compiled_ = false;
  optimizers::OptimizerPtr optimizer_;
  LossSpec loss_;
  // compile's arguments as given, for get_compile_config.
  std::vector<MetricSpec> metric_specs_;
  std::vector<MetricSpec> weighted_metric_specs_;
  std::vector<double> loss_weights_;
  std::optional<bool> run_eagerly_;
  std::optional<bool> jit_compile_;
  double loss_weight_ = 1.0;
  int64_t steps_per_execution_ = 1;
  uint64_t seed_ = 0;
  std::shared_ptr<metrics::MeanMetric> loss_tracker_;
  std::unique_ptr<internal::CompiledMetrics> compiled_metrics_;
  // Calls fn on each of metrics() without building the list (model.cc).
  template <typename Fn>
  void for_each_metric(Fn&& fn) const;
  History history_;
  std::optional<int> resume_epoch_;
  int64_t resume_step_ = 0;
  std::string registered_builder_;
};

using ModelPtr = std::shared_ptr<Model>;

}  // namespace strata::keras
