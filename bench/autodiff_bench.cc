// Autodiff benchmarks: backward/forward time ratio of an MLP (784-512-256-10)
// and a small CNN at batch 128, built directly from ops and Variables, and the
// tape's bookkeeping cost per recorded op.
//
//   cmake --build build --target autodiff_bench && build/bench/autodiff_bench

#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include "strata/autodiff/gradient_tape.h"
#include "strata/core/random.h"
#include "strata/core/variable.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/operators.h"
#include "strata/testing/gradient_check.h"

namespace strata {
namespace {

constexpr int64_t kBatch = 128;

Variable weight(const TensorShape& shape, uint64_t seed, double scale) {
  return Variable(cast(testing::random_uniform(shape, -scale, scale, seed), DType::float32));
}

struct Model {
  std::vector<Variable> vars;
  std::function<Tensor()> loss;
};

Tensor labels_of(int64_t classes) {
  std::vector<int64_t> v(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) v[i] = i % classes;
  return constant(v, {kBatch});
}

Tensor dense(const Tensor& x, const Variable& w, const Variable& b) {
  return matmul(x, w.value()) + b.value();
}

Model mlp() {
  Model m;
  m.vars = {weight({784, 512}, 1, 0.05), weight({512}, 2, 0.01),     weight({512, 256}, 3, 0.05),
            weight({256}, 4, 0.01),      weight({256, 10}, 5, 0.05), weight({10}, 6, 0.01)};
  const Tensor x = cast(testing::random_uniform({kBatch, 784}, 0, 1, 7), DType::float32);
  const Tensor y = labels_of(10);
  auto v = m.vars;
  m.loss = [v, x, y] {
    Tensor h = relu(dense(x, v[0], v[1]));
    h = relu(dense(h, v[2], v[3]));
    return reduce_mean(nn::sparse_softmax_cross_entropy_with_logits(y, dense(h, v[4], v[5])));
  };
  return m;
}

Model cnn() {
  Model m;
  m.vars = {weight({3, 3, 1, 32}, 11, 0.1),   weight({32}, 12, 0.01),
            weight({3, 3, 32, 64}, 13, 0.05), weight({64}, 14, 0.01),
            weight({1600, 128}, 15, 0.03),    weight({128}, 16, 0.01),
            weight({128, 10}, 17, 0.05),      weight({10}, 18, 0.01)};
  const Tensor x = cast(testing::random_uniform({kBatch, 28, 28, 1}, 0, 1, 19), DType::float32);
  const Tensor y = labels_of(10);
  auto v = m.vars;
  m.loss = [v, x, y] {
    Tensor h = relu(nn::conv2d(x, v[0].value()) + v[1].value());
    h = nn::max_pool2d(h, {2, 2}, {2, 2});
    h = relu(nn::conv2d(h, v[2].value()) + v[3].value());
    h = nn::max_pool2d(h, {2, 2}, {2, 2});
    h = reshape(h, {kBatch, -1});
    h = relu(dense(h, v[4], v[5]));
    return reduce_mean(nn::sparse_softmax_cross_entropy_with_logits(y, dense(h, v[6], v[7])));
  };
  return m;
}

// Times forward alone and forward + backward; reports backward / forward.
void run_ratio(benchmark::State& state, const Model& m) {
  using clock = std::chrono::steady_clock;
  double fwd = 0, bwd = 0;
  for (auto _ : state) {
    auto t0 = clock::now();
    benchmark::DoNotOptimize(m.loss());
    auto t1 = clock::now();
    GradientTape tape;
    const Tensor loss = m.loss();
    auto t2 = clock::now();
    benchmark::DoNotOptimize(tape.gradient(loss, m.vars));
    auto t3 = clock::now();
    fwd += std::chrono::duration<double>(t1 - t0).count();
    bwd += std::chrono::duration<double>(t3 - t2).count();
    (void)t2;
  }
  state.counters["forward_ms"] = 1e3 * fwd / state.iterations();
  state.counters["backward_ms"] = 1e3 * bwd / state.iterations();
  state.counters["backward_over_forward"] = bwd / fwd;
}

void BM_MlpBackwardOverForward(benchmark::State& state) { run_ratio(state, mlp()); }
void BM_CnnBackwardOverForward(benchmark::State& state) { run_ratio(state, cnn()); }
BENCHMARK(BM_MlpBackwardOverForward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CnnBackwardOverForward)->Unit(benchmark::kMillisecond)->UseRealTime();

// A chain of 256 scalar adds; with range(0) = 1 a tape watches the input, so
// every add is recorded. The difference of the per-op times is the tape's cost.
void BM_AddChain(benchmark::State& state) {
  const bool taped = state.range(0) == 1;
  const Tensor x = constant(1.f);
  const Tensor one = constant(1.f);
  constexpr int kOps = 256;
  for (auto _ : state) {
    std::optional<GradientTape> tape;
    if (taped) {
      tape.emplace();
      tape->watch(x);
    }
    Tensor y = x;
    for (int i = 0; i < kOps; ++i) y = add(y, one);
    benchmark::DoNotOptimize(y);
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kOps,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_AddChain)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
