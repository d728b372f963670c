// keras model.fit under ParameterServerStrategy on loopback: chief (the test
// thread) + 2 workers + 2 ps, each task a real strata::distribute::Server with
// its own 127.0.0.1 gRPC port, in this process's threads.
#include <gtest/gtest.h>

#include <map>

#include "strata/base/errors.h"
#include "strata/core/tensor.h"
#include "strata/core/variable.h"
#include "strata/data/dataset.h"
#include "strata/distribute/input_context.h"
#include "strata/distribute/ps/function_registry.h"
#include "strata/distribute/ps/local_cluster.h"
#include "strata/distribute/ps/parameter_server_strategy.h"
#include "strata/distribute/ps/ps_variable.h"
#include "strata/distribute/ps/server.h"
#include "strata/keras/layers/dense.h"
#include "strata/keras/model.h"
#include "strata/keras/optimizers/sgd.h"
#include "strata/keras/ps/ps_training.h"
#include "strata/keras/sequential.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/ops/random_ops.h"

// gRPC, protobuf and abseil come from Debian uninstrumented: their locks and
// completion-queue hand-offs are invisible to ThreadSanitizer, so a buffer
// they pass between their threads would be reported as a race. Under TSan the
// interceptors ignore calls from uninstrumented modules (TSAN_OPTIONS still
// adds to or overrides this).
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_options() { return "ignore_noninstrumented_modules=1"; }
#endif

namespace sd = strata::distribute;
namespace keras = strata::keras;
using strata::Tensor;
using strata::Variable;
using namespace std::chrono_literals;

