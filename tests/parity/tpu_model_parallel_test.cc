// Model parallelism through the normal layer API: Keras models called inside
// a TPUStrategy replica on inputs annotated by experimental_split_to_logical_devices
// run their ops sharded (strata/tpu/sharded/sharded_ops.h, "The normal op
// API") and give the unpartitioned results: forward, gradients, 20 SGD steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "strata/autodiff/gradient_tape.h"
#include "strata/core/config.h"
#include "strata/core/device.h"
#include "strata/distribute/tpu_strategy.h"
#include "strata/distribute/tpu_system.h"
#include "strata/keras/initializers.h"
#include "strata/keras/layers/layers.h"
#include "strata/keras/losses.h"
#include "strata/keras/sequential.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/random_ops.h"
#include "strata/testing/logical_devices.h"
#include "strata/tpu/device_assignment.h"
#include "strata/tpu/sharded/sharded_ops.h"

namespace strata {
namespace {

namespace sd = strata::distribute;
namespace sh = strata::tpu::sharded;
namespace tpu = strata::tpu::experimental;
namespace kl = strata::keras::layers;
namespace ki = strata::keras::initializers;

class TpuModelParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("STRATA_TPU_TOPOLOGY");
    tpu::shutdown_tpu_system();
    strata::testing::use_logical_cpus(8);
    sh::reset_fallback_counts();
  }
  void TearDown() override { tpu::shutdown_tpu_system(); }

  // One replica of `cores` (2, 4 or 8) logical devices on the 2x2x1x2 mesh
  // of 8 local devices.
  static std::unique_ptr<sd::TPUStrategy> strategy(int cores) {
    tpu::Topology topology = tpu::initialize_tpu_system();
    std::vector<int> shape = {cores >= 4 ? 2 : 1, cores == 8 ? 2 : 1, 1, 2};
    return std::make_unique<sd::TPUStrategy>(
        tpu::DeviceAssignment::build(topology, {.computation_shape = shape, .num_replicas = 1}));
  }
};

