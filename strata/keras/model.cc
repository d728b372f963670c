#include "strata/keras/model.h"

#include <cstdio>
#include <iostream>
#include <utility>

#include <nlohmann/json.hpp>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/denormal.h"
#include "strata/base/errors.h"
#include "strata/base/logging.h"
#include "strata/base/str_cat.h"
#include "strata/base/zip.h"
#include "strata/distribute/reduce_op.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/callbacks/history.h"
#include "strata/keras/callbacks/progbar_logger.h"
#include "strata/keras/internal/compile_utils.h"
#include "strata/keras/optimizers/optimizers.h"
#include "strata/keras/saving/saving_api.h"
#include "strata/keras/summary.h"
#include "strata/keras/weights_io.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"

namespace strata::keras {

// --- LossSpec -------------------------------------------------------------------

LossSpec::LossSpec(const std::string& name) : LossSpec(losses::get(name)) { identifier_ = name; }

LossSpec::LossSpec(LossFunction fn) : name_("loss"), per_example_(std::move(fn)) {
  STRATA_CHECK_ARG(per_example_ != nullptr, "compile: the loss function is empty");
}

Tensor LossSpec::operator()(const Tensor& y_true, const Tensor& y_pred,
                            const Tensor& sample_weight) const {
  if (weighted_) return weighted_(y_true, y_pred, sample_weight);
  STRATA_CHECK(FAILED_PRECONDITION, per_example_ != nullptr,
               "loss: no loss was given to compile()");
  // Keras's LossFunctionWrapper with reduction AUTO: ranks aligned, then sum /
  // number of elements.
  auto [p, t] = losses::squeeze_or_expand_dimensions(y_pred, y_true);
  return losses::compute_weighted_loss(per_example_(t, p), sample_weight,
                                       losses::Reduction::SUM_OVER_BATCH_SIZE);
}

Verbosity::Verbosity(const char* level) : level_(kAuto) {
  STRATA_CHECK_ARG(std::string(level) == "auto", "verbose: expected 0, 1, 2 or \"auto\", got \"",
                   level, "\"");
}

// --- the per-step input: one batch, or one per replica ----------------------------

namespace internal {

struct StepInput {
  std::optional<data::Element> local;
  std::optional<distribute::PerReplica<data::Element>> per_replica;
};

// Iterates a dataset as steps: local batches, or distributed ones under a strategy.
class StepStream {
 public:
  StepStream(distribute::Strategy* strategy, const data::Dataset& dataset) {
    if (strategy != nullptr) {
      dist_.emplace(strategy->experimental_distribute_dataset(dataset).iter());
    } else {
      local_.emplace(dataset.iter());
    }
  }
  std::optional<StepInput> next() {
    StepInput in;
    if (local_) {
      in.local = local_->next();
      if (!in.local) return std::nullopt;
    } else {
      in.per_replica = dist_->get_next_as_optional();
      if (!in.per_replica) return std::nullopt;
    }
    return in;
  }

