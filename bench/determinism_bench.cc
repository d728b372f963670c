// What determinism, the divergence check and the step profile cost, per training step of
// `strata train`'s MLP and CNN (tools/strata/models.cc, Adam 1e-3, sparse CCE
// from logits, global batch 128) under MirroredStrategy over 2 logical devices
// x 1 thread, with model->fit:
//   mode 0 default: TF's all-reduce order, no flag;
//   mode 1 op determinism: config::enable_op_determinism() alone;
//   mode 2 deterministic_reduction: 8 micro-batches of 16 per step, each its
//          own forward/backward, summed in a fixed pairwise tree (all-gather);
//   mode 3 check_divergence_every_n_steps = 100;
//   mode 4 check_divergence_every_n_steps = 1 (the cost of one check per step);
//   mode 5 strategy.enable_step_profile(): every phase of every replica timed,
//          and a barrier before each all-reduce to split wait from transfer;
// and BM_DivergenceCheckMLP, one check alone (an empty step with and without it).
// One iteration is one fit of kFitSteps steps (a fixed 10 iterations, so mode 3
// checks twice); `ms_per_step` is the wall time per step, `examples_per_second`
// the rate; `load1` the 1-minute load average when the run ended (the VM is
// shared). Data: one synthetic Fashion-MNIST-shaped batch repeated.
//
//   ninja -C build determinism_bench
//   build/bench/determinism_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "strata/keras/keras.h"
#include "strata/strata.h"
#include "tools/strata/models.h"

namespace strata {
namespace {

namespace keras = strata::keras;
namespace sd = strata::distribute;

constexpr int64_t kBatch = 128;
constexpr int64_t kFitSteps = 20;

void configure_two_devices() {
  static bool done = false;
  if (done) return;
  internal::reset_runtime_for_testing();
  config::set_intra_op_parallelism_threads(2);
  std::vector<config::LogicalDeviceConfiguration> logical(2);
  for (auto& l : logical) l.num_threads = 1;
  config::set_logical_device_configuration(config::list_physical_devices("CPU")[0], logical);
  done = true;
}

data::Dataset synthetic_batches() {
  const Tensor x = random::uniform({kBatch, 28, 28}, {.seed = 1});
  const Tensor y = cast(random::uniform_int({kBatch}, 0, 10, {.seed = 2}), DType::int64);
  return data::Dataset::from_tensors({x, y}).repeat();
}

void fit_loop(benchmark::State& state, const std::string& net) {
  configure_two_devices();
  const int mode = static_cast<int>(state.range(0));
  sd::CommunicationOptions options;
  options.deterministic_reduction = mode == 2;
  options.check_divergence_every_n_steps = mode == 3 ? 100 : mode == 4 ? 1 : 0;
  if (mode == 1) {
    config::enable_op_determinism();
  } else {
    config::disable_op_determinism();  // mode 2's strategy turns it on itself
  }
  sd::MirroredStrategy strategy({"CPU:0", "CPU:1"}, options);
  if (mode == 5) strategy.enable_step_profile();
  keras::ModelPtr model;
  {
    auto scope = strategy.scope();
    model = tools::build_model(net, 1);
    model->compile({.optimizer = keras::optimizers::Adam({.learning_rate = 1e-3}),
                    .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true})});
  }
  const data::Dataset ds = synthetic_batches();
  model->fit(ds, {.epochs = 1, .verbose = 0, .steps_per_epoch = 3});
  const auto begin = std::chrono::steady_clock::now();
  for (auto _ : state) model->fit(ds, {.epochs = 1, .verbose = 0, .steps_per_epoch = kFitSteps});
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  state.counters["ms_per_step"] = ms / static_cast<double>(state.iterations() * kFitSteps);
  state.counters["examples_per_second"] = benchmark::Counter(
      static_cast<double>(kBatch * kFitSteps), benchmark::Counter::kIsIterationInvariantRate);
  double load[1] = {0.0};
  if (::getloadavg(load, 1) == 1) state.counters["load1"] = load[0];
  config::disable_op_determinism();
}

// One divergence check alone: an empty strategy.run after the MLP and its Adam
// slots are built, with check_divergence_every_n_steps = 1 (arg 1) or never
// (arg 0, the cost of run itself). The difference is what one check costs.
void BM_DivergenceCheckMLP(benchmark::State& state) {
  configure_two_devices();
  config::disable_op_determinism();
  sd::MirroredStrategy strategy({"CPU:0", "CPU:1"},
                                {.check_divergence_every_n_steps = state.range(0)});
  keras::ModelPtr model;
  {
    auto scope = strategy.scope();
    model = tools::build_model("mlp", 1);
    model->compile({.optimizer = keras::optimizers::Adam({.learning_rate = 1e-3}),
                    .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true})});
  }
  model->fit(synthetic_batches(), {.epochs = 1, .verbose = 0, .steps_per_epoch = 1});
  for (auto _ : state) strategy.run([] {});
  double load[1] = {0.0};
  if (::getloadavg(load, 1) == 1) state.counters["load1"] = load[0];
}

void BM_MirroredFitMLP(benchmark::State& state) { fit_loop(state, "mlp"); }
void BM_MirroredFitCNN(benchmark::State& state) { fit_loop(state, "cnn"); }

BENCHMARK(BM_DivergenceCheckMLP)
    ->ArgName("every")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MirroredFitMLP)
    ->ArgName("mode")
    ->DenseRange(0, 5)
    ->Iterations(10)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MirroredFitCNN)
    ->ArgName("mode")
    ->DenseRange(0, 5)
    ->Iterations(10)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
