// config::enable_op_determinism() (tf.config.experimental.enable_op_determinism):
// the same computation gives the same bytes on devices with 1, 2, 3, 4 and 7
// intra-op threads, forward and backward.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "strata/autodiff/gradient_tape.h"
#include "strata/core/config.h"
#include "strata/core/device.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/random_ops.h"
#include "strata/testing/logical_devices.h"

namespace strata {
namespace {

const std::vector<int> kThreads = {1, 2, 3, 4, 7};

class OpDeterminismTest : public ::testing::Test {
 protected:
  void SetUp() override {
    strata::testing::use_logical_cpus(kThreads);
    config::enable_op_determinism();
  }
  void TearDown() override { config::disable_op_determinism(); }
};

std::string bytes_of(const Tensor& t) {
  return std::string(static_cast<const char*>(t.raw_data()), t.size_bytes());
}

// A small CNN and MLP step with every kind of kernel the Keras models use:
// big GEMMs split by rows and by columns, convolutions and their backprops,
// pooling, transcendental element-wise ops, full and partial reductions.
std::vector<std::string> step_bytes() {
  const Tensor images = random::uniform({16, 20, 20, 3}, {.seed = 1});
  const Tensor filters = random::normal({3, 3, 3, 16}, {.mean = 0, .stddev = 0.2, .seed = 2});
  const Tensor w = random::normal({1600, 300}, {.mean = 0, .stddev = 0.05, .seed = 3});
  const Tensor tall = random::uniform({4000, 96}, {.seed = 4});
  const Tensor narrow = random::uniform({96, 200}, {.seed = 7});
  const Tensor short_rows = random::uniform({64, 500}, {.seed = 8});
  const Tensor wide = random::uniform({500, 3000}, {.seed = 5});
  const Tensor big = random::uniform({300001}, {.seed = 6});
  GradientTape tape({.persistent = true});
  tape.watch(filters);
  tape.watch(w);
  const Tensor conv = relu(nn::conv2d(images, filters, {.padding = "SAME"}));
  const Tensor pooled = nn::max_pool2d(conv, {2, 2}, {2, 2});
  const Tensor flat = reshape(pooled, {16, -1});
  const Tensor logits = matmul(tanh(flat), w);
  const Tensor loss = reduce_mean(log_softmax(logits));
  const std::vector<Tensor> grads = tape.gradient(loss, std::vector<Tensor>{filters, w});
  return {bytes_of(logits),
          bytes_of(loss),
          bytes_of(grads[0]),
          bytes_of(grads[1]),
          bytes_of(matmul(tall, narrow)),      // split by rows
          bytes_of(matmul(short_rows, wide)),  // split by columns
          bytes_of(exp(big)),
          bytes_of(sigmoid(big)),
          bytes_of(reduce_sum(big)),
          bytes_of(reduce_sum(reshape(big, {1, 300001}), {.axis = {1}}))};
}

TEST_F(OpDeterminismTest, TheSameStepGivesTheSameBytesForAnyThreadCount) {
  std::vector<std::vector<std::string>> per_device;
  const std::vector<config::LogicalDevice> devices = config::list_logical_devices("CPU");
  ASSERT_EQ(devices.size(), kThreads.size());
  for (size_t d = 0; d < devices.size(); ++d) {
    DeviceScope scope(find_device(devices[d].name));
    ASSERT_EQ(current_device().thread_pool().num_threads(), kThreads[d]);
    per_device.push_back(step_bytes());
    per_device.push_back(step_bytes());  // run to run, on the same device
  }
  for (size_t i = 1; i < per_device.size(); ++i) {
    for (size_t k = 0; k < per_device[0].size(); ++k) {
      EXPECT_TRUE(per_device[i][k] == per_device[0][k])
          << "output " << k << " differs between " << kThreads[0] << " and " << kThreads[i / 2]
          << " threads";
    }
  }
}

TEST_F(OpDeterminismTest, TheFlagIsProcessWideAndCanBeTurnedOff) {
  EXPECT_TRUE(config::is_op_determinism_enabled());
  EXPECT_TRUE(config::experimental::is_op_determinism_enabled());
  config::experimental::disable_op_determinism();
  EXPECT_FALSE(config::is_op_determinism_enabled());
  config::experimental::enable_op_determinism();
  EXPECT_TRUE(config::is_op_determinism_enabled());
}

}  // namespace
}  // namespace strata
