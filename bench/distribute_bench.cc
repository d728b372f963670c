// Distribution benchmarks: the overhead of strategy.run, and of the step
// profile on a step's gradient all-reduce.
//
//   build/bench/distribute_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "strata/core/config.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/distribute/step_profile.h"
#include "strata/ops/array_ops.h"

namespace sd = strata::distribute;

namespace {

void configure_devices(int n) {
  if (!strata::config::is_runtime_initialized()) {
    strata::config::set_logical_device_configuration(
        strata::config::list_physical_devices("CPU")[0],
        std::vector<strata::config::LogicalDeviceConfiguration>(n));
  }
}

// strategy.run of an empty function: the cost of posting a step to the
// replica threads and collecting it (target: <= 15 us for 2 replicas).
void BM_MirroredRunEmpty(benchmark::State& state) {
  configure_devices(4);
  std::vector<std::string> devices;
  devices.reserve(state.range(0));
  for (int i = 0; i < state.range(0); ++i) devices.push_back("CPU:" + std::to_string(i));
  sd::MirroredStrategy strategy(devices);
  for (auto _ : state) strategy.run([] {});
  state.SetLabel(std::to_string(state.range(0)) + " replicas");
}
BENCHMARK(BM_MirroredRunEmpty)->Arg(1)->Arg(2)->Arg(4)->UseRealTime();

// One step's gradient all-reduce of the MLP of `strata train` (784-512-256-10:
// 535,818 floats in six tensors) on 2 replicas, each inside the apply phase,
// without (0) and with (1) the step profile: the profile's cost is the
// barrier before the all-reduce and the phase bookkeeping.
void BM_MirroredMlpGradientAllReduce(benchmark::State& state) {
  configure_devices(4);
  sd::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  if (state.range(0) == 1) strategy.enable_step_profile();
  std::vector<strata::Tensor> grads;
  for (int64_t n : {784 * 512, 512, 512 * 256, 256, 256 * 10, 10})
    grads.push_back(strata::ones({n}));
  for (auto _ : state) {
    strategy.run([&grads] {
      const sd::ScopedStepPhase apply(sd::StepPhase::kApply);
      benchmark::DoNotOptimize(sd::get_replica_context()->all_reduce(sd::ReduceOp::SUM, grads));
    });
  }
  state.SetLabel(state.range(0) == 1 ? "step profile on" : "step profile off");
}
BENCHMARK(BM_MirroredMlpGradientAllReduce)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
