// Strategy parity: training the MLP 784-512-256-10 for 50
// steps under MirroredStrategy over 1, 2 and 4 logical CPU devices ends with the
// same weights (relative difference <= 1e-5) as single-device training on the
// same global batches — with a custom GradientTape loop and with model.fit.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "strata/keras/keras.h"
#include "strata/strata.h"
#include "strata/testing/logical_devices.h"

namespace strata {
namespace {

namespace keras = strata::keras;
namespace sd = strata::distribute;

constexpr int64_t kGlobalBatch = 64;
constexpr int kSteps = 50;

struct Data {
  Tensor x;  // [kSteps * kGlobalBatch, 784]
  Tensor y;  // [kSteps * kGlobalBatch] int64
};

const Data& data() {
  static const Data d = [] {
    Data out;
    out.x = random::uniform({kSteps * kGlobalBatch, 784}, {.seed = 11});
    out.y = cast(random::uniform_int({kSteps * kGlobalBatch}, 0, 10, {.seed = 12}), DType::int64);
    return out;
  }();
  return d;
}

std::shared_ptr<keras::SequentialModel> make_mlp() {
  return keras::Sequential({
      keras::layers::Dense(512,
                           {.activation = "relu",
                            .kernel_initializer = keras::initializers::glorot_uniform({.seed = 1}),
                            .input_shape = {784}}),
      keras::layers::Dense(
          256, {.activation = "relu",
                .kernel_initializer = keras::initializers::glorot_uniform({.seed = 2})}),
      keras::layers::Dense(
          10, {.kernel_initializer = keras::initializers::glorot_uniform({.seed = 3})}),
  });
}

data::Dataset global_batches() {
  return data::Dataset::from_tensor_slices({data().x, data().y}).batch(kGlobalBatch);
}

std::vector<Tensor> weights_after_custom_loop(sd::Strategy* strategy) {
  std::shared_ptr<keras::SequentialModel> model;
  std::shared_ptr<keras::optimizers::SGDOptimizer> optimizer;
  {
    std::optional<sd::StrategyScope> scope;
    if (strategy) scope.emplace(*strategy);
    model = make_mlp();
    optimizer = keras::optimizers::SGD({.learning_rate = 0.05, .momentum = 0.9});
    optimizer->build(model->trainable_variables());
  }
  auto step = [&](const data::Element& batch) {
    GradientTape tape;
    Tensor logits = (*model)(batch[0], /*training=*/true);
    Tensor per_example =
        keras::losses::sparse_categorical_crossentropy(batch[1], logits, {.from_logits = true});
    Tensor loss = nn::compute_average_loss(per_example, {.global_batch_size = kGlobalBatch});
    auto grads = tape.gradient(loss, model->trainable_variables());
    optimizer->apply_gradients(zip(grads, model->trainable_variables()));
  };
  if (strategy == nullptr) {
    for (const data::Element& batch : global_batches()) step(batch);
  } else {
    for (const auto& batch : strategy->experimental_distribute_dataset(global_batches()))
      strategy->run(step, batch);
  }
  return model->get_weights();
}

std::vector<Tensor> weights_after_fit(sd::Strategy* strategy) {
  std::shared_ptr<keras::SequentialModel> model;
  {
    std::optional<sd::StrategyScope> scope;
    if (strategy) scope.emplace(*strategy);
    model = make_mlp();
    model->compile({.optimizer = keras::optimizers::SGD({.learning_rate = 0.05, .momentum = 0.9}),
                    .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true})});
  }
  model->fit(global_batches(), {.epochs = 1, .verbose = 0});
  return model->get_weights();
}

double max_relative_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const std::vector<float> u = a[i].to_vector<float>();
    const std::vector<float> v = b[i].to_vector<float>();
    double num = 0.0;
    double den = 0.0;
    for (size_t k = 0; k < u.size(); ++k) {
      num += (double(u[k]) - v[k]) * (double(u[k]) - v[k]);
      den += double(v[k]) * v[k];
    }
    worst = std::max(worst, std::sqrt(num / std::max(den, 1e-30)));
  }
  return worst;
}

class StrategyParityTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(4); }
  std::vector<std::string> devices() const { return strata::testing::cpu_device_names(GetParam()); }
};

TEST_P(StrategyParityTest, CustomLoopMatchesSingleDevice) {
  const std::vector<Tensor> reference = weights_after_custom_loop(nullptr);
  sd::MirroredStrategy strategy(devices());
  const std::vector<Tensor> mirrored = weights_after_custom_loop(&strategy);
  const double diff = max_relative_difference(mirrored, reference);
  EXPECT_LE(diff, 1e-5) << GetParam() << " replicas";
  // The weights moved: the comparison is not between two untouched models.
  EXPECT_GT(max_relative_difference(reference, make_mlp()->get_weights()), 1e-3);
}

TEST_P(StrategyParityTest, FitMatchesSingleDevice) {
  const std::vector<Tensor> reference = weights_after_fit(nullptr);
  sd::MirroredStrategy strategy(devices());
  const std::vector<Tensor> mirrored = weights_after_fit(&strategy);
  EXPECT_LE(max_relative_difference(mirrored, reference), 1e-5) << GetParam() << " replicas";
  // fit and the hand-written loop compute the same training.
  EXPECT_LE(max_relative_difference(reference, weights_after_custom_loop(nullptr)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Replicas, StrategyParityTest, ::testing::Values(1, 2, 4));

}  // namespace
}  // namespace strata
