// Kernel benchmarks against peers in the same run:
//   - GEMM: strata::matmul vs a direct cblas_sgemm call (same OpenBLAS, same
//     thread count) at 1024^3, 512^3 and the MLP's shapes (forward and backward);
//   - element-wise add of two 64 MiB float32 tensors (and the row-broadcast
//     bias-add shape) vs memcpy of 64 MiB, with page faults per iteration;
//   - softmax rows;
//   - conv2d forward and forward + both backprops of the CNN's layers at batch
//     128 (PyTorch's figures come from bench/peers/torch_conv.py);
//   - the processor's price of denormal arithmetic: Adam's moment decay
//     m = 0.999 m + 0.001 g^2 over 64 Ki floats, with denormal or normal
//     moments, with denormals flushed (ScopedFlushDenormal) or not: what the
//     runtime's flushing saves on this machine;
//   - where splitting work over a device's 2 threads starts to pay: an
//     element-wise add of n floats and a [128, k] x [k, k] GEMM, each run
//     whole on the calling thread or cut in two halves handed to the pool as
//     the kernels do (the crossovers set kElementwiseGrain and matmul's
//     threshold in strata/kernels);
//   - the core's float32 multiply-add peak: independent FMA chains on
//     registers, no memory traffic, the ceiling no GEMM (OpenBLAS's, oneDNN's
//     under PyTorch, Strata's) can pass; training_bench's gemm_gflops and
//     PyTorch's rate over the same GEMMs are read against it.
// The last argument of every benchmark is the intra-op thread count.
//
//   ninja -C build kernels_bench
//   build/bench/kernels_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <cblas.h>

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/process_clock.h"
#include "strata/base/denormal.h"
#include "strata/core/config.h"
#include "strata/core/device.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/testing/gradient_check.h"

