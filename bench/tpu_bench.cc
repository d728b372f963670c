// Model-parallel (spatial partitioning) benchmark: a conv stack (three conv
// 32 3x3 SAME + ReLU layers) on a batch of 4 images of 512x512x3, forward and
// backward (gradients of every filter and of the input), run
//  * on one device with 1 thread           (BM_ConvStack_OneDevice/1),
//  * on one device with 2 threads          (BM_ConvStack_OneDevice/2),
//  * split [1, 2, 1, 1] over 2 logical devices of 1 thread each, with halo
//    exchange (strata/tpu/sharded/sharded_ops.h) (BM_ConvStack_TwoLogicalDevices).
// The backward pass is written out (relu_grad, conv2d_backprop_* /
// sharded::conv2d_gradients) so both sides run the same kernels; the split
// run's convolutions read their halo rows in place from the neighbouring
// shard (kernels::tiled_conv2d*), so it copies no windows.
//
//   build/bench/tpu_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   (image size: the benchmark argument; 512 by default, 128 for a quick run)
#include <benchmark/benchmark.h>

#include <vector>

#include "strata/core/config.h"
#include "strata/core/device.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/random_ops.h"
#include "strata/tpu/sharded/sharded_ops.h"

namespace sh = strata::tpu::sharded;
namespace tpu = strata::tpu::experimental;
using strata::Tensor;

namespace {

constexpr int kLayers = 3;
constexpr int64_t kBatch = 4;

// CPU:0 and CPU:1 with 1 thread each (the two logical devices), CPU:2 with 2.
void configure_devices() {
  if (strata::config::is_runtime_initialized()) return;
  std::vector<strata::config::LogicalDeviceConfiguration> c(3);
  c[0].num_threads = 1;
  c[1].num_threads = 1;
  c[2].num_threads = 2;
  strata::config::set_logical_device_configuration(strata::config::list_physical_devices("CPU")[0],
                                                   c);
}

struct Weights {
  std::vector<Tensor> filters;
  Tensor images;
  explicit Weights(int64_t size) {
    images = strata::random::uniform({kBatch, size, size, 3}, {.seed = 1});
    for (int l = 0; l < kLayers; ++l) {
      filters.push_back(strata::random::normal(
          {3, 3, l == 0 ? 3 : 32, 32}, {.stddev = 0.1, .seed = 2 + static_cast<uint64_t>(l)}));
    }
  }
};

const strata::nn::Conv2DOptions kSame{.padding = "SAME"};

// Forward + backward on one device; returns the filter gradients.
std::vector<Tensor> step_plain(const Weights& w) {
  std::vector<Tensor> inputs, outputs;
  Tensor x = w.images;
  for (int l = 0; l < kLayers; ++l) {
    inputs.push_back(x);
    x = strata::relu(strata::nn::conv2d(x, w.filters[static_cast<size_t>(l)], kSame));
    outputs.push_back(x);
  }
  std::vector<Tensor> grads(kLayers);
  Tensor dy = strata::ones_like(x);
  for (int l = kLayers - 1; l >= 0; --l) {
    const size_t i = static_cast<size_t>(l);
    dy = strata::nn::relu_grad(dy, outputs[i]);  // TF's fused ReluGrad
    grads[i] = strata::nn::conv2d_backprop_filter(inputs[i], w.filters[i].shape(), dy, kSame);
    dy = strata::nn::conv2d_backprop_input(inputs[i].shape(), w.filters[i], dy, kSame);
  }
  grads.push_back(dy);
  return grads;
}

// The same step, spatially partitioned.
std::vector<Tensor> step_sharded(const Weights& w,
                                 const std::vector<const strata::Device*>& devices) {
  const tpu::Sharding split =
      tpu::Sharding::split_to_logical_devices(w.images.shape(), {1, 2, 1, 1}, 2);
  std::vector<sh::ShardedTensor> inputs, outputs;
  sh::ShardedTensor x = sh::shard(w.images, split, devices);
  for (int l = 0; l < kLayers; ++l) {
    inputs.push_back(x);
    x = sh::relu(sh::conv2d(x, w.filters[static_cast<size_t>(l)], kSame));
    outputs.push_back(x);
  }
  std::vector<Tensor> grads(kLayers);
  // The upstream gradient, made shard-wise (as ones_like on one device).
  sh::ShardedTensor dy = sh::unary(
      x, [](const Tensor& t) { return strata::ones_like(t); }, "ones_like");
  for (int l = kLayers - 1; l >= 0; --l) {
    const size_t i = static_cast<size_t>(l);
    dy = sh::binary(dy, outputs[i], &strata::nn::relu_grad, "relu_grad");
    sh::Conv2DGradients g = sh::conv2d_gradients(inputs[i], w.filters[i], dy, kSame);
    grads[i] = g.filters;
    dy = g.input;
  }
  grads.push_back(sh::unshard(dy));
  return grads;
}

void BM_ConvStack_OneDevice(benchmark::State& state) {
  configure_devices();
  const Weights w(state.range(0));
  const strata::Device& device = strata::find_device(state.range(1) == 1 ? "CPU:0" : "CPU:2");
  strata::DeviceScope scope(device);
  for (auto _ : state) benchmark::DoNotOptimize(step_plain(w));
  state.SetLabel("1 device x " + std::to_string(device.num_threads()) + " thread(s)");
}
BENCHMARK(BM_ConvStack_OneDevice)
    ->Args({512, 1})
    ->Args({512, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_ConvStack_TwoLogicalDevices(benchmark::State& state) {
  configure_devices();
  const Weights w(state.range(0));
  const std::vector<const strata::Device*> devices = {&strata::find_device("CPU:0"),
                                                      &strata::find_device("CPU:1")};
  strata::DeviceScope scope(*devices[0]);
  for (auto _ : state) benchmark::DoNotOptimize(step_sharded(w, devices));
  state.SetLabel("split [1,2,1,1] over 2 logical devices x 1 thread");
}
BENCHMARK(BM_ConvStack_TwoLogicalDevices)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