// max |a - b| / max |b|.
double relative_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const Tensor x = cast(a, DType::float64), y = cast(b, DType::float64);
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    diff = std::max(diff, std::abs(x.data<double>()[i] - y.data<double>()[i]));
    scale = std::max(scale, std::abs(y.data<double>()[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

// The CNN of the Keras issue: Conv 32 3x3 ReLU, MaxPool 2, Conv 64 3x3 ReLU,
// MaxPool 2, Flatten, Dense 128 ReLU, Dense 10, on 32x32x3 images.
struct Cnn {
  std::shared_ptr<kl::Conv2DLayer> first;
  std::shared_ptr<keras::SequentialModel> model;
};
Cnn cnn(DType dtype) {
  Cnn c;
  c.first = kl::Conv2D(32, {3, 3},
                       {.padding = "same",
                        .activation = "relu",
                        .kernel_initializer = ki::glorot_uniform({.seed = 1}),
                        .bias_initializer = ki::random_normal({.stddev = 0.1, .seed = 2}),
                        .input_shape = std::vector<int64_t>{32, 32, 3},
                        .dtype = dtype});
  c.model = keras::Sequential({
      c.first,
      kl::MaxPooling2D({2, 2}, {.dtype = dtype}),
      kl::Conv2D(64, {3, 3},
                 {.padding = "same",
                  .activation = "relu",
                  .kernel_initializer = ki::glorot_uniform({.seed = 3}),
                  .bias_initializer = ki::random_normal({.stddev = 0.1, .seed = 4}),
                  .dtype = dtype}),
      kl::MaxPooling2D({2, 2}, {.dtype = dtype}),
      kl::Flatten({.dtype = dtype}),
      kl::Dense(128, {.activation = "relu",
                      .kernel_initializer = ki::glorot_uniform({.seed = 5}),
                      .dtype = dtype}),
      kl::Dense(10, {.kernel_initializer = ki::glorot_uniform({.seed = 6}), .dtype = dtype}),
  });
  return c;
}

// {loss, gradient of every trainable variable} of one batch, computed in
// the replica of `strategy`; `parts` empty = unannotated (unpartitioned).
std::vector<Tensor> loss_and_gradients(sd::TPUStrategy& strategy, keras::SequentialModel& model,
                                       const Tensor& images, const Tensor& labels,
                                       const std::vector<int64_t>& parts) {
  sd::PerReplica<std::vector<Tensor>> out = strategy.run([&] {
    GradientTape tape;
    const Tensor x =
        parts.empty() ? images : strategy.experimental_split_to_logical_devices(images, parts);
    const Tensor logits = model(x, /*training=*/true);
    const Tensor loss = reduce_mean(
        keras::losses::sparse_categorical_crossentropy(labels, logits, {.from_logits = true}));
    std::vector<Tensor> result = tape.gradient(loss, model.trainable_variables());
    result.insert(result.begin(), loss);
    return result;
  });
  return out.values().front();
}

class CnnThroughLayersTest : public TpuModelParallelTest,
                             public ::testing::WithParamInterface<std::vector<int64_t>> {};

TEST_P(CnnThroughLayersTest, ForwardGradientsAndTwentyStepsEqualTheUnpartitionedModel) {
  const std::vector<int64_t> parts = GetParam();
  int64_t cores = 1;
  for (int64_t p : parts) cores *= p;
  auto tpu_strategy = strategy(static_cast<int>(cores));
  const Tensor images = random::uniform({4, 32, 32, 3}, {.seed = 31});
  const Tensor labels = random::uniform_int({4}, 0, 10, {.seed = 32});
  const Cnn net = cnn(DType::float32);
  const auto& model = net.model;

  // Forward: the logits of the partitioned call equal the plain ones, and the
  // layers ran sharded (their conv2d / pool / bias add / relu took no fallback).
  sd::PerReplica<std::vector<Tensor>> forward = tpu_strategy->run([&] {
    const Tensor x = tpu_strategy->experimental_split_to_logical_devices(images, parts);
    const Tensor first = (*net.first)(x);
    const sh::ShardedTensor* shards = sh::carried_shards(first);
    EXPECT_NE(shards, nullptr);
    if (shards != nullptr) {
      EXPECT_EQ(shards->sharding().partition_dimensions(), parts);
      const std::vector<const Device*>& devices = tpu_strategy->logical_devices(0);
      for (int d = 0; d < static_cast<int>(cores); ++d)
        EXPECT_EQ(shards->shard(d).device(), devices[static_cast<size_t>(d)]->name()) << d;
    }
    return std::vector<Tensor>{(*model)(x), (*model)(images)};
  });
  const std::vector<Tensor>& logits = forward.values().front();
  EXPECT_LE(relative_error(logits[0], logits[1]), 1e-5);
  EXPECT_EQ(sh::fallback_count("conv2d") + sh::fallback_count("max_pool2d") +
                sh::fallback_count("add") + sh::fallback_count("relu"),
            0);
  // Flatten mixes the split height and width into one dimension: the one
  // gather of the model, visible in its counter.
  EXPECT_EQ(sh::fallback_count("reshape"), 1);

  // Gradients of every weight.
  const std::vector<Tensor> g_plain = loss_and_gradients(*tpu_strategy, *model, images, labels, {});
  const std::vector<Tensor> g_split =
      loss_and_gradients(*tpu_strategy, *model, images, labels, parts);
  ASSERT_EQ(g_plain.size(), g_split.size());
  for (size_t i = 0; i < g_plain.size(); ++i) {
    ASSERT_TRUE(g_split[i].defined()) << i;
    EXPECT_LE(relative_error(g_split[i], g_plain[i]), 1e-5) << "loss/gradient " << i;
  }

  // 20 SGD steps (learning rate 0.1) from the same start, in float64 (the
  // partitioned model sums in another order; in float32 those rounding
  // differences grow past 1e-5 over 20 steps).
  const Tensor images64 = cast(images, DType::float64);
  auto model64 = cnn(DType::float64).model;
  const std::vector<Tensor> start = model64->get_weights();
  auto train = [&](const std::vector<int64_t>& split) {
    model64->set_weights(start);
    double last_loss = 0;
    for (int step = 0; step < 20; ++step) {
      std::vector<Tensor> g = loss_and_gradients(*tpu_strategy, *model64, images64, labels, split);
      last_loss = g[0].scalar_as_double();
      std::vector<Variable> vars = model64->trainable_variables();
      for (size_t i = 0; i < vars.size(); ++i)
        vars[i].assign_sub(multiply(constant(0.1), g[i + 1]));
    }
    return std::make_pair(model64->get_weights(), last_loss);
  };
  const auto [w_plain, loss_plain] = train({});
  const auto [w_split, loss_split] = train(parts);
  ASSERT_EQ(w_plain.size(), w_split.size());
  for (size_t i = 0; i < w_plain.size(); ++i) {
    EXPECT_LE(relative_error(w_split[i], w_plain[i]), 1e-5) << "weight " << i;
    EXPECT_GT(relative_error(w_plain[i], start[i]), 1e-4) << "weight " << i << " did not train";
  }
  EXPECT_LE(std::abs(loss_split - loss_plain), 1e-5 * std::abs(loss_plain));
}

INSTANTIATE_TEST_SUITE_P(ImageSplits, CnnThroughLayersTest,
                         ::testing::Values(std::vector<int64_t>{1, 2, 2, 1},
                                           std::vector<int64_t>{1, 2, 4, 1}));

TEST_F(TpuModelParallelTest, DenseModelWithASplitContractionEqualsTheUnpartitionedModel) {
  auto tpu_strategy = strategy(4);
  const Tensor x = random::normal({6, 16}, {.seed = 41});
  const Tensor labels = random::uniform_int({6}, 0, 4, {.seed = 42});
  auto hidden_layer =
      kl::Dense(8, {.activation = "relu",
                    .kernel_initializer = ki::glorot_uniform({.seed = 43}),
                    .bias_initializer = ki::random_normal({.stddev = 0.1, .seed = 44}),
                    .input_shape = std::vector<int64_t>{16}});
  auto model = keras::Sequential({
      hidden_layer,
      kl::Dense(4, {.kernel_initializer = ki::glorot_uniform({.seed = 45})}),
  });
  const std::vector<Tensor> plain = loss_and_gradients(*tpu_strategy, *model, x, labels, {});
  const std::vector<Tensor> split = loss_and_gradients(*tpu_strategy, *model, x, labels, {1, 4});
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_LE(relative_error(split[i], plain[i]), 1e-5) << "loss/gradient " << i;
  // Partial products + all-reduce: no gather anywhere in the model or the loss.
  EXPECT_EQ(sh::fallback_count("matmul"), 0);
  EXPECT_EQ(sh::fallback_count("sparse_softmax_cross_entropy_with_logits"), 0);
  sd::PerReplica<Tensor> hidden = tpu_strategy->run([&] {
    return strata::matmul(tpu_strategy->experimental_split_to_logical_devices(x, {1, 4}),
                          hidden_layer->kernel().value());
  });
  const tpu::Sharding* s = tpu::sharding_of(hidden.values().front());
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->is_replicated());
}

TEST_F(TpuModelParallelTest, OpsWithoutARuleGatherCountAndStayCorrect) {
  auto tpu_strategy = strategy(2);
  const Tensor x = random::normal({4, 6}, {.seed = 51});
  sd::PerReplica<std::vector<Tensor>> out = tpu_strategy->run([&] {
    const Tensor split = tpu_strategy->experimental_split_to_logical_devices(x, {2, 1});
    const Tensor t = strata::transpose(split, {1, 0});
    const Tensor y = strata::multiply(split, constant(2.f));
    return std::vector<Tensor>{t, y};
  });
  EXPECT_EQ(sh::fallback_count("transpose"), 1);
  EXPECT_EQ(sh::fallback_count("multiply"), 0);
  EXPECT_EQ(out.values()[0][0].to_vector<float>(), strata::transpose(x, {1, 0}).to_vector<float>());
  EXPECT_EQ(out.values()[0][1].to_vector<float>(),
            strata::multiply(x, constant(2.f)).to_vector<float>());
}

TEST_F(TpuModelParallelTest, ReluBackwardOfASplitTensorStaysSharded) {
  // relu's gradient is the fused ReluGrad op: element-wise, so it runs
  // shard-wise on equally split operands (no gather) and keeps the split.
  auto tpu_strategy = strategy(2);
  const Tensor features = random::normal({2, 8, 4, 3}, {.seed = 71});
  const Tensor upstream = random::normal({2, 8, 4, 3}, {.seed = 72});
  sd::PerReplica<std::vector<Tensor>> out = tpu_strategy->run([&] {
    const Tensor f = tpu_strategy->experimental_split_to_logical_devices(features, {1, 2, 1, 1});
    const Tensor g = tpu_strategy->experimental_split_to_logical_devices(upstream, {1, 2, 1, 1});
    const Tensor dx = nn::relu_grad(g, f);
    const tpu::Sharding* s = tpu::sharding_of(dx);
    EXPECT_TRUE(s != nullptr && s->is_tiled() &&
                s->partition_dimensions() == std::vector<int64_t>({1, 2, 1, 1}));
    const sh::ShardedTensor* shards = sh::carried_shards(dx);
    EXPECT_NE(shards, nullptr);
    if (shards != nullptr) {
      EXPECT_EQ(shards->shard(1).device(), tpu_strategy->logical_devices(0)[1]->name());
    }
    // And through a tape: relu's backward under the sharded dispatch.
    GradientTape tape;
    tape.watch(f);
    const Tensor y = strata::relu(f);
    return std::vector<Tensor>{dx, tape.gradient(y, f, {.output_gradients = g})};
  });
  EXPECT_EQ(sh::fallback_count("relu_grad"), 0);
  const Tensor expected = nn::relu_grad(upstream, features);
  EXPECT_EQ(out.values()[0][0].to_vector<float>(), expected.to_vector<float>());
  EXPECT_EQ(out.values()[0][1].to_vector<float>(), expected.to_vector<float>());
}

TEST_F(TpuModelParallelTest, OpsOnATensorAssignedToALogicalDeviceRunThere) {
  auto tpu_strategy = strategy(2);
  const Tensor x = random::normal({3, 3}, {.seed = 61});
  sd::PerReplica<std::vector<std::string>> placed = tpu_strategy->run([&] {
    const Tensor on1 = tpu_strategy->experimental_assign_to_logical_device(x, 1);
    const Tensor y = strata::add(on1, on1);
    const Tensor z = strata::add(x, x);  // unannotated: logical device 0
    const tpu::Sharding* s = tpu::sharding_of(y);
    EXPECT_TRUE(s != nullptr && s->is_maximal() && s->maximal_device() == 1);
    EXPECT_EQ(y.to_vector<float>(), strata::add(x, x).to_vector<float>());
    return std::vector<std::string>{y.device(), z.device()};
  });
  EXPECT_EQ(placed.values()[0][0], tpu_strategy->logical_devices(0)[1]->name());
  EXPECT_EQ(placed.values()[0][1], tpu_strategy->logical_devices(0)[0]->name());
}

}  // namespace
}  // namespace strata
