// CommunicationOptions{.deterministic_reduction = true}: Keras fit gives the
// same bytes of final weights on 1, 2, 4 and 8 replicas of a MirroredStrategy
// and on 2 MultiWorkerMirroredStrategy workers (threads of this process on
// loopback, 8 replicas each), for the same global batch and seed. TensorFlow
// has no such mode; the nearest is
//   tf.config.experimental.enable_op_determinism()
//   strategy = tf.distribute.MirroredStrategy(devices[:R])
// whose weights differ from one R to another.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/cluster/socket.h"
#include "strata/keras/keras.h"
#include "strata/strata.h"
#include "strata/testing/logical_devices.h"

namespace strata {
namespace {

using strata::testing::cpu_device_names;

namespace sd = strata::distribute;
namespace keras = strata::keras;
namespace L = strata::keras::layers;

constexpr int kMicroBatches = 16;  // 2 workers x 8 replicas at most
constexpr int64_t kBatch = 64;

class DeterministicTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(8); }
  void TearDown() override { config::disable_op_determinism(); }
};

keras::ModelPtr build(const std::string& net) {
  uint64_t seed = 7;
  auto init = [&seed] { return keras::initializers::glorot_uniform({.seed = seed++}); };
  if (net == "mlp") {
    return keras::Sequential({L::Flatten({.input_shape = {12, 12}}),
                              L::Dense(32, {.activation = "relu", .kernel_initializer = init()}),
                              L::Dense(10, {.kernel_initializer = init()})});
  }
  return keras::Sequential(
      {L::Reshape({12, 12, 1}, {.input_shape = {12, 12}}),
       L::Conv2D(4, {3, 3}, {.activation = "relu", .kernel_initializer = init()}),
       L::MaxPooling2D({2, 2}), L::Flatten(), L::Dense(10, {.kernel_initializer = init()})});
}

// Three steps of fit (Adam, shuffled in-memory data) under `strategy`; the
// bytes of every weight of the model.
std::string train(sd::Strategy& strategy, const std::string& net) {
  keras::ModelPtr model;
  {
    auto scope = strategy.scope();
    model = build(net);
    model->compile({.optimizer = keras::optimizers::Adam({.learning_rate = 0.01}),
                    .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true}),
                    .seed = 3});
  }
  const Tensor x = random::uniform({3 * kBatch, 12, 12}, {.seed = 11});
  const Tensor y = cast(random::uniform_int({3 * kBatch}, 0, 10, {.seed = 12}), DType::int64);
  model->fit(x, y, {.batch_size = kBatch, .epochs = 1, .verbose = 0, .shuffle = true});
  std::string bytes;
  for (const Variable& v : model->trainable_variables()) {
    const Tensor t = v.value();
    bytes.append(static_cast<const char*>(t.raw_data()), t.size_bytes());
  }
  return bytes;
}

TEST_F(DeterministicTrainingTest, FitGivesTheSameWeightsForAnyReplicaCountAndAcrossWorkers) {
  const sd::CommunicationOptions deterministic{.deterministic_reduction = true,
                                               .deterministic_micro_batches = kMicroBatches};
  for (const std::string net : {"mlp", "cnn"}) {
    SCOPED_TRACE(net);
    std::map<std::string, std::string> weights;
    for (int r : {1, 2, 4, 8}) {
      sd::MirroredStrategy s(cpu_device_names(r), deterministic);
      weights[std::to_string(r) + " replicas"] = train(s, net);
    }
    const std::vector<int> ports = cluster::pick_free_ports(2);
    const train::ClusterSpec spec(
        {{"worker",
          {"127.0.0.1:" + std::to_string(ports[0]), "127.0.0.1:" + std::to_string(ports[1])}}});
    std::vector<std::future<std::string>> workers;
    workers.reserve(2);
    for (int w = 0; w < 2; ++w) {
      workers.push_back(std::async(std::launch::async, [&, w] {
        sd::MultiWorkerMirroredStrategy s(
            {.cluster_resolver = std::make_shared<sd::cluster_resolver::SimpleClusterResolver>(
                 spec, sd::cluster_resolver::SimpleClusterResolverOptions{.task_type = "worker",
                                                                          .task_id = w}),
             .communication_options = {.timeout_seconds = 60,
                                       .deterministic_reduction = true,
                                       .deterministic_micro_batches = kMicroBatches}});
        EXPECT_EQ(s.num_replicas_in_sync(), 16);
        return train(s, net);
      }));
    }
    for (int w = 0; w < 2; ++w) {
      weights["worker " + std::to_string(w) + " of 2 x 8 replicas"] = workers[size_t(w)].get();
    }
    const std::string& one = weights.at("1 replicas");
    for (const auto& [name, bytes] : weights) {
      EXPECT_TRUE(bytes == one) << name << " trained other weights than 1 replica";
    }
    // The default reduction differs between 1 and 2 replicas, so the
    // comparison above can fail.
    sd::MirroredStrategy plain_one(cpu_device_names(1)), plain_two(cpu_device_names(2));
    config::disable_op_determinism();
    EXPECT_NE(train(plain_one, net), train(plain_two, net));
  }
}

TEST_F(DeterministicTrainingTest, ABatchThatDoesNotSplitIntoTheMicroBatchesIsRefused) {
  sd::MirroredStrategy s(cpu_device_names(2),
                         {.deterministic_reduction = true});  // 8 micro-batches
  keras::ModelPtr model;
  {
    auto scope = s.scope();
    model = build("mlp");
    model->compile({.optimizer = keras::optimizers::SGD({}),
                    .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true})});
  }
  const Tensor x = random::uniform({12, 12, 12}, {.seed = 1});
  const Tensor y = cast(random::uniform_int({12}, 0, 10, {.seed = 2}), DType::int64);
  try {
    model->fit(x, y, {.batch_size = 12, .epochs = 1, .verbose = 0});
    ADD_FAILURE() << "a batch of 12 rows on 2 replicas (6 each, 4 micro-batches each) trained";
  } catch (const InvalidArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("8 equal micro-batches (4 per replica)"), std::string::npos) << what;
    EXPECT_NE(what.find("got a batch of 6 rows"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace strata
