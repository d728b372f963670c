// ParameterServerStrategy benchmarks: a loopback cluster of real
// gRPC servers (2 ps, 1 or 2 workers) in this process's threads; the
// benchmark thread is the chief.
//
//   build/bench/ps_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//   build/bench/grpc_ps_peer        # the same loops over raw gRPC (bench/peers/grpc_ps_peer.cc)
//
// BM_PsClosureRoundTrip: schedule() of a registered no-op closure, then
// fetch() of its RemoteValue (one RunClosure RPC on a worker).
// BM_PsLinearSteps/workers: SGD steps of a linear model (w [3,1] on ps 0,
// b [] on ps 1, batches of 32 from a per-worker dataset): each step reads w
// and b from their ps and pushes both updates (4 variable RPCs from the
// worker); 64 steps are scheduled, then join(). items/s = steps/s.
#include <benchmark/benchmark.h>

#include <map>

#include "strata/distribute/ps/local_cluster.h"
#include "strata/strata.h"

namespace sd = strata::distribute;
namespace sps = strata::distribute::ps;
using strata::Tensor;
using strata::Variable;
using namespace std::chrono_literals;

namespace {

constexpr int kStepsPerIteration = 64;

strata::data::Dataset bench_linear_data(const sd::InputContext& ctx) {
  Tensor x = strata::random::uniform({1024, 3}, {.minval = -1, .maxval = 1, .seed = 3});
  Tensor y = strata::matmul(x, strata::constant(std::vector<float>{1.f, -2.f, 0.5f}, {3, 1})) +
             strata::constant(0.3f);
  return strata::data::Dataset::from_tensor_slices({x, y})
      .shard(ctx.num_input_pipelines(), ctx.input_pipeline_id())
      .repeat()
      .batch(32);
}
STRATA_REGISTER_DATASET_FUNCTION(bench_linear_data, bench_linear_data);

std::vector<Tensor> bench_noop(const sps::FunctionArgs&) { return {}; }
STRATA_REGISTER_FUNCTION(bench_noop, bench_noop);

std::vector<Tensor> bench_linear_step(const sps::FunctionArgs& args) {
  const Variable& w = args.variable(0);
  const Variable& b = args.variable(1);
  strata::data::Element batch = args.iterator(2).get_next();
  strata::GradientTape tape;
  Tensor loss = strata::reduce_mean(
      strata::square(strata::matmul(batch[0], w.value()) + b.value() - batch[1]));
  std::vector<Tensor> g = tape.gradient(loss, std::vector<Variable>{w, b});
  w.assign_sub(g[0] * strata::constant(0.05f));
  b.assign_sub(g[1] * strata::constant(0.05f));
  return {loss};
}
STRATA_REGISTER_FUNCTION(bench_linear_step, bench_linear_step);

using sps::LocalCluster;

void BM_PsClosureRoundTrip(benchmark::State& state) {
  LocalCluster cluster(1, 1);
  sd::ParameterServerStrategy strategy(cluster.chief);
  sd::ClusterCoordinator coordinator(strategy);
  coordinator.schedule("bench_noop").fetch();  // connect
  for (auto _ : state) benchmark::DoNotOptimize(coordinator.schedule("bench_noop").fetch());
}
BENCHMARK(BM_PsClosureRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_PsLinearSteps(benchmark::State& state) {
  LocalCluster cluster(static_cast<int>(state.range(0)), 2);
  sd::ParameterServerStrategy strategy(cluster.chief);
  Variable w, b;
  {
    auto scope = strategy.scope();
    w = Variable(strata::zeros({3, 1}), {.name = "w"});
    b = Variable(strata::zeros({}), {.name = "b"});
  }
  sd::ClusterCoordinator coordinator(strategy);
  auto iterator = coordinator.create_per_worker_dataset("bench_linear_data").iter();
  for (int i = 0; i < 2 * state.range(0); ++i)  // warm up: iterators, connections
    coordinator.schedule("bench_linear_step", {w, b, iterator});
  coordinator.join();
  for (auto _ : state) {
    for (int i = 0; i < kStepsPerIteration; ++i)
      coordinator.schedule("bench_linear_step", {w, b, iterator});
    coordinator.join();
  }
  state.SetItemsProcessed(state.iterations() * kStepsPerIteration);
  state.SetLabel(std::to_string(state.range(0)) + " workers, 2 ps");
}
BENCHMARK(BM_PsLinearSteps)
    ->ArgName("workers")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