 private:
  std::optional<data::Iterator> local_;
  std::optional<distribute::DistributedIterator> dist_;
};

}  // namespace internal

namespace {

struct Unpacked {
  size_t num_inputs = 0;
  std::vector<Tensor> xs;      // the model inputs, unless there is one (x)
  Tensor x, y, sample_weight;  // x: the first input
  // Runs the model on the inputs.
  Tensor predict_with(Model& model, bool training) const {
    return num_inputs == 1 ? model(x, training) : model(xs, training);
  }
};

// Keras's data_adapter.unpack_x_y_sample_weight, where the first `inputs`
// components are the model's inputs (Keras's nested x).
Unpacked unpack(const data::Element& data, int inputs, const char* who) {
  const size_t n = size_t(inputs);
  STRATA_CHECK_ARG(data.size() >= n && data.size() <= n + 2, who, ": expected data = {x}, {x, y} ",
                   "or {x, y, sample_weight} where x is the model's ", n, " input(s), got ",
                   data.size(), " components");
  Unpacked u;
  u.num_inputs = n;
  if (n != 1) u.xs.assign(data.begin(), data.begin() + std::ptrdiff_t(n));
  u.x = data[0];
  if (data.size() > n) u.y = data[n];
  if (data.size() > n + 1) u.sample_weight = data[n + 1];
  return u;
}

// splitmix64: a well-mixed 64-bit function of the seed and the epoch.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The example order of one epoch: a Fisher-Yates permutation drawn from
// splitmix64(seed, epoch) (its own generator, so the order does not depend on
// the standard library), or the identity without shuffling.
Tensor epoch_permutation(int64_t n, bool shuffle, uint64_t seed, int epoch) {
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = i;
  if (shuffle) {
    uint64_t state = mix(seed ^ mix(uint64_t(epoch) + 1));
    for (int64_t i = n - 1; i > 0; --i) {
      state = mix(state);
      const int64_t j = int64_t(state % uint64_t(i + 1));
      std::swap(idx[i], idx[j]);
    }
  }
  return strata::constant(idx, TensorShape{n});
}

// Batches of (x[, y]) in the order `perm`, gathered per batch.
data::Dataset batches_in_order(const Tensor& perm, const std::vector<Tensor>& components,
                               int64_t batch_size) {
  return data::Dataset::from_tensor_slices({perm})
      .batch(batch_size)
      .map([components](const data::Element& e) {
        data::Element out;
        for (const Tensor& c : components) out.push_back(strata::gather(c, e[0]));
        return out;
      });
}

void check_same_length(const Tensor& x, const Tensor& y, const char* who) {
  STRATA_CHECK_ARG(x.defined() && x.rank() >= 1, who, ": expected x with a batch dimension, got ",
                   x.defined() ? x.shape().to_string() : std::string("an undefined tensor"));
  if (y.defined()) {
    STRATA_CHECK_ARG(y.rank() >= 1 && y.shape()[0] == x.shape()[0], who,
                     ": x and y must have the same number of examples, got x ",
                     x.shape().to_string(), " and y ", y.shape().to_string());
  }
}

int64_t resolve_batch_size(std::optional<int64_t> batch_size, const char* who) {
  const int64_t b = batch_size.value_or(32);  // Keras's default
  STRATA_CHECK_ARG(b > 0, who, ": batch_size must be positive, got ", b);
  return b;
}

}  // namespace

// --- Model ------------------------------------------------------------------------

Model::Model(std::string class_name, const std::string& default_name, const LayerArgs& args)
    : Layer(std::move(class_name), default_name, args), strategy_(&distribute::get_strategy()) {}

Model::~Model() = default;

TensorShape Model::compute_output_shape(const TensorShape& input_shape) const {
  STRATA_CHECK(
      UNIMPLEMENTED, false, "Model '", name(), "' (", class_name(),
      "): compute_output_shape is not known for a subclassed model; override it (input shape ",
      input_shape.to_string(), ")");
  return input_shape;
}

void Model::compile(const CompileOptions& options) {
  STRATA_CHECK_ARG(options.steps_per_execution >= 1,
                   "compile: steps_per_execution must be >= 1, got ", options.steps_per_execution);
  STRATA_CHECK_ARG(options.loss_weights.size() <= 1,
                   "compile: the model has one output, so loss_weights takes "
                   "at most one value, got ",
                   options.loss_weights.size());
  // Metrics are created under the model's strategy (Keras compiles in its scope).
  std::optional<distribute::StrategyScope> scope;
  if (!strategy_->is_default()) scope.emplace(*strategy_);
  optimizer_ = options.optimizer.name().empty() ? options.optimizer.optimizer()
                                                : optimizers::get(options.optimizer.name());
  loss_ = options.loss;
  metric_specs_ = options.metrics;
  weighted_metric_specs_ = options.weighted_metrics;
  loss_weights_ = options.loss_weights;
  run_eagerly_ = options.run_eagerly;
  jit_compile_ = options.jit_compile;
  loss_weight_ = options.loss_weights.empty() ? 1.0 : options.loss_weights[0];
  steps_per_execution_ = options.steps_per_execution;
  seed_ = options.seed;
  loss_tracker_ = metrics::Mean({.name = "loss"});
  compiled_metrics_ =
      std::make_unique<internal::CompiledMetrics>(options.metrics, options.weighted_metrics);
  compiled_ = true;
}

namespace {

nlohmann::json metric_names(const std::vector<MetricSpec>& specs) {
  if (specs.empty()) return nullptr;
  nlohmann::json out = nlohmann::json::array();
  for (const MetricSpec& m : specs) out.push_back(m.metric() ? m.metric()->name() : m.name());
  return out;
}

std::vector<MetricSpec> metric_specs_of(const nlohmann::json& config, const char* key) {
  std::vector<MetricSpec> out;
  if (!config.contains(key) || config[key].is_null()) return out;
  STRATA_CHECK_ARG(config[key].is_array(), "compile_from_config: \"", key,
                   "\" must be a list of metric names, got ", config[key].dump());
  for (const nlohmann::json& m : config[key]) {
    STRATA_CHECK_ARG(m.is_string(), "compile_from_config: \"", key,
                     "\" must be a list of metric names, got the entry ", m.dump());
    out.emplace_back(m.get<std::string>());
  }
  return out;
}

nlohmann::json optional_bool(const std::optional<bool>& b) {
  return b ? nlohmann::json(*b) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json Model::get_compile_config() const {
  check_compiled("get_compile_config");
  nlohmann::json loss = nullptr;
  if (!loss_.identifier().empty()) {
    loss = loss_.identifier();
  } else if (loss_.loss_object()) {
    loss = losses::serialize(*loss_.loss_object());
  }
  nlohmann::json loss_weights = nullptr;
  if (!loss_weights_.empty()) loss_weights = loss_weights_;
  return {{"optimizer", optimizer_ ? optimizers::serialize(*optimizer_) : nlohmann::json(nullptr)},
          {"loss", loss},
          {"loss_weights", loss_weights},
          {"metrics", metric_names(metric_specs_)},
          {"weighted_metrics", metric_names(weighted_metric_specs_)},
          {"run_eagerly", optional_bool(run_eagerly_)},
          {"steps_per_execution", steps_per_execution_},
          {"jit_compile", optional_bool(jit_compile_)}};
}

void Model::compile_from_config(const nlohmann::json& config) {
  STRATA_CHECK_ARG(config.is_object(), "compile_from_config: expected an object, got ",
                   config.dump());
  CompileOptions o;
  {
    // The optimizer's `iterations` variable is made under the model's strategy.
    std::optional<distribute::StrategyScope> scope;
    if (!strategy_->is_default()) scope.emplace(*strategy_);
    if (config.contains("optimizer") && !config["optimizer"].is_null())
      o.optimizer = optimizers::deserialize(config["optimizer"]);
  }
  if (config.contains("loss") && !config["loss"].is_null()) {
    if (config["loss"].is_string()) {
      o.loss = config["loss"].get<std::string>();
    } else {
      o.loss = losses::deserialize(config["loss"]);
    }
  }
  if (config.contains("loss_weights") && !config["loss_weights"].is_null()) {
    STRATA_CHECK_ARG(config["loss_weights"].is_array(),
                     "compile_from_config: \"loss_weights\" must be a list, got ",
                     config["loss_weights"].dump());
    for (const nlohmann::json& w : config["loss_weights"]) {
      STRATA_CHECK_ARG(w.is_number(),
                       "compile_from_config: \"loss_weights\" must hold numbers, got ", w.dump());
      o.loss_weights.push_back(w.get<double>());
    }
  }
  o.metrics = metric_specs_of(config, "metrics");
  o.weighted_metrics = metric_specs_of(config, "weighted_metrics");
  if (config.contains("run_eagerly") && config["run_eagerly"].is_boolean())
    o.run_eagerly = config["run_eagerly"].get<bool>();
  if (config.contains("steps_per_execution") && !config["steps_per_execution"].is_null()) {
    STRATA_CHECK_ARG(config["steps_per_execution"].is_number_integer(),
                     "compile_from_config: \"steps_per_execution\" must be an integer, got ",
                     config["steps_per_execution"].dump());
    o.steps_per_execution = config["steps_per_execution"].get<int64_t>();
  }
  if (config.contains("jit_compile") && config["jit_compile"].is_boolean())
    o.jit_compile = config["jit_compile"].get<bool>();
  compile(o);
}

void Model::check_compiled(const char* who) const {
  STRATA_CHECK(FAILED_PRECONDITION, compiled_, "Model '", name(),
               "': you must compile your model before ", who, " (call model->compile(...))");
}

std::vector<metrics::MetricPtr> Model::metrics() const {
  std::vector<metrics::MetricPtr> out;
  if (!compiled_) return out;
  out.push_back(loss_tracker_);
  for (metrics::MetricPtr& m : compiled_metrics_->metrics()) out.push_back(std::move(m));
  return out;
}

std::vector<std::string> Model::metrics_names() const {
  std::vector<std::string> names;
  for (const metrics::MetricPtr& m : metrics()) names.push_back(m->name());
  return names;
}

template <typename Fn>
void Model::for_each_metric(Fn&& fn) const {
  if (!compiled_) return;
  fn(loss_tracker_);
  compiled_metrics_->for_each_metric(fn);
}

void Model::reset_metrics() {
  for_each_metric([](const metrics::MetricPtr& m) { m->reset_state(); });
}

Logs Model::get_metrics_result() const {
  Logs logs;
  for_each_metric([&logs](const metrics::MetricPtr& m) {
    logs.set(m->name(), m->result().scalar_as_double());
  });
  return logs;
}

Tensor Model::compute_loss(const Tensor& x, const Tensor& y, const Tensor& y_pred,
                           const Tensor& sample_weight) {
  int n = 1;
  if (const distribute::ReplicaContext* rc = distribute::get_replica_context())
    n = rc->num_replicas_in_sync();
  return compute_loss_scaled(x, y, y_pred, sample_weight, n);
}

Tensor Model::compute_loss_scaled(const Tensor&, const Tensor& y, const Tensor& y_pred,
                                  const Tensor& sample_weight, int n) {
  STRATA_CHECK(FAILED_PRECONDITION, loss_.defined(), "Model '", name(),
               "': no loss to optimize; compile with a loss (compile({.loss = ...}))");
  // Keras's LossesContainer matches the labels to the predictions first
  // (match_dtype_and_rank): rank-1 labels against rank-2 predictions gain a
  // trailing axis, so the guides' "mse" between (batch,) targets and (batch, k)
  // outputs broadcasts per example; float labels take the predictions' dtype.
  Tensor labels = y;
  if (labels.defined() && y_pred.defined()) {
    if (labels.rank() == 1 && y_pred.rank() == 2) labels = strata::expand_dims(labels, -1);
    if (is_floating(labels.dtype()) && is_floating(y_pred.dtype()) &&
        labels.dtype() != y_pred.dtype())
      labels = strata::cast(labels, y_pred.dtype());
  }
  Tensor value = loss_(labels, y_pred, sample_weight);
  STRATA_CHECK_ARG(value.defined() && value.num_elements() == 1, "Model '", name(),
                   "': the loss must be a scalar, got shape ", value.shape().to_string());
  if (value.rank() != 0) value = strata::reshape(value, {});
  if (loss_weight_ != 1.0)
    value = strata::multiply(value, strata::cast(strata::constant(loss_weight_), value.dtype()));
  // Keras's LossesContainer: the model's regularization losses (model.losses)
  // are summed and added to the compiled loss, in the tracked loss too.
  Tensor reg;
  for (const Tensor& l : losses()) {
    Tensor t = strata::cast(strata::reshape(l, {}), value.dtype());
    reg = reg.defined() ? strata::add(reg, t) : t;
  }
  // Keras's loss tracker: the unscaled loss weighted by the batch size.
  const double batch = y_pred.rank() > 0 ? double(y_pred.shape()[0]) : 1.0;
  const double tracked = value.scalar_as_double() + (reg.defined() ? reg.scalar_as_double() : 0.0);
  loss_tracker_->update_state(strata::constant(float(tracked)), strata::constant(float(batch)));
  // Keras's scale_loss_for_distribution: with N replicas in sync (or N
  // deterministic micro-batches), a mean loss and the regularization loss are
  // divided by N so that summing the N gradients gives the mean's (and the
  // penalty's once).
  const Tensor replicas = strata::cast(strata::constant(double(n)), value.dtype());
  if (n > 1 && loss_.scaled_for_distribution()) value = strata::divide(value, replicas);
  if (reg.defined()) value = strata::add(value, n > 1 ? strata::divide(reg, replicas) : reg);
  return value;
}

Logs Model::compute_metrics(const Tensor&, const Tensor& y, const Tensor& y_pred,
                            const Tensor& sample_weight) {
  if (y.defined()) compiled_metrics_->update_state(y, y_pred, sample_weight);
  return get_metrics_result();
}

Logs Model::train_step(const data::Element& data) {
  const Unpacked d = unpack(data, num_model_inputs(), "train_step");
  STRATA_CHECK(FAILED_PRECONDITION, optimizer_ != nullptr, "Model '", name(),
               "': compile with an optimizer before fit (compile({.optimizer = ...}))");
  if (const distribute::ReplicaContext* rc = distribute::get_replica_context()) {
    const int micro_batches = rc->strategy().deterministic_micro_batches();
    if (micro_batches > 0) return deterministic_train_step(data, *rc, micro_batches);
  }
  std::vector<Tensor> grads;
  std::vector<Variable> vars;
  Tensor y_pred;
  {
    GradientTape tape;
    Tensor loss;
    {
      distribute::ScopedStepPhase forward(distribute::StepPhase::kForward);
      y_pred = d.predict_with(*this, /*training=*/true);
      loss = compute_loss(d.x, d.y, y_pred, d.sample_weight);
    }
    distribute::ScopedStepPhase gradient(distribute::StepPhase::kGradient);
    vars = trainable_variables();
    grads = tape.gradient(loss, vars);
  }
  {
    distribute::ScopedStepPhase apply(distribute::StepPhase::kApply);
    optimizer_->apply(std::move(grads), std::move(vars));
  }
  return compute_metrics(d.x, d.y, y_pred, d.sample_weight);
}

// CommunicationOptions.deterministic_reduction: the global batch is M equal
// micro-batches, this replica's M / R of them consecutive rows of its batch
// (the rebatch rule gives replica r rows [r B / R, (r + 1) B / R)). Each
// micro-batch's gradients come from their own forward and backward pass with
// the loss divided by M (the per-example losses scaled by the global batch);
// the replica sums its micro-batches with pairwise_sum, and the optimizer's
// all-reduce sums the replicas with the same tree (the strategy all-gathers
// and sums in replica order). With M and R powers of two, that is one
// pairwise tree over the M micro-batches whatever R is, and each leaf is
// computed the same way on any replica (the strategy turned on
// op determinism), so the update has the same bits for any R.
Logs Model::deterministic_train_step(const data::Element& data,
                                     const distribute::ReplicaContext& rc, int micro_batches) {
  const int replicas = rc.num_replicas_in_sync();
  STRATA_INTERNAL_CHECK(micro_batches % replicas == 0, micro_batches, " micro-batches for ",
                        replicas, " replicas");
  const int64_t k = micro_batches / replicas;
  const int64_t rows = data.front().rank() > 0 ? data.front().shape()[0] : 0;
  STRATA_CHECK_ARG(rows > 0 && rows % k == 0, "Model '", name(),
                   "': deterministic_reduction splits every global batch into ", micro_batches,
                   " equal micro-batches (", k, " per replica), but replica ",
                   rc.replica_id_in_sync_group(), " got a batch of ", rows,
                   " rows; use a global batch size divisible by ", micro_batches,
                   " and drop or pad the last partial batch");
  // Each component cut into k equal row blocks.
  std::vector<std::vector<Tensor>> parts(data.size());
  for (size_t c = 0; c < data.size(); ++c) {
    STRATA_CHECK_ARG(data[c].rank() > 0 && data[c].shape()[0] == rows, "Model '", name(),
                     "': deterministic_reduction: component ", c, " of the batch has shape ",
                     data[c].shape(), ", expected ", rows, " rows as component 0");
    parts[c] = k == 1 ? std::vector<Tensor>{data[c]} : strata::split(data[c], k, 0);
  }
  const std::vector<Variable> vars = trainable_variables();
  std::vector<std::vector<Tensor>> leaves(vars.size());
  std::vector<Tensor> predictions;
  for (int64_t j = 0; j < k; ++j) {
    data::Element micro;
    for (const std::vector<Tensor>& p : parts) micro.push_back(p[size_t(j)]);
    const Unpacked d = unpack(micro, num_model_inputs(), "train_step");
    GradientTape tape;
    Tensor y_pred, loss;
    {
      distribute::ScopedStepPhase forward(distribute::StepPhase::kForward);
      y_pred = d.predict_with(*this, /*training=*/true);
      loss = compute_loss_scaled(d.x, d.y, y_pred, d.sample_weight, micro_batches);
    }
    distribute::ScopedStepPhase gradient(distribute::StepPhase::kGradient);
    const std::vector<Tensor> grads = tape.gradient(loss, vars);
    for (size_t i = 0; i < vars.size(); ++i) leaves[i].push_back(grads[i]);
    predictions.push_back(std::move(y_pred));
  }
  {
    distribute::ScopedStepPhase apply(distribute::StepPhase::kApply);
    std::vector<Tensor> grads;
    grads.reserve(vars.size());
    for (const std::vector<Tensor>& l : leaves) grads.push_back(distribute::pairwise_sum(l));
    optimizer_->apply_gradients(strata::zip(grads, vars));
  }
  const Unpacked d = unpack(data, num_model_inputs(), "train_step");
  const Tensor y_pred =
      predictions.size() == 1 ? predictions.front() : strata::concat(predictions, 0);
  return compute_metrics(d.x, d.y, y_pred, d.sample_weight);
}

Logs Model::test_step(const data::Element& data) {
  const Unpacked d = unpack(data, num_model_inputs(), "test_step");
  Tensor y_pred = d.predict_with(*this, /*training=*/false);
  compute_loss(d.x, d.y, y_pred, d.sample_weight);
  return compute_metrics(d.x, d.y, y_pred, d.sample_weight);
}

Tensor Model::predict_step(const data::Element& data) {
  const Unpacked d = unpack(data, num_model_inputs(), "predict_step");
  return d.predict_with(*this, /*training=*/false);
}

// Before the first distributed step, in cross-replica context: builds the
// model (a forward pass on replica 0's batch when it has no static shape),
// the optimizer's slots and the compiled metrics, so that replica threads
// never create variables (TF forbids creating them in a replica context).
void Model::prepare_distributed_step(const data::Element& first_batch, bool training) {
  const size_t n = size_t(num_model_inputs());
  STRATA_CHECK_ARG(first_batch.size() >= n, "Model '", name(), "': expected batches of ", n,
                   " input(s) and targets, got ", first_batch.size(), " components");
  const data::Element x(first_batch.begin(), first_batch.begin() + std::ptrdiff_t(n));
  std::optional<TensorShape> out_shape;
  if (!built()) out_shape = predict_step(x).shape();
  if (training && optimizer_ != nullptr && !optimizer_->built())
    optimizer_->build(trainable_variables());
  if (compiled_metrics_->built() || first_batch.size() < n + 1) return;
  if (!out_shape) {
    try {
      std::vector<TensorShape> shapes;
      for (const Tensor& t : x) shapes.push_back(t.shape());
      out_shape = compute_output_shape_list(shapes);
    } catch (const UnimplementedError&) {
      out_shape = predict_step(x).shape();
    }
  }
  compiled_metrics_->build(first_batch[n].shape(), *out_shape);
}

Logs Model::merge_replica_logs(const distribute::PerReplica<Logs>& per_replica) {
  const std::vector<std::string> names = metrics_names();
  const Logs cross_replica = get_metrics_result();
  Logs out;
  for (const auto& [key, value] : per_replica.component(0)) {
    (void)value;
    if (cross_replica.contains(key)) {
      out.set(key, cross_replica.at(key));
      continue;
    }
    // A value the step computed itself (not a model metric): the replicas' mean.
    std::vector<Tensor> parts;
    for (const Logs& l : per_replica.values())
      parts.push_back(strata::constant(l.get(key).value_or(0.0)));
    out.set(key, strategy_
                     ->reduce(distribute::ReduceOp::MEAN, distribute::PerReplica<Tensor>(parts),
                              std::nullopt)
                     .scalar_as_double());
  }
  return out;
}

Logs Model::run_train_step(const internal::StepInput& in) {
  if (distribute::StepProfiler* profiler = strategy_->step_profiler()) profiler->count_step();
  if (in.local) return train_step(*in.local);
  prepare_distributed_step(in.per_replica->component(0), /*training=*/true);
  auto logs =
      strategy_->run([this](const data::Element& e) { return train_step(e); }, *in.per_replica);
  return merge_replica_logs(logs);
}

Logs Model::run_test_step(const internal::StepInput& in) {
  if (in.local) return test_step(*in.local);
  prepare_distributed_step(in.per_replica->component(0), /*training=*/false);
  auto logs =
      strategy_->run([this](const data::Element& e) { return test_step(e); }, *in.per_replica);
  return merge_replica_logs(logs);
}

Tensor Model::run_predict_step(const internal::StepInput& in) {
  if (in.local) return predict_step(*in.local);
  auto outs =
      strategy_->run([this](const data::Element& e) { return predict_step(e); }, *in.per_replica);
  // Keras's "concat" reduction: replica i holds the i-th slice of the global batch.
  std::vector<Tensor> parts = strategy_->experimental_local_results(outs);
  return parts.size() == 1 ? parts[0] : strata::concat(parts, 0);
}

distribute::Strategy* Model::distributed_strategy_or_null() const {
  return strategy_->is_default() ? nullptr : strategy_;
}

void Model::resume_at_epoch(int epoch, int64_t step) {
  STRATA_CHECK_ARG(epoch >= 0, "resume_at_epoch: expected a non-negative epoch, got ", epoch);
  STRATA_CHECK_ARG(step >= 0, "resume_at_epoch: expected a non-negative step, got ", step);
  resume_epoch_ = epoch;
  resume_step_ = step;
}

namespace {

callbacks::CallbackList make_callbacks(Model* model,
                                       const std::vector<callbacks::CallbackPtr>& user, int verbose,
                                       int epochs, std::optional<int64_t> steps) {
  callbacks::CallbackParams params{.verbose = verbose, .epochs = epochs, .steps = steps};
  callbacks::CallbackList list({}, model, params);
  bool has_progbar = false;
  for (const callbacks::CallbackPtr& cb : user) {
    if (dynamic_cast<callbacks::ProgbarLoggerCallback*>(cb.get()) != nullptr) has_progbar = true;
  }
  // Keras puts its ProgbarLogger first.
  if (verbose != 0 && !has_progbar) list.append(callbacks::ProgbarLogger());
  for (const callbacks::CallbackPtr& cb : user) list.append(cb);
  return list;
}

}  // namespace

Model::TrainingStart Model::begin_training(const FitOptions& options, int verbose,
                                           std::optional<int64_t> steps) {
  callbacks::CallbackList cbs =
      make_callbacks(this, options.callbacks, verbose, options.epochs, steps);
  auto history = std::make_shared<callbacks::HistoryCallback>();
  cbs.append(history);
  stop_training = false;
  resume_epoch_.reset();
  resume_step_ = 0;
  Logs logs;
  cbs.on_train_begin(logs);
  const int initial_epoch = resume_epoch_.value_or(options.initial_epoch);
  resume_epoch_.reset();
  return {std::move(cbs), std::move(history), initial_epoch, std::exchange(resume_step_, 0)};
}

History Model::fit_impl(const std::function<data::Dataset(int epoch)>& epoch_dataset,
                        const FitOptions& options, const ValidationData& validation,
                        const std::function<data::Dataset()>& validation_dataset,
                        std::optional<int64_t> steps_hint) {
  // Keras's loops run their ops with denormals flushed to zero on this thread too
  // (strata/base/denormal.h); the caller's mode is back when fit returns.
  const ScopedFlushDenormal flush;
  STRATA_CHECK_ARG(!strategy_->extended().should_use_with_coordinator(), "Model '", name(),
                   "': under ", strategy_->name(),
                   ", fit takes a keras::DatasetCreator (a registered dataset function) and "
                   "steps_per_epoch, not a dataset or tensors");
  check_compiled("training");
  STRATA_CHECK(FAILED_PRECONDITION, optimizer_ != nullptr, "Model '", name(),
               "': compile with an optimizer before fit (compile({.optimizer = ...}))");
  STRATA_CHECK_ARG(options.epochs >= 0, "fit: epochs must be >= 0, got ", options.epochs);
  STRATA_CHECK_ARG(options.initial_epoch >= 0, "fit: initial_epoch must be >= 0, got ",
                   options.initial_epoch);
  STRATA_CHECK_ARG(options.validation_freq >= 1, "fit: validation_freq must be >= 1, got ",
                   options.validation_freq);
  STRATA_CHECK_ARG(!options.steps_per_epoch || *options.steps_per_epoch > 0,
                   "fit: steps_per_epoch must be > 0, got ", options.steps_per_epoch.value_or(0));
  const int verbose = options.verbose.resolve();
  std::optional<distribute::StrategyScope> scope;
  if (!strategy_->is_default()) scope.emplace(*strategy_);

  auto [cbs, history, initial_epoch, initial_step] = begin_training(
      options, verbose, options.steps_per_epoch ? options.steps_per_epoch : steps_hint);

  std::optional<internal::StepStream> stream;  // kept across epochs with steps_per_epoch
  // With steps_per_epoch the data runs on across epochs, so an epoch's batches
  // depend on every epoch before it. A run resumed at a later epoch (resume_at_epoch)
  // first replays how the epochs before it drew from the data, without training,
  // so it continues at exactly the batch the interrupted run would have trained.
  // The next batch of `step` in `epoch`. With steps_per_epoch, a finite dataset
  // exactly consumed by the previous epoch starts again.
  auto draw = [&](int epoch, int64_t step) {
    std::optional<internal::StepInput> in = stream->next();
    if (!in && options.steps_per_epoch && step == 0) {
      stream.emplace(distributed_strategy_or_null(), epoch_dataset(epoch));
      in = stream->next();
    }
    return in;
  };
  if (options.steps_per_epoch) {
    for (int epoch = options.initial_epoch; epoch < initial_epoch; ++epoch) {
      if (!stream) stream.emplace(distributed_strategy_or_null(), epoch_dataset(epoch));
      for (int64_t step = 0; step < *options.steps_per_epoch; ++step) {
        if (!draw(epoch, step)) break;
      }
    }
  }
  Logs training_logs;
  for (int epoch = initial_epoch; epoch < options.epochs; ++epoch) {
    const int64_t first_step = std::exchange(initial_step, 0);
    // A run resumed mid-epoch (resume_at_epoch) drops the batches trained
    // before the backup; the first one it trains is held in `pending`.
    std::optional<internal::StepInput> pending;
    if (first_step > 0) {
      if (!options.steps_per_epoch || !stream)
        stream.emplace(distributed_strategy_or_null(), epoch_dataset(epoch));
      bool dry = false;
      for (int64_t i = 0; i < first_step && !dry; ++i) dry = !stream->next();
      if (options.steps_per_epoch && first_step >= *options.steps_per_epoch) continue;
      if (!dry) pending = stream->next();
      if (!pending) continue;  // the backup followed the epoch's last batch
    }
    reset_metrics();
    Logs epoch_logs;
    cbs.on_epoch_begin(epoch, epoch_logs);
    if (first_step == 0 && (!options.steps_per_epoch || !stream))
      stream.emplace(distributed_strategy_or_null(), epoch_dataset(epoch));
    int64_t step = first_step;
    Logs step_logs;
    bool ran_dry = false;
    while (!options.steps_per_epoch || step < *options.steps_per_epoch) {
      std::optional<internal::StepInput> in;
      {
        distribute::ScopedStepPhase input(distribute::StepPhase::kInput);
        in = pending ? std::exchange(pending, std::nullopt) : draw(epoch, step);
      }
      if (!in) {
        ran_dry = options.steps_per_epoch.has_value();
        break;
      }
      Logs begin_logs;
      cbs.on_train_batch_begin(step, begin_logs);
      step_logs = run_train_step(*in);
      int64_t end_step = step;
      // steps_per_execution: the batch hooks see groups of steps (Keras).
      for (int64_t k = 1; k < steps_per_execution_; ++k) {
        if (options.steps_per_epoch && end_step + 1 >= *options.steps_per_epoch) break;
        std::optional<internal::StepInput> more;
        {
          distribute::ScopedStepPhase input(distribute::StepPhase::kInput);
          more = stream->next();
        }
        if (!more) break;
        step_logs = run_train_step(*more);
        ++end_step;
      }
      cbs.on_train_batch_end(end_step, step_logs);
      step = end_step + 1;
      if (stop_training) break;
    }
    if (ran_dry) {
      STRATA_LOG(WARNING,
                 "Your input ran out of data; interrupting training. Make sure that your dataset "
                 "can generate at least `steps_per_epoch * epochs` batches (",
                 options.steps_per_epoch.value_or(0) * options.epochs, " batches).");
      stop_training = true;
    }
    STRATA_CHECK_ARG(step > 0, "fit: the training data yielded no batches in epoch ", epoch + 1,
                     " (Keras: Unexpected result of `train_function` (Empty logs))");
    epoch_logs = step_logs;
    if (validation.has_value() && (epoch + 1) % options.validation_freq == 0) {
      Logs val = evaluate_impl(validation_dataset(), options.validation_steps, cbs);
      for (const auto& [k, v] : val) epoch_logs.set("val_" + k, v);
    }
    cbs.on_epoch_end(epoch, epoch_logs);
    training_logs = epoch_logs;
    if (stop_training) break;
  }
  cbs.on_train_end(training_logs);
  history_ = history->history();
  return history_;
}

namespace {

// Keras's data adapter infers the steps of an epoch from a dataset's
// cardinality when it is known; an infinite or unknown one (or an empty one)
// leaves the count to be learned from the first epoch.
std::optional<int64_t> steps_from_cardinality(const data::Dataset& dataset) {
  const int64_t n = dataset.cardinality();
  if (n > 0) return n;
  return std::nullopt;
}

}  // namespace

History Model::fit(const data::Dataset& dataset, const FitOptions& options) {
  STRATA_CHECK_ARG(
      options.validation_split == 0.0,
      "fit: validation_split is only supported for in-memory tensors, not datasets (got ",
      options.validation_split, ")");
  const ValidationData& v = options.validation_data;
  const int64_t val_batch = resolve_batch_size(options.validation_batch_size, "fit");
  return fit_impl([&](int) { return dataset; }, options, v,
                  [&]() {
                    if (v.dataset()) return *v.dataset();
                    check_same_length(v.x(), v.y(), "fit(validation_data)");
                    return data::Dataset::from_tensor_slices({v.x(), v.y()}).batch(val_batch);
                  },
                  steps_from_cardinality(dataset));
}

History Model::fit(const Tensor& x, const Tensor& y, const FitOptions& options) {
  check_same_length(x, y, "fit");
  STRATA_CHECK_ARG(options.validation_split >= 0.0 && options.validation_split < 1.0,
                   "fit: validation_split must be in [0, 1), got ", options.validation_split);
  const int64_t batch_size = resolve_batch_size(options.batch_size, "fit");
  Tensor x_train = x, y_train = y;
  ValidationData validation = options.validation_data;
  if (options.validation_split > 0.0) {
    STRATA_CHECK_ARG(!validation.has_value(),
                     "fit: give validation_split or validation_data, not both");
    // Keras's train_validation_split: the last fraction, before any shuffling.
    const int64_t n = x.shape()[0];
    const int64_t split = int64_t(double(n) * (1.0 - options.validation_split));
    STRATA_CHECK_ARG(split > 0 && split < n, "fit: validation_split=", options.validation_split,
                     " of ", n, " examples leaves an empty training or validation set");
    x_train = x.slice_rows(0, split);
    y_train = y.slice_rows(0, split);
    validation =
        ValidationData(std::pair<Tensor, Tensor>{x.slice_rows(split, n), y.slice_rows(split, n)});
  }
  const int64_t n = x_train.shape()[0];
  const int64_t val_batch = options.validation_batch_size
                                ? resolve_batch_size(options.validation_batch_size, "fit")
                                : batch_size;
  return fit_impl(
      [&](int epoch) {
        return batches_in_order(epoch_permutation(n, options.shuffle, seed_, epoch),
                                {x_train, y_train}, batch_size);
      },
      options, validation,
      [&]() {
        if (validation.dataset()) return *validation.dataset();
        check_same_length(validation.x(), validation.y(), "fit(validation_data)");
        return data::Dataset::from_tensor_slices({validation.x(), validation.y()}).batch(val_batch);
      },
      (n + batch_size - 1) / batch_size);
}

Logs Model::evaluate_impl(const data::Dataset& dataset, std::optional<int64_t> steps,
                          callbacks::CallbackList& cbs) {
  check_compiled("evaluate");
  STRATA_CHECK_ARG(!steps || *steps > 0, "evaluate: steps must be > 0, got ", steps.value_or(0));
  reset_metrics();
  Logs logs;
  cbs.on_test_begin(logs);
  internal::StepStream stream(distributed_strategy_or_null(), dataset);
  int64_t step = 0;
  logs = get_metrics_result();
  while (!steps || step < *steps) {
    std::optional<internal::StepInput> in = stream.next();
    if (!in) break;
    Logs begin_logs;
    cbs.on_test_batch_begin(step, begin_logs);
    logs = run_test_step(*in);
    cbs.on_test_batch_end(step, logs);
    ++step;
  }
  cbs.on_test_end(logs);
  return logs;
}

Logs Model::evaluate(const data::Dataset& dataset, const EvaluateOptions& options) {
  const ScopedFlushDenormal flush;  // as fit
  std::optional<distribute::StrategyScope> scope;
  if (!strategy_->is_default()) scope.emplace(*strategy_);
  callbacks::CallbackList cbs =
      make_callbacks(this, options.callbacks, options.verbose.resolve(), 1, options.steps);
  return evaluate_impl(dataset, options.steps, cbs);
}

Logs Model::evaluate(const Tensor& x, const Tensor& y, const EvaluateOptions& options) {
  check_same_length(x, y, "evaluate");
  const int64_t b = resolve_batch_size(options.batch_size, "evaluate");
  EvaluateOptions o = options;
  if (!o.steps) o.steps = (x.shape()[0] + b - 1) / b;
  if (*o.steps == 0) o.steps.reset();
  return evaluate(data::Dataset::from_tensor_slices({x, y}).batch(b), o);
}

Tensor Model::predict(const data::Dataset& dataset, const PredictOptions& options) {
  const ScopedFlushDenormal flush;  // as fit
  STRATA_CHECK_ARG(!options.steps || *options.steps > 0, "predict: steps must be > 0, got ",
                   options.steps.value_or(0));
  std::optional<distribute::StrategyScope> scope;
  if (!strategy_->is_default()) scope.emplace(*strategy_);
  callbacks::CallbackList cbs =
      make_callbacks(this, options.callbacks, options.verbose.resolve(), 1, options.steps);
  Logs logs;
  cbs.on_predict_begin(logs);
  internal::StepStream stream(distributed_strategy_or_null(), dataset);
  std::vector<Tensor> outputs;
  int64_t step = 0;
  while (!options.steps || step < *options.steps) {
    std::optional<internal::StepInput> in = stream.next();
    if (!in) break;
    Logs batch_logs;
    cbs.on_predict_batch_begin(step, batch_logs);
    outputs.push_back(run_predict_step(*in));
    cbs.on_predict_batch_end(step, batch_logs);
    ++step;
  }
  cbs.on_predict_end(logs);
  STRATA_CHECK_ARG(!outputs.empty(),
                   "predict: the dataset yielded no batches (Keras: Unexpected result of "
                   "`predict_function` (Empty batch_outputs))");
  return outputs.size() == 1 ? outputs[0] : strata::concat(outputs, 0);
}

Tensor Model::predict(const Tensor& x, const PredictOptions& options) {
  check_same_length(x, Tensor(), "predict");
  const int64_t b = resolve_batch_size(options.batch_size, "predict");
  PredictOptions o = options;
  if (!o.steps) o.steps = (x.shape()[0] + b - 1) / b;
  return predict(data::Dataset::from_tensor_slices({x}).batch(b), o);
}

void Model::summary(std::ostream& out) const { print_summary(*this, out); }
void Model::summary() const { print_summary(*this, std::cout); }

void Model::save_weights(const std::string& path) const { keras::save_weights(*this, path); }
void Model::load_weights(const std::string& path) { keras::load_weights(*this, path); }
void Model::save(const std::string& path) const { saving::save_model(*this, path); }

}  // namespace strata::keras
