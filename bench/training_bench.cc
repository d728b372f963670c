// Training-throughput benchmarks, examples/s at batch 128:
//   - the MLP 784-512-256-10 (ReLU, Adam 1e-3, sparse CCE from logits) and the
//     CNN (Conv 32 3x3 ReLU, MaxPool 2, Conv 64 3x3 ReLU, MaxPool 2, Dense 128
//     ReLU, Dense 10; Adam 1e-3) on one device with 1 or 2 intra-op threads,
//     with a custom step (GradientTape + apply_gradients) and with model->fit;
//   - the MLP under MirroredStrategy over 2 logical devices x 1 thread each
//     (custom step inside strategy.run on a distributed dataset, and fit), to
//     compare with one device x 2 threads.
// Peers (same model, batch and thread count): bench/peers/torch_train.py
// (PyTorch, one process) and bench/peers/torch_ddp.py (PyTorch DDP, 2 processes
// x 1 thread, gloo over 127.0.0.1).
//
// Data: synthetic in memory, the same batch every step, fed through a dataset
// (Dataset::from_tensors({x, y}).repeat()) so that every configuration pays its
// input cost (for MirroredStrategy: the split of the global batch per replica).
// The first steps (building the variables and the optimizer's slots, warming the
// allocator) run before timing. One benchmark iteration is one training step
// (custom loop) or one fit of kFitSteps steps; `examples_per_second` is the
// wall-clock rate; `process_cpu_ms_per_step` the CPU time of the whole process
// per 128 examples; `load1` is the 1-minute load average when the run ended
// (the VM is shared: read every figure with it). The custom-loop benchmarks
// also split replica 0's step into forward (+ loss), gradient and apply
// (apply_gradients, with the all-reduce under a strategy): `<phase>_ms` wall,
// `<phase>_cpu_ms` that thread's CPU time, per step.
//
// Beside examples/s every benchmark prints its floor, measured in the same
// process right after its timed loop: `floor_examples_per_second` is the rate
// if a step cost only its GEMMs, called directly through cblas_sgemm with
// OpenBLAS running the benchmark's total thread count (devices x threads; the
// shapes are tools/strata/gemm_floor.h's, over the global batch), and
// `floor_ratio` = examples_per_second / floor_examples_per_second.
// `gemm_gflops` is the rate at which the step does those GEMMs' arithmetic
// (2 m n k per product, per step, times steps per second): against
// kernels_bench's BM_FmaPeak (the cores' multiply-add ceiling) it says how
// far any implementation of the same step could still go.
//
// Allocations: `allocs_per_step` counts every heap allocation of the process
// (the malloc family, which operator new calls too, on every thread:
// strata/testing/heap_allocation_counter.h, compiled in) per step
// of the timed loop, i.e. from step kWarmupSteps + 1 on; `buffer_allocs_per_step`
// the blocks among them that CachingAllocator::global() took from the system
// rather than from its cache (tensor buffers, and through PoolAllocator tensor
// handles, control blocks and the tape's records).
//
//   ninja -C build training_bench
//   build/bench/training_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <time.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/process_clock.h"
#include "strata/core/allocator.h"
#include "strata/keras/keras.h"
#include "strata/strata.h"
#include "strata/testing/heap_allocation_counter.h"
#include "tools/strata/gemm_floor.h"