namespace strata {
namespace {

using bench::minor_faults;
using bench::process_cpu_seconds;

// The runtime's thread count is fixed once it starts; benchmarks with another
// count restart it (tensors made before stay valid).
void use_threads(int threads) {
  static int current = -1;
  if (current == threads) return;
  internal::reset_runtime_for_testing();
  config::set_intra_op_parallelism_threads(threads);
  current = threads;
}

Tensor random_f32(const TensorShape& shape, uint64_t seed) {
  return cast(testing::random_uniform(shape, -1, 1, seed), DType::float32);
}

// --- GEMM: args m, k, n, transpose_a, threads, transpose_b ---

void BM_StrataMatMul(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(5) != 0;
  use_threads(static_cast<int>(state.range(4)));
  const Tensor a = random_f32(ta ? TensorShape{k, m} : TensorShape{m, k}, 1);
  const Tensor b = random_f32(tb ? TensorShape{n, k} : TensorShape{k, n}, 2);
  for (auto _ : state)
    benchmark::DoNotOptimize(matmul(a, b, {.transpose_a = ta, .transpose_b = tb}));
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(m * k * n),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

// The peer: one cblas_sgemm into a preallocated output, OpenBLAS's own threads.
void BM_CblasSgemm(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(5) != 0;
  const std::vector<float> a =
      random_f32(ta ? TensorShape{k, m} : TensorShape{m, k}, 1).to_vector<float>();
  const std::vector<float> b =
      random_f32(tb ? TensorShape{n, k} : TensorShape{k, n}, 2).to_vector<float>();
  std::vector<float> c(static_cast<size_t>(m * n));
  openblas_set_num_threads(static_cast<int>(state.range(4)));
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, 1.f, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(1);  // Strata's setting (kernels/internal/gemm.h)
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(m * k * n),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

void gemm_args(benchmark::internal::Benchmark* b) {
  // {m, k, n, transpose_a, transpose_b}: 1024^3 and 512^3; the MLP
  // 784-512-256-10 at batch 128; its first layer's backward GEMMs: the weight
  // gradient x^T * g (x: [128, 784], g: [128, 512]) and the input
  // gradient g * W^T ([128, 512] x [784, 512]^T).
  const std::vector<std::vector<int64_t>> shapes = {
      {1024, 1024, 1024, 0, 0}, {512, 512, 512, 0, 0}, {128, 784, 512, 0, 0}, {128, 512, 256, 0, 0},
      {128, 256, 10, 0, 0},     {784, 128, 512, 1, 0}, {128, 512, 784, 0, 1}};
  for (int threads : {1, 2})
    for (const auto& s : shapes) b->Args({s[0], s[1], s[2], s[3], threads, s[4]});
  b->ArgNames({"m", "k", "n", "ta", "threads", "tb"});
}
BENCHMARK(BM_StrataMatMul)->Apply(gemm_args)->UseRealTime();
BENCHMARK(BM_CblasSgemm)->Apply(gemm_args)->UseRealTime();

// --- splitting crossover: args kind (0: add, 1: GEMM), size, split ---
//
// kind 0: c = a + b over `size` floats; kind 1: C[128, size] = A[128, size] x
// B[size, size] (128 * size^2 multiply-adds), cut by columns as matmul does.
// split 0 runs the whole on the calling thread, split 1 hands two halves to
// the device pool's parallel_for (the caller takes one, a worker the other).

void BM_SplitCrossover(benchmark::State& state) {
  const bool gemm = state.range(0) == 1;
  const int64_t size = state.range(1);
  const bool split = state.range(2) == 1;
  use_threads(2);
  const int64_t m = 128;
  const int64_t a_len = gemm ? m * size : size;
  const int64_t b_len = gemm ? size * size : size;
  std::vector<float> a(static_cast<size_t>(a_len), 0.5f), b(static_cast<size_t>(b_len), 0.25f);
  std::vector<float> c(static_cast<size_t>(gemm ? m * size : size));
  const auto part = [&](int64_t s, int64_t e) {
    if (gemm) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, e - s, size, 1.f, a.data(), size,
                  b.data() + s, size, 0.f, c.data() + s, size);
    } else {
      for (int64_t i = s; i < e; ++i) c[i] = a[i] + b[i];
    }
  };
  openblas_set_num_threads(1);
  ThreadPool& pool = current_device().thread_pool();
  for (auto _ : state) {
    if (split) {
      pool.parallel_for(2, 1, [&](int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) part(size * h / 2, size * (h + 1) / 2);
      });
    } else {
      part(0, size);
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_SplitCrossover)
    ->ArgNames({"gemm", "size", "split"})
    ->ArgsProduct({{0}, {1024, 2048, 4096, 8192, 16384, 32768, 65536, 262144}, {0, 1}})
    ->ArgsProduct({{1}, {16, 32, 48, 64, 96, 128, 192}, {0, 1}})
    ->UseRealTime();

// --- element-wise: 64 MiB float32 operands ---
//
// The bandwidth-bound time of an add is what memcpy's measured bandwidth gives
// for the add's traffic: memcpy of 64 MiB moves 128 MiB (read + write), the
// add 192 MiB (two reads, one write), so bound = 1.5 x memcpy's time and the
// target ratio bound / add_time >= 0.7 is add's bytes_per_second >= 0.7 x
// memcpy's (both count the bytes each moves). faults_per_it: minor page
// faults per iteration (getrusage), i.e. fresh pages the output touched.

constexpr int64_t kElems = int64_t{64} << 20 >> 2;  // 16 Mi floats = 64 MiB

void set_faults(benchmark::State& state, int64_t start) {
  state.counters["faults_per_it"] = static_cast<double>(minor_faults() - start) /
                                    static_cast<double>(std::max<int64_t>(1, state.iterations()));
}

void BM_Memcpy64MiB(benchmark::State& state) {
  std::vector<float> src(kElems, 1.f), dst(kElems);
  const int64_t faults = minor_faults();
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kElems * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  set_faults(state, faults);
  state.SetBytesProcessed(state.iterations() * 2 * kElems * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_Memcpy64MiB)->UseRealTime();

// Same-shape add (arg 0 = 0) or a [16384, 1024] + [1024] row broadcast (arg 0 = 1).
void BM_Add64MiB(benchmark::State& state) {
  use_threads(static_cast<int>(state.range(1)));
  const bool row = state.range(0) != 0;
  const Tensor a = random_f32({16384, 1024}, 3);
  const Tensor b = row ? random_f32({1024}, 4) : random_f32({16384, 1024}, 4);
  benchmark::DoNotOptimize(add(a, b));  // the first output's pages are faulted in once
  const int64_t faults = minor_faults();
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
  set_faults(state, faults);
  state.SetBytesProcessed(state.iterations() * (row ? 2 : 3) * kElems *
                          static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_Add64MiB)
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->ArgNames({"row_broadcast", "threads"})
    ->UseRealTime();

// --- multiply-add peak: args threads ---

// kChains independent accumulators hide the FMA latency (4 cycles on the
// cores measured, 2 pipes: at least 8 chains in flight); every iteration is
// kChains FMAs of one vector width.
constexpr int kChains = 16;
constexpr int64_t kFmaIterations = int64_t{1} << 22;

__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iterations, float seed) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(seed + float(c));
  const __m512 a = _mm512_set1_ps(0.999999f);
  const __m512 b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (auto& x : acc) x = _mm512_fmadd_ps(x, a, b);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0;
  for (float l : lanes) total += l;
  return total;
}

__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iterations, float seed) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(seed + float(c));
  const __m256 a = _mm256_set1_ps(0.999999f);
  const __m256 b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (auto& x : acc) x = _mm256_fmadd_ps(x, a, b);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0;
  for (float l : lanes) total += l;
  return total;
}

// float32 lanes of the widest FMA the processor has (0: none).
int fma_lanes() {
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
  return 0;
}

// GFLOP/s of all `threads` threads together (an FMA is 2 floating-point
// operations), each running the same chains for the same count. The time is
// the process's CPU time over `threads`: what each thread took while it had a
// core, so that a time slice lost to another process on this shared machine
// does not lower the ceiling.
void BM_FmaPeak(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int lanes = fma_lanes();
  if (lanes == 0) {
    state.SkipWithError("no AVX2+FMA or AVX-512 on this processor");
    return;
  }
  std::vector<float> sinks(static_cast<size_t>(threads));
  auto run = [&](int t) {
    const float seed = 1.f + float(t);
    sinks[static_cast<size_t>(t)] = lanes == 16 ? fma_chains_avx512(kFmaIterations, seed)
                                                : fma_chains_avx2(kFmaIterations, seed);
  };
  for (auto _ : state) {
    const double start = process_cpu_seconds();
    std::vector<std::thread> helpers;
    for (int t = 1; t < threads; ++t) helpers.emplace_back(run, t);
    run(0);
    for (auto& h : helpers) h.join();
    state.SetIterationTime((process_cpu_seconds() - start) / threads);
    benchmark::DoNotOptimize(sinks.data());
  }
  const double flops_per_iteration =
      2.0 * double(kChains) * double(lanes) * double(kFmaIterations) * double(threads);
  state.counters["gflops"] =
      benchmark::Counter(flops_per_iteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["lanes"] = lanes;
}
BENCHMARK(BM_FmaPeak)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// --- softmax over rows: args rows, cols, threads ---

void BM_Softmax(benchmark::State& state) {
  use_threads(static_cast<int>(state.range(2)));
  const Tensor x = random_f32({state.range(0), state.range(1)}, 5);
  for (auto _ : state) benchmark::DoNotOptimize(softmax(x));
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_Softmax)
    ->ArgsProduct({{128}, {10}, {1, 2}})
    ->ArgsProduct({{4096}, {1000}, {1, 2}})
    ->ArgNames({"rows", "cols", "threads"})
    ->UseRealTime();

// --- conv2d: the CNN's layers at batch 128, VALID 3x3 (Keras' default) ---

struct ConvLayer {
  TensorShape input, filter;
};
ConvLayer conv_layer(int64_t which) {
  if (which == 0) return {{128, 28, 28, 1}, {3, 3, 1, 32}};
  return {{128, 14, 14, 32}, {3, 3, 32, 64}};
}

void BM_Conv2DForward(benchmark::State& state) {
  use_threads(static_cast<int>(state.range(1)));
  const ConvLayer l = conv_layer(state.range(0));
  const Tensor x = random_f32(l.input, 6), f = random_f32(l.filter, 7);
  for (auto _ : state) benchmark::DoNotOptimize(nn::conv2d(x, f));
}

// Forward plus both backprops (what one training step of the layer computes).
void BM_Conv2DForwardBackward(benchmark::State& state) {
  use_threads(static_cast<int>(state.range(1)));
  const ConvLayer l = conv_layer(state.range(0));
  const Tensor x = random_f32(l.input, 6), f = random_f32(l.filter, 7);
  const Tensor y = nn::conv2d(x, f);
  const Tensor dy = random_f32(y.shape(), 8);
  for (auto _ : state) {
    benchmark::DoNotOptimize(nn::conv2d(x, f));
    benchmark::DoNotOptimize(nn::conv2d_backprop_input(l.input, f, dy));
    benchmark::DoNotOptimize(nn::conv2d_backprop_filter(x, l.filter, dy));
  }
}
// One backprop alone (arg 2: 0 = input, 1 = filter).
void BM_Conv2DBackprop(benchmark::State& state) {
  use_threads(static_cast<int>(state.range(2)));
  const ConvLayer l = conv_layer(state.range(0));
  const Tensor x = random_f32(l.input, 6), f = random_f32(l.filter, 7);
  const Tensor dy = random_f32(nn::conv2d(x, f).shape(), 8);
  for (auto _ : state) {
    if (state.range(1) == 0) {
      benchmark::DoNotOptimize(nn::conv2d_backprop_input(l.input, f, dy));
    } else {
      benchmark::DoNotOptimize(nn::conv2d_backprop_filter(x, l.filter, dy));
    }
  }
}
BENCHMARK(BM_Conv2DBackprop)
    ->ArgsProduct({{0, 1}, {0, 1}, {1, 2}})
    ->ArgNames({"layer", "filter", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Conv2DForward)
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->ArgNames({"layer", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Conv2DForwardBackward)
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->ArgNames({"layer", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Pools of the CNN on conv1's output, 2x2 windows, stride 2 (arg 0: 0 = max
// forward, 1 = max gradient, 2 = avg forward, 3 = avg gradient).
void BM_Pool(benchmark::State& state) {
  use_threads(static_cast<int>(state.range(1)));
  const Tensor x = random_f32({128, 26, 26, 32}, 9);
  const Tensor y = nn::max_pool2d(x, {2, 2}, {2, 2});
  const Tensor dy = random_f32(y.shape(), 10);
  for (auto _ : state) {
    switch (state.range(0)) {
      case 0: benchmark::DoNotOptimize(nn::max_pool2d(x, {2, 2}, {2, 2})); break;
      case 1: benchmark::DoNotOptimize(nn::max_pool2d_grad(x, y, dy, {2, 2}, {2, 2})); break;
      case 2: benchmark::DoNotOptimize(nn::avg_pool2d(x, {2, 2}, {2, 2})); break;
      default: benchmark::DoNotOptimize(nn::avg_pool2d_grad(x.shape(), dy, {2, 2}, {2, 2})); break;
    }
  }
}
BENCHMARK(BM_Pool)
    ->ArgsProduct({{0, 1, 2, 3}, {1, 2}})
    ->ArgNames({"kind", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args: flush (0: IEEE mode on this thread, 1: FTZ + DAZ), denormal moments (0/1).
void BM_DenormalMomentDecay(benchmark::State& state) {
  const bool flush = state.range(0) != 0;
  const DenormalState previous = get_denormal_state();
  set_denormal_state({.flush_to_zero = flush, .denormals_are_zero = flush});
  constexpr size_t kN = size_t{1} << 16;
  // 1e-39 is below float32's smallest normal (1.18e-38); 0.999^k keeps it there.
  std::vector<float> m(kN, state.range(1) != 0 ? 1e-39f : 1e-3f);
  const std::vector<float> g(kN, 1e-30f);  // its square is 0 or a denormal
  for (auto _ : state) {
    for (size_t i = 0; i < kN; ++i) m[i] = 0.999f * m[i] + 0.001f * g[i] * g[i];
    benchmark::DoNotOptimize(m.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kN));
  set_denormal_state(previous);
}
BENCHMARK(BM_DenormalMomentDecay)->ArgNames({"flush", "denormal"})->ArgsProduct({{0, 1}, {0, 1}});

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
