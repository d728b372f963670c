// Input-pipeline throughput: shuffle(10000).batch(128).prefetch over in-memory
// Fashion-MNIST-shaped data (60000 x 784 + int64 labels; synthetic values).
//
//   build/bench/data_bench --benchmark_filter=Pipeline
#include <benchmark/benchmark.h>

#include <cstring>

#include "strata/data/dataset.h"

namespace {

using strata::Tensor;
using strata::data::AUTOTUNE;
using strata::data::Dataset;
using strata::data::Element;

constexpr int64_t kExamples = 60000;
constexpr int64_t kPixels = 784;

Element fashion_mnist_like(strata::DType image_dtype) {
  Tensor images = Tensor::allocate(image_dtype, {kExamples, kPixels});
  Tensor labels = Tensor::allocate(strata::int64, {kExamples});
  if (image_dtype == strata::uint8) {
    uint8_t* p = images.mutable_data<uint8_t>();
    for (int64_t i = 0; i < kExamples * kPixels; ++i) p[i] = static_cast<uint8_t>(i * 31);
  } else {
    float* p = images.mutable_data<float>();
    for (int64_t i = 0; i < kExamples * kPixels; ++i) p[i] = static_cast<float>(i % 255) / 255.f;
  }
  int64_t* l = labels.mutable_data<int64_t>();
  for (int64_t i = 0; i < kExamples; ++i) l[i] = i % 10;
  return {images, labels};
}

// One epoch per iteration; reports examples/s.
void run_pipeline(benchmark::State& state, strata::DType dtype) {
  const Element data = fashion_mnist_like(dtype);
  auto ds =
      Dataset::from_tensor_slices(data).shuffle(10000, {.seed = 1}).batch(128).prefetch(AUTOTUNE);
  int64_t examples = 0;
  for (auto _ : state) {
    for (const Element& e : ds) {
      examples += e[0].shape().dim(0);
      benchmark::DoNotOptimize(e[0].raw_data());
    }
  }
  state.counters["examples/s"] =
      benchmark::Counter(static_cast<double>(examples), benchmark::Counter::kIsRate);
}

void BM_PipelineUint8(benchmark::State& state) { run_pipeline(state, strata::uint8); }
void BM_PipelineFloat32(benchmark::State& state) { run_pipeline(state, strata::float32); }
BENCHMARK(BM_PipelineUint8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PipelineFloat32)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same pipeline with a parallel map normalising uint8 images to float32.
void BM_PipelineParallelMap(benchmark::State& state) {
  const Element data = fashion_mnist_like(strata::uint8);
  auto ds = Dataset::from_tensor_slices(data)
                .shuffle(10000, {.seed = 1})
                .batch(128)
                .map(
                    [](const Element& e) {
                      Tensor f = Tensor::allocate(strata::float32, e[0].shape());
                      const uint8_t* s = e[0].data<uint8_t>();
                      float* d = f.mutable_data<float>();
                      for (int64_t i = 0; i < e[0].num_elements(); ++i) d[i] = s[i] * (1.f / 255.f);
                      return Element{f, e[1]};
                    },
                    {.num_parallel_calls = AUTOTUNE})
                .prefetch(AUTOTUNE);
  int64_t examples = 0;
  for (auto _ : state) {
    for (const Element& e : ds) examples += e[0].shape().dim(0);
  }
  state.counters["examples/s"] =
      benchmark::Counter(static_cast<double>(examples), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PipelineParallelMap)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
