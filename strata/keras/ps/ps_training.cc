#include "strata/keras/ps/ps_training.h"

#include <map>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/distribute/coordinator.h"
#include "strata/distribute/ps/function_registry.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/callbacks/history.h"

namespace strata::keras {

namespace sps = distribute::ps;

namespace {

struct ModelRegistry {
  Mutex mu;
  std::map<std::string, ModelBuilder> builders STRATA_GUARDED_BY(mu);
  static ModelRegistry& get() {
    static ModelRegistry* r = new ModelRegistry;  // never destroyed: used at static init
    return *r;
  }
};

ModelBuilder find_builder(const std::string& name) {
  ModelRegistry& r = ModelRegistry::get();
  MutexLock lock(r.mu);
  auto it = r.builders.find(name);
  STRATA_CHECK(NOT_FOUND, it != r.builders.end(), "keras model '", name,
               "' is not registered (STRATA_REGISTER_KERAS_MODEL)");
  return it->second;
}

// A worker's variable: created locally while the registered model is built,
// then bound to the chief's ps variable at the same place, to which every
// read and update goes.
class BoundVariableImpl final : public VariableImpl {
 public:
  explicit BoundVariableImpl(std::shared_ptr<VariableImpl> local) : local_(std::move(local)) {}
  void bind(std::shared_ptr<VariableImpl> target) {
    MutexLock lock(mu_);
    target_ = std::move(target);
  }
  Tensor read() const override { return current()->read(); }
  void assign(const Tensor& value) override { current()->assign(value); }
  void assign_add(const Tensor& delta) override { current()->assign_add(delta); }
  void assign_sub(const Tensor& delta) override { current()->assign_sub(delta); }
  const std::string& name() const override { return local_->name(); }
  const TensorShape& shape() const override { return local_->shape(); }
  DType dtype() const override { return local_->dtype(); }
  const std::string& device() const override {
    MutexLock lock(mu_);
    return (target_ ? target_ : local_)->device();  // a bound target is replaced only between steps
  }
  bool trainable() const override { return local_->trainable(); }
  VariableSynchronization synchronization() const override { return local_->synchronization(); }
  VariableAggregation aggregation() const override { return local_->aggregation(); }

