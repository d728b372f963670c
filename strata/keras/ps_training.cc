#include "strata/keras/ps_training.h"

#include <map>
#include <mutex>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/thread_annotations.h"
#include "strata/distribute/ps/function_registry.h"

namespace strata::keras {

namespace sps = distribute::ps;

namespace {

struct ModelRegistry {
  std::mutex mu;
  std::map<std::string, ModelBuilder> builders STRATA_GUARDED_BY(mu);
  static ModelRegistry& get() {
    static ModelRegistry* r = new ModelRegistry;  // never destroyed: used at static init
    return *r;
  }
};

ModelBuilder find_builder(const std::string& name) {
  ModelRegistry& r = ModelRegistry::get();
  std::lock_guard lock(r.mu);
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
    std::lock_guard lock(mu_);
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
    std::lock_guard lock(mu_);
    return (target_ ? target_ : local_)->device();  // a bound target is replaced only between steps
  }
  bool trainable() const override { return local_->trainable(); }
  VariableSynchronization synchronization() const override { return local_->synchronization(); }
  VariableAggregation aggregation() const override { return local_->aggregation(); }

 private:
  std::shared_ptr<VariableImpl> current() const {
    std::lock_guard lock(mu_);
    return target_ ? target_ : local_;
  }
  std::shared_ptr<VariableImpl> local_;
  mutable std::mutex mu_;
  std::shared_ptr<VariableImpl> target_ STRATA_GUARDED_BY(mu_);
};

// The registered models a worker built, free for the next closure.
struct WorkerModel {
  ModelPtr model;
  bool prepared = false;
};
struct WorkerPool {
  std::mutex mu;
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
  std::lock_guard lock(r.mu);
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
    std::lock_guard lock(pool.mu);
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
      std::lock_guard lock(pool.mu);
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