namespace strata {
namespace {

namespace keras = strata::keras;
namespace sd = strata::distribute;
using bench::minor_faults;
using bench::process_cpu_seconds;
using bench::thread_cpu_seconds;
using bench::wall_seconds;

constexpr int64_t kBatch = 128;
constexpr int kWarmupSteps = 3;
constexpr int64_t kFitSteps = 20;

// The runtime's configuration is fixed once it starts; every benchmark
// restarts it with `devices` logical CPU devices of `threads_per_device`
// intra-op threads each (devices == 1: one CPU device with that many threads).
void configure(int devices, int threads_per_device) {
  static int current_devices = -1, current_threads = -1;
  if (current_devices == devices && current_threads == threads_per_device) return;
  internal::reset_runtime_for_testing();
  config::set_intra_op_parallelism_threads(devices * threads_per_device);
  if (devices > 1) {
    std::vector<config::LogicalDeviceConfiguration> logical(static_cast<size_t>(devices));
    for (auto& l : logical) l.num_threads = threads_per_device;
    config::set_logical_device_configuration(config::list_physical_devices("CPU")[0], logical);
  }
  current_devices = devices;
  current_threads = threads_per_device;
}

enum class Net { MLP, CNN };

std::shared_ptr<keras::SequentialModel> make_model(Net net) {
  namespace L = keras::layers;
  if (net == Net::MLP) {
    return keras::Sequential({L::Dense(512, {.activation = "relu", .input_shape = {784}}),
                              L::Dense(256, {.activation = "relu"}), L::Dense(10)});
  }
  return keras::Sequential(
      {L::Conv2D(32, {3, 3}, {.activation = "relu", .input_shape = {28, 28, 1}}),
       L::MaxPooling2D({2, 2}), L::Conv2D(64, {3, 3}, {.activation = "relu"}),
       L::MaxPooling2D({2, 2}), L::Flatten(), L::Dense(128, {.activation = "relu"}), L::Dense(10)});
}

// One global batch of Fashion-MNIST-shaped synthetic data, repeated forever.
data::Dataset synthetic_batches(Net net) {
  const TensorShape shape =
      net == Net::MLP ? TensorShape{kBatch, 784} : TensorShape{kBatch, 28, 28, 1};
  const Tensor x = random::uniform(shape, {.seed = 1});
  const Tensor y = cast(random::uniform_int({kBatch}, 0, 10, {.seed = 2}), DType::int64);
  return data::Dataset::from_tensors({x, y}).repeat();
}

struct Stamp {
  double wall = 0, cpu = 0;
  static Stamp now() { return {wall_seconds(), thread_cpu_seconds()}; }
};

// Per-phase sums over the timed steps, reported as ms per step.
struct Phases {
  int64_t steps = 0;
  double wall[3] = {0, 0, 0}, cpu[3] = {0, 0, 0};
  void add(const Stamp& a, const Stamp& b, const Stamp& c, const Stamp& d) {
    const Stamp* s[4] = {&a, &b, &c, &d};
    for (int i = 0; i < 3; ++i) {
      wall[i] += s[i + 1]->wall - s[i]->wall;
      cpu[i] += s[i + 1]->cpu - s[i]->cpu;
    }
    ++steps;
  }
  void report(benchmark::State& state) const {
    if (steps == 0) return;
    const char* names[3] = {"forward", "gradient", "apply"};
    for (int i = 0; i < 3; ++i) {
      state.counters[std::string(names[i]) + "_ms"] = 1e3 * wall[i] / static_cast<double>(steps);
      state.counters[std::string(names[i]) + "_cpu_ms"] = 1e3 * cpu[i] / static_cast<double>(steps);
    }
  }
};

// Process CPU time, wall time, page faults and allocations when the timed loop began.
struct ProcessStart {
  double cpu = 0, wall = 0;
  int64_t faults = 0, allocations = 0, buffer_allocations = 0;
  static ProcessStart now() {
    return {process_cpu_seconds(), wall_seconds(), minor_faults(), testing::heap_allocations(),
            CachingAllocator::global().stats().system_allocations};
  }
};

const char* model_name(Net net) { return net == Net::MLP ? "mlp" : "cnn"; }

// Right after a timed loop of `state`: the counters described at the top.
void report(benchmark::State& state, int64_t examples_per_iteration, const ProcessStart& start,
            Net net, int total_threads) {
  const double cpu = process_cpu_seconds() - start.cpu;
  const double wall = wall_seconds() - start.wall;
  const auto steps = static_cast<double>(state.iterations()) *
                     static_cast<double>(examples_per_iteration) / static_cast<double>(kBatch);
  if (start.allocations >= 0) {
    state.counters["allocs_per_step"] =
        static_cast<double>(testing::heap_allocations() - start.allocations) / steps;
  }
  state.counters["buffer_allocs_per_step"] =
      static_cast<double>(CachingAllocator::global().stats().system_allocations -
                          start.buffer_allocations) /
      steps;
  const double rate = static_cast<double>(state.iterations() * examples_per_iteration) / wall;
  const std::vector<tools::GemmShape> gemms = tools::step_gemms(model_name(net), kBatch);
  double step_flops = 0;
  for (const tools::GemmShape& g : gemms) step_flops += 2.0 * double(g.m * g.n * g.k);
  state.counters["gemm_gflops"] = rate / static_cast<double>(kBatch) * step_flops * 1e-9;
  const double floor_s = tools::gemm_floor_seconds(gemms, total_threads);
  const double floor_rate = static_cast<double>(kBatch) / floor_s;
  state.counters["floor_examples_per_second"] = floor_rate;
  state.counters["floor_ratio"] = rate / floor_rate;
  // Minor page faults per 128 examples (one step).
  state.counters["faults_per_step"] =
      static_cast<double>(minor_faults() - start.faults) / static_cast<double>(state.iterations()) *
      static_cast<double>(kBatch) / static_cast<double>(examples_per_iteration);
  state.counters["examples_per_second"] = benchmark::Counter(
      static_cast<double>(examples_per_iteration), benchmark::Counter::kIsIterationInvariantRate);
  // Process CPU milliseconds per 128 examples (one step).
  state.counters["process_cpu_ms_per_step"] = 1e3 * cpu / static_cast<double>(state.iterations()) *
                                              static_cast<double>(kBatch) /
                                              static_cast<double>(examples_per_iteration);
  double load[1] = {0.0};
  if (::getloadavg(load, 1) == 1) state.counters["load1"] = load[0];
}

// Custom training step: args threads (one device) or, with `mirrored`,
// 2 logical devices x 1 thread under MirroredStrategy (`shard_weight_update`:
// CommunicationOptions.shard_weight_update).
void custom_loop(benchmark::State& state, Net net, bool mirrored,
                 bool shard_weight_update = false) {
  if (mirrored) {
    configure(2, 1);
  } else {
    configure(1, static_cast<int>(state.range(0)));
  }
  std::optional<sd::MirroredStrategy> strategy;
  if (mirrored) {
    strategy.emplace(std::vector<std::string>{"CPU:0", "CPU:1"},
                     sd::CommunicationOptions{.shard_weight_update = shard_weight_update});
  }
  std::shared_ptr<keras::SequentialModel> model;
  std::shared_ptr<keras::optimizers::AdamOptimizer> optimizer;
  {
    std::optional<sd::StrategyScope> scope;
    if (strategy) scope.emplace(*strategy);
    model = make_model(net);
    optimizer = keras::optimizers::Adam({.learning_rate = 1e-3});
    optimizer->build(model->trainable_variables());
  }
  // Where replica 0's step time goes (wall and its thread's CPU): forward +
  // loss under the tape, tape.gradient, apply_gradients (with the all-reduce
  // under MirroredStrategy).
  Phases phases;
  bool timing = false;
  auto step = [&](const data::Element& batch) {
    sd::ReplicaContext* ctx = sd::get_replica_context();
    const bool record = timing && (ctx == nullptr || ctx->replica_id_in_sync_group() == 0);
    const Stamp t0 = Stamp::now();
    Stamp t1;
    std::vector<Tensor> grads;
    {  // the tape ends before apply_gradients, as TF's `with GradientTape()` block
      GradientTape tape;
      Tensor logits = (*model)(batch[0], /*training=*/true);
      Tensor per_example =
          keras::losses::sparse_categorical_crossentropy(batch[1], logits, {.from_logits = true});
      Tensor loss = nn::compute_average_loss(per_example, {.global_batch_size = kBatch});
      t1 = Stamp::now();
      grads = tape.gradient(loss, model->trainable_variables());
    }
    const Stamp t2 = Stamp::now();
    optimizer->apply_gradients(zip(grads, model->trainable_variables()));
    if (record) phases.add(t0, t1, t2, Stamp::now());
  };
  if (strategy) {
    sd::DistributedDataset dd = strategy->experimental_distribute_dataset(synthetic_batches(net));
    sd::DistributedIterator it = dd.iter();
    for (int i = 0; i < kWarmupSteps; ++i) strategy->run(step, it.get_next());
    timing = true;
    const ProcessStart start = ProcessStart::now();
    for (auto _ : state) strategy->run(step, it.get_next());
    report(state, kBatch, start, net, 2);
    // What each replica's copies of Adam's slots store after the steps
    // (whole, or its block under shard_weight_update).
    state.counters["slot_bytes_replica0"] = double(optimizer->slot_bytes(0));
    state.counters["slot_bytes_replica1"] = double(optimizer->slot_bytes(1));
  } else {
    data::Iterator it = synthetic_batches(net).iter();
    for (int i = 0; i < kWarmupSteps; ++i) step(it.get_next());
    timing = true;
    const ProcessStart start = ProcessStart::now();
    for (auto _ : state) step(it.get_next());
    report(state, kBatch, start, net, static_cast<int>(state.range(0)));
  }
  phases.report(state);
}

// model->fit(dataset, steps_per_epoch = kFitSteps) per iteration.
void fit_loop(benchmark::State& state, Net net, bool mirrored) {
  if (mirrored) {
    configure(2, 1);
  } else {
    configure(1, static_cast<int>(state.range(0)));
  }
  std::optional<sd::MirroredStrategy> strategy;
  if (mirrored) strategy.emplace(std::vector<std::string>{"CPU:0", "CPU:1"});
  std::shared_ptr<keras::SequentialModel> model;
  {
    std::optional<sd::StrategyScope> scope;
    if (strategy) scope.emplace(*strategy);
    model = make_model(net);
    model->compile({.optimizer = keras::optimizers::Adam({.learning_rate = 1e-3}),
                    .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true})});
  }
  const data::Dataset ds = synthetic_batches(net);
  model->fit(ds, {.epochs = 1, .verbose = 0, .steps_per_epoch = kWarmupSteps});
  const ProcessStart start = ProcessStart::now();
  for (auto _ : state) model->fit(ds, {.epochs = 1, .verbose = 0, .steps_per_epoch = kFitSteps});
  report(state, kBatch * kFitSteps, start, net, mirrored ? 2 : static_cast<int>(state.range(0)));
}