namespace {

// y = x . [1, -2, 0.5] + 0.3 exactly.
strata::data::Dataset keras_linear_data(const sd::InputContext& ctx) {
  Tensor x = strata::random::uniform({256, 3}, {.minval = -1, .maxval = 1, .seed = 11});
  Tensor w = strata::constant(std::vector<float>{1.f, -2.f, 0.5f}, {3, 1});
  Tensor y = strata::matmul(x, w) + strata::constant(0.3f);
  return strata::data::Dataset::from_tensor_slices({x, y})
      .shard(ctx.num_input_pipelines(), ctx.input_pipeline_id())
      .repeat()
      .batch(16);
}
STRATA_REGISTER_DATASET_FUNCTION(keras_linear_data, keras_linear_data);

STRATA_REGISTER_KERAS_MODEL(keras_ps_linear, [] {
  auto model = keras::Sequential({keras::layers::Dense(1, {.input_shape = {3}})});
  model->compile({.optimizer = keras::optimizers::SGD({.learning_rate = 0.1}),
                  .loss = "mse",
                  .metrics = {"mae"}});
  return std::static_pointer_cast<keras::Model>(model);
});

struct LocalCluster : sd::ps::LocalCluster {
  LocalCluster(int workers, int ps)
      : sd::ps::LocalCluster(workers, ps, {.shutdown_grace = 100ms, .rpc_timeout = 10s}) {}
};

TEST(KerasParameterServerTest, FitSchedulesTrainingStepsOnTheWorkersAndTheWeightsLiveOnThePs) {
  LocalCluster cluster(2, 2);
  sd::ParameterServerStrategy strategy(cluster.chief);
  keras::ModelPtr model;
  {
    auto scope = strategy.scope();
    model = keras::build_registered_model("keras_ps_linear");
  }
  EXPECT_EQ(model->registered_builder(), "keras_ps_linear");
  keras::History h = model->fit(keras::DatasetCreator("keras_linear_data"),
                                {.epochs = 4, .verbose = 0, .steps_per_epoch = 60});
  const std::vector<double>& loss = h.history.at("loss");
  ASSERT_EQ(loss.size(), 4u);
  EXPECT_LT(loss[3], loss[0] * 0.1) << loss[0] << " -> " << loss[3];
  EXPECT_LT(loss[3], 0.01);
  EXPECT_EQ(h.history.at("mae").size(), 4u);
  // Both workers ran steps; every step went through the optimizer on the ps.
  EXPECT_GT(cluster.worker_servers[0]->closures_run(), 0);
  EXPECT_GT(cluster.worker_servers[1]->closures_run(), 0);
  EXPECT_EQ(cluster.worker_servers[0]->closures_run() + cluster.worker_servers[1]->closures_run(),
            240);
  EXPECT_EQ(model->optimizer()->iterations(), 240);
  // Every weight, the optimizer's iterations and the metrics' state are ps
  // variables; the ps tasks' own view holds the trained kernel.
  for (const Variable& v : model->weights()) EXPECT_TRUE(sd::ps::is_ps_variable(v)) << v.name();
  EXPECT_TRUE(sd::ps::is_ps_variable(model->optimizer()->iterations_variable()));
  for (const auto& m : model->metrics())
    for (const Variable& v : m->variables()) EXPECT_TRUE(sd::ps::is_ps_variable(v)) << v.name();
  const Variable kernel = model->trainable_variables().at(0);
  std::vector<float> on_ps;
  for (const auto& ps : cluster.ps_servers)
    for (const auto& v : ps->variables())
      if (v.name == kernel.name()) on_ps = v.value.to_vector<float>();
  ASSERT_EQ(on_ps.size(), 3u) << kernel.name();
  EXPECT_EQ(on_ps, kernel.value().to_vector<float>());
  EXPECT_NEAR(on_ps[0], 1.f, 0.1f);
  EXPECT_NEAR(on_ps[1], -2.f, 0.1f);
  EXPECT_NEAR(on_ps[2], 0.5f, 0.1f);
}

TEST(KerasParameterServerTest, FitUnderTheStrategyValidatesItsArguments) {
  LocalCluster cluster(1, 1);
  sd::ParameterServerStrategy strategy(cluster.chief);
  keras::ModelPtr registered, plain;
  {
    auto scope = strategy.scope();
    registered = keras::build_registered_model("keras_ps_linear");
    plain = keras::Sequential({keras::layers::Dense(1, {.input_shape = {3}})});
    plain->compile({.optimizer = keras::optimizers::SGD(), .loss = "mse"});
  }
  const keras::DatasetCreator creator("keras_linear_data");
  // steps_per_epoch is required.
  EXPECT_THROW(registered->fit(creator, {.verbose = 0}), strata::InvalidArgumentError);
  // A dataset or tensors instead of a DatasetCreator.
  EXPECT_THROW(
      registered->fit(keras_linear_data(sd::InputContext()), {.verbose = 0, .steps_per_epoch = 1}),
      strata::InvalidArgumentError);
  EXPECT_THROW(registered->fit(strata::zeros({4, 3}), strata::zeros({4, 1}), {.verbose = 0}),
               strata::InvalidArgumentError);
  // The workers could not rebuild a model that is not registered.
  EXPECT_THROW(plain->fit(creator, {.verbose = 0, .steps_per_epoch = 1}),
               strata::FailedPreconditionError);
  EXPECT_THROW(keras::DatasetCreator("no_such_dataset"), strata::NotFoundError);
  EXPECT_THROW(keras::build_registered_model("no_such_model"), strata::NotFoundError);
  EXPECT_THROW(registered->fit(creator, {.verbose = 0,
                                         .validation_data = keras_linear_data(sd::InputContext()),
                                         .steps_per_epoch = 1}),
               strata::UnimplementedError);
}

TEST(KerasParameterServerTest, ADatasetCreatorUnderTheDefaultStrategyTrainsLocally) {
  keras::ModelPtr model = keras::build_registered_model("keras_ps_linear");
  keras::History h = model->fit(keras::DatasetCreator("keras_linear_data"),
                                {.epochs = 2, .verbose = 0, .steps_per_epoch = 40});
  ASSERT_EQ(h.history.at("loss").size(), 2u);
  EXPECT_LT(h.history.at("loss")[1], h.history.at("loss")[0]);
  EXPECT_FALSE(sd::ps::is_ps_variable(model->trainable_variables().at(0)));
}

}  // namespace
