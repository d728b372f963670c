// Distribution benchmarks: the overhead of strategy.run.
//
//   build/bench/distribute_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "strata/core/config.h"
#include "strata/distribute/mirrored_strategy.h"

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

}  // namespace

BENCHMARK_MAIN();