void BM_TrainMLP(benchmark::State& state) { custom_loop(state, Net::MLP, false); }
void BM_TrainCNN(benchmark::State& state) { custom_loop(state, Net::CNN, false); }
void BM_FitMLP(benchmark::State& state) { fit_loop(state, Net::MLP, false); }
void BM_FitCNN(benchmark::State& state) { fit_loop(state, Net::CNN, false); }
void BM_MirroredTrainMLP(benchmark::State& state) { custom_loop(state, Net::MLP, true); }
void BM_MirroredFitMLP(benchmark::State& state) { fit_loop(state, Net::MLP, true); }
void BM_MirroredShardedTrainMLP(benchmark::State& state) {
  custom_loop(state, Net::MLP, true, /*shard_weight_update=*/true);
}

BENCHMARK(BM_TrainMLP)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FitMLP)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(
    benchmark::kMillisecond);
BENCHMARK(BM_MirroredTrainMLP)
    ->Name("BM_MirroredTrainMLP/devices:2/threads:1")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MirroredShardedTrainMLP)
    ->Name("BM_MirroredShardedTrainMLP/devices:2/threads:1")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MirroredFitMLP)
    ->Name("BM_MirroredFitMLP/devices:2/threads:1")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainCNN)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FitCNN)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(
    benchmark::kMillisecond);

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
