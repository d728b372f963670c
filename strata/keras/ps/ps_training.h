#pragma once
// Keras training under ParameterServerStrategy (spec §9): model.fit schedules
// its training steps through a coordinator, as TF's fit does. This is the
// strata::keras_ps target, beside strata::keras: it defines
// Model::fit(DatasetCreator), so only programs that train this way link it
// and the parameter-server target (with gRPC) it uses. It names no strategy:
// it asks strategy.extended().should_use_with_coordinator() and trains
// through extended().make_coordinator() (strata/distribute/coordinator.h).
//
//   // In every process of the job (chief, workers; ps tasks only serve):
//   STRATA_REGISTER_KERAS_MODEL(linear, [] {
//     auto model = keras::Sequential({keras::layers::Dense(1, {.input_shape = {3}})});
//     model->compile({.optimizer = keras::optimizers::SGD({.learning_rate = 0.1}), .loss = "mse"});
//     return model;
//   });
//   STRATA_REGISTER_DATASET_FUNCTION(train_data, [](const sd::InputContext& ctx) { ... });
//   // On the chief:
//   sd::ParameterServerStrategy strategy(resolver);
//   keras::ModelPtr model;
//   { auto scope = strategy.scope(); model = keras::build_registered_model("linear"); }
//   model->fit(keras::DatasetCreator("train_data"), {.epochs = 5, .steps_per_epoch = 100});
//
// C++ code cannot travel, so the model is built by a registered builder in
// every process (the same program runs everywhere). On the chief, built in
// the strategy's scope, its weights, its optimizer's iterations and slots and
// its metrics' state are ps variables. fit(DatasetCreator, {.steps_per_epoch})
// then (TF's PSS fit):
//   - builds the model, the optimizer's slots and the compiled metrics on the
//     chief (one batch of the dataset function, InputContext(#workers, 0), for
//     the shapes), all of it on the ps tasks;
//   - makes one ClusterCoordinator and one per-worker iterator of the dataset
//     function (kept across epochs, as TF with steps_per_epoch);
//   - each step schedules one closure: the worker takes its next batch, runs
//     the model's train_step on its own copy of the registered model whose
//     every variable is bound to the chief's ps variable at the same place
//     (model weights, optimizer variables, metric state, in structural
//     order): reads go to the ps, the optimizer's updates and the metrics'
//     updates are applied there, asynchronously across workers;
//   - at the end of each epoch joins the coordinator and reads the epoch's
//     logs from the metrics' state on the ps (every worker's batches). Batch
//     hooks get empty logs (TF hands them unfetched RemoteValues).
// Errors: fit(Dataset) or fit(x, y) under the strategy, or a DatasetCreator
// without steps_per_epoch, is InvalidArgumentError (TF's ValueError); a model
// not made by build_registered_model is FailedPreconditionError; validation
// data under the strategy is UnimplementedError; a worker whose builder makes
// a model whose variables differ from the chief's (count, shape, dtype) fails
// the step with InvalidArgumentError naming the model.
//
// Under any other strategy fit(DatasetCreator) calls the dataset function with
// InputContext() and trains on that dataset as fit(Dataset).
//
// Thread-safety: registration and build_registered_model are thread-safe.

#include <functional>
#include <string>
#include <vector>

#include "strata/keras/model.h"

namespace strata::keras {

using ModelBuilder = std::function<ModelPtr()>;

// Registers `builder` under `name`; AlreadyExistsError for a name taken,
// InvalidArgumentError for an empty name or builder.
void register_model(const std::string& name, ModelBuilder builder);
// Calls the builder registered under `name` (NotFoundError if none) and
// remembers the name in the model, so fit can rebuild it on the workers.
ModelPtr build_registered_model(const std::string& name);

// tf.keras.utils.experimental.DatasetCreator, with a dataset function
// registered by name (STRATA_REGISTER_DATASET_FUNCTION): NotFoundError at
// construction when it is not registered in this process.
class DatasetCreator {
 public:
  explicit DatasetCreator(std::string dataset_function);
  const std::string& dataset_function() const noexcept { return name_; }

 private:
  std::string name_;
};

namespace internal {
// What fit and the workers' closure share (defined in ps_training.cc).
struct PsTraining {
  // The model's weights, its optimizer's variables, its metrics' variables,
  // in structural order (the same on the chief and on every worker).
  static std::vector<Variable> state_variables(const Model& model);
  // Builds the model, the optimizer's slots and the compiled metrics from one batch.
  static void prepare(Model& model, const data::Element& batch);
  // The registered name of the workers' training closure.
  static const char* train_step_function();
};

struct ModelRegistrar {
  ModelRegistrar(const char* name, ModelBuilder builder) {
    register_model(name, std::move(builder));
  }
};
}  // namespace internal

}  // namespace strata::keras

// Registers a model builder (callable as keras::ModelPtr()) under `name` (an
// identifier) at static-initialisation time, in the program's own sources.
#define STRATA_REGISTER_KERAS_MODEL(name, builder) \
  static const ::strata::keras::internal::ModelRegistrar strata_keras_model_##name(#name, builder)