 private:
  std::shared_ptr<VariableImpl> current() const {
    MutexLock lock(mu_);
    return target_ ? target_ : local_;
  }
  std::shared_ptr<VariableImpl> local_;
  mutable Mutex mu_;
  std::shared_ptr<VariableImpl> target_ STRATA_GUARDED_BY(mu_);
};

// The registered models a worker built, free for the next closure.
struct WorkerModel {
  ModelPtr model;
  bool prepared = false;
};
struct WorkerPool {
  Mutex mu;
  std::map<std::string, std::vector<std::unique_ptr<WorkerModel>>> free STRATA_GUARDED_BY(mu);
};
WorkerPool& worker_pool() {
  static WorkerPool* pool = new WorkerPool;
  return *pool;
}

// Creates every variable of the thread as a BoundVariableImpl.
Variable create_bound(const NextVariableCreator& next, VariableArgs args) {
  return Variable(std::make_shared<BoundVariableImpl>(next(std::move(args)).impl_ptr()));
}

constexpr const char* kTrainStep = "strata_keras_train_step";

}  // namespace

void register_model(const std::string& name, ModelBuilder builder) {
  STRATA_CHECK_ARG(!name.empty(), "register_model: expected a non-empty name");
  STRATA_CHECK_ARG(builder != nullptr, "register_model('", name, "'): expected a builder");
  ModelRegistry& r = ModelRegistry::get();
  MutexLock lock(r.mu);
  STRATA_CHECK(ALREADY_EXISTS, !r.builders.contains(name), "keras model '", name,
               "' is already registered");
  r.builders.emplace(name, std::move(builder));
}

ModelPtr build_registered_model(const std::string& name) {
  ModelPtr model = find_builder(name)();
  STRATA_CHECK_ARG(model != nullptr, "the builder of keras model '", name, "' returned no model");
  model->registered_builder_ = name;
  return model;
}

DatasetCreator::DatasetCreator(std::string dataset_function) : name_(std::move(dataset_function)) {
  sps::FunctionRegistry::global().dataset_function(name_);  // NotFoundError when absent
}

History Model::fit(const DatasetCreator& creator, const FitOptions& options) {
  if (strategy_->extended().should_use_with_coordinator())
    return fit_on_coordinator(creator, options);
  auto fn = sps::FunctionRegistry::global().dataset_function(creator.dataset_function());
  return fit((*fn)(distribute::InputContext()), options);
}

History Model::fit_on_coordinator(const DatasetCreator& creator, const FitOptions& options) {
  distribute::Strategy& strategy = *strategy_;
  check_compiled("training");
  STRATA_CHECK(FAILED_PRECONDITION, optimizer_ != nullptr, "Model '", name(),
               "': compile with an optimizer before fit (compile({.optimizer = ...}))");
  STRATA_CHECK_ARG(options.steps_per_epoch.has_value() && *options.steps_per_epoch > 0, "Model '",
                   name(), "': when using a DatasetCreator under ", strategy.name(),
                   ", "
                   "`steps_per_epoch` must be specified (and > 0), got ",
                   options.steps_per_epoch ? std::to_string(*options.steps_per_epoch) : "None");
  STRATA_CHECK_ARG(options.epochs >= 0, "fit: epochs must be >= 0, got ", options.epochs);
  STRATA_CHECK(FAILED_PRECONDITION, !registered_builder_.empty(), "Model '", name(), "': under ",
               strategy.name(),
               " the workers rebuild the model, so it must be "
               "made by keras::build_registered_model (STRATA_REGISTER_KERAS_MODEL)");
  STRATA_CHECK(UNIMPLEMENTED,
               !options.validation_data.has_value() && options.validation_split == 0.0, "Model '",
               name(), "': validation during fit under ", strategy.name());
  const int verbose = options.verbose.resolve();
  distribute::StrategyScope scope(strategy);
  const std::unique_ptr<distribute::Coordinator> coordinator =
      strategy.extended().make_coordinator();
  // Build the model, the optimizer's slots and the metrics (all where the
  // strategy keeps its variables) from one batch of the dataset function,
  // for the shapes.
  {
    auto fn = sps::FunctionRegistry::global().dataset_function(creator.dataset_function());
    data::Element first =
        (*fn)(distribute::InputContext(coordinator->num_workers(), 0)).iter().get_next();
    internal::PsTraining::prepare(*this, first);
  }
  std::vector<distribute::ClosureArgument> args{strata::constant(registered_builder_)};
  for (Variable& v : internal::PsTraining::state_variables(*this)) args.emplace_back(std::move(v));
  args.emplace_back(coordinator->create_per_worker_iterator(creator.dataset_function()));

  auto [cbs, history, initial_epoch, initial_step] =
      begin_training(options, verbose, options.steps_per_epoch);
  STRATA_CHECK(UNIMPLEMENTED, initial_step == 0, "Model '", name(),
               "': resuming mid-epoch (BackupAndRestore with save_freq in batches) under ",
               strategy.name(), "; back up per epoch");
  Logs training_logs;
  for (int epoch = initial_epoch; epoch < options.epochs; ++epoch) {
    reset_metrics();
    Logs epoch_logs;
    cbs.on_epoch_begin(epoch, epoch_logs);
    for (int64_t step = 0; step < *options.steps_per_epoch; ++step) {
      Logs batch_logs;  // TF hands the batch hooks unfetched RemoteValues
      cbs.on_train_batch_begin(step, batch_logs);
      coordinator->schedule_closure(internal::PsTraining::train_step_function(), args);
      cbs.on_train_batch_end(step, batch_logs);
      if (stop_training) break;
    }
    coordinator->join();
    epoch_logs = get_metrics_result();  // every worker's batches, from the strategy's variables
    cbs.on_epoch_end(epoch, epoch_logs);
    training_logs = epoch_logs;
    if (stop_training) break;
  }
  cbs.on_train_end(training_logs);
  history_ = history->history();
  return history_;
}

namespace internal {

std::vector<Variable> PsTraining::state_variables(const Model& model) {
  std::vector<Variable> out = model.weights();
  if (model.optimizer_) {
    for (Variable& v : model.optimizer_->variables()) out.push_back(std::move(v));
  }
  for (const metrics::MetricPtr& m : model.metrics())
    for (const Variable& v : m->variables()) out.push_back(v);
  return out;
}

void PsTraining::prepare(Model& model, const data::Element& batch) {
  model.prepare_distributed_step(batch, /*training=*/true);
}

const char* PsTraining::train_step_function() { return kTrainStep; }

namespace {

// The closure fit schedules: args = {model name, its state variables..., the
// per-worker iterator}. Returns the step's loss (the loss tracker's running
// mean over every worker's batches).
std::vector<Tensor> train_step_on_worker(const sps::FunctionArgs& args) {
  STRATA_CHECK_ARG(args.size() >= 2, kTrainStep, ": expected the model name and an iterator, got ",
                   args.size(), " arguments");
  const std::string name = args.tensor(0).data<std::string>()[0];
  const size_t num_state = args.size() - 2;
  data::Element batch = args.iterator(args.size() - 1).get_next();

  std::unique_ptr<WorkerModel> worker;
  {
    WorkerPool& pool = worker_pool();
    MutexLock lock(pool.mu);
    auto& free = pool.free[name];
    if (!free.empty()) {
      worker = std::move(free.back());
      free.pop_back();
    }
  }
  if (!worker) {
    VariableCreatorScope scope(create_bound);
    worker = std::make_unique<WorkerModel>();
    worker->model = build_registered_model(name);
  }
  if (!worker->prepared) {
    VariableCreatorScope scope(create_bound);  // lazily built weights, slots, metrics
    PsTraining::prepare(*worker->model, batch);
    worker->prepared = true;
  }
  const std::vector<Variable> state = PsTraining::state_variables(*worker->model);
  STRATA_CHECK_ARG(state.size() == num_state, "keras model '", name,
                   "': built on this worker it has ", state.size(),
                   " variables (weights, optimizer, metrics), the chief sent ", num_state,
                   " (the builder must make the same model in every process)");
  for (size_t i = 0; i < num_state; ++i) {
    const Variable& remote = args.variable(i + 1);
    STRATA_CHECK_ARG(state[i].shape() == remote.shape() && state[i].dtype() == remote.dtype(),
                     "keras model '", name, "': variable ", i, " '", state[i].name(), "' is ",
                     dtype_name(state[i].dtype()), " ", state[i].shape(),
                     " on this worker, the chief's '", remote.name(), "' is ",
                     dtype_name(remote.dtype()), " ", remote.shape());
    auto bound = std::dynamic_pointer_cast<BoundVariableImpl>(state[i].impl_ptr());
    STRATA_CHECK(INTERNAL, bound != nullptr, "keras model '", name, "': variable '",
                 state[i].name(), "' was not created while the worker built the model");
    bound->bind(remote.impl_ptr());
  }
  struct ReturnToPool {
    const std::string& name;
    std::unique_ptr<WorkerModel>& worker;
    ~ReturnToPool() {
      WorkerPool& pool = worker_pool();
      MutexLock lock(pool.mu);
      pool.free[name].push_back(std::move(worker));
    }
  } give_back{name, worker};
  const Logs logs = worker->model->train_step(batch);
  return {strata::constant(static_cast<float>(logs.get("loss").value_or(0.0)))};
}

}  // namespace
}  // namespace internal

}  // namespace strata::keras

STRATA_REGISTER_FUNCTION(strata_keras_train_step, ::strata::keras::internal::train_step_on_worker);
