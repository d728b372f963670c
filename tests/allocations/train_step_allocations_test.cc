// Heap allocations per training step in the steady state. The buffers of a
// step come from CachingAllocator and its small objects (tensor handles,
// shapes' control blocks, tape records, the backward pass's maps) from the
// same cache through PoolAllocator, so that from the step after warm-up on a
// step takes nothing from the C heap. This program counts every malloc of the
// process (strata/testing/heap_allocation_counter.h) around each step; run it
// with STRATA_TRACE_ALLOCATIONS=1 to print the call stack of every allocation
// that a step still makes.
//
// The steps are those of bench/training_bench.cc (where `allocs_per_step`
// reports the same count), on a smaller MLP:
//   with tf.GradientTape() as tape:
//     logits = model(x, training=True)
//     loss = tf.nn.compute_average_loss(
//         tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True),
//         global_batch_size=B)
//   grads = tape.gradient(loss, model.trainable_variables)
//   optimizer.apply_gradients(zip(grads, model.trainable_variables))

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "strata/core/allocator.h"
#include "strata/keras/keras.h"
#include "strata/strata.h"
#include "strata/testing/heap_allocation_counter.h"

namespace strata {
namespace {

namespace keras = strata::keras;
namespace sd = strata::distribute;

constexpr int64_t kBatch = 32;
constexpr int kWarmupSteps = 3;
constexpr int kMeasuredSteps = 5;

// devices == 1: one CPU device with `threads` intra-op threads; else
// `devices` logical CPU devices of one thread each.
void configure(int devices, int threads) {
  internal::reset_runtime_for_testing();
  config::set_intra_op_parallelism_threads(devices * threads);
  if (devices > 1) {
    std::vector<config::LogicalDeviceConfiguration> logical(static_cast<size_t>(devices));
    for (auto& l : logical) l.num_threads = threads;
    config::set_logical_device_configuration(config::list_physical_devices("CPU")[0], logical);
  }
}

std::shared_ptr<keras::SequentialModel> make_mlp() {
  namespace L = keras::layers;
  return keras::Sequential({L::Dense(64, {.activation = "relu", .input_shape = {48}}),
                            L::Dense(32, {.activation = "relu"}), L::Dense(10)});
}

data::Dataset synthetic_batches() {
  const Tensor x = random::uniform({kBatch, 48}, {.seed = 1});
  const Tensor y = cast(random::uniform_int({kBatch}, 0, 10, {.seed = 2}), DType::int64);
  return data::Dataset::from_tensors({x, y}).repeat();
}

// The heap allocations of each of `measured` calls of `step` after
// kWarmupSteps unmeasured ones, less what `step` returns, if anything (heap
// allocations it accounts for apart).
template <typename Step>
std::vector<int64_t> allocations_per_step(Step&& step, int measured = kMeasuredSteps) {
  for (int i = 0; i < kWarmupSteps; ++i) step();
  std::vector<int64_t> counts;
  counts.reserve(static_cast<size_t>(measured));
  for (int i = 0; i < measured; ++i) {
    const testing::AllocationTrace trace;
    const int64_t before = testing::heap_allocations();
    int64_t set_apart = 0;
    if constexpr (std::is_void_v<decltype(step())>) {
      step();
    } else {
      set_apart = step();
    }
    counts.push_back(testing::heap_allocations() - before - set_apart);
  }
  return counts;
}

std::string to_string(const std::vector<int64_t>& counts) {
  std::string s;
  for (int64_t c : counts) s += (s.empty() ? "" : ", ") + std::to_string(c);
  return s;
}

class TrainStepAllocations : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::heap_allocations() < 0) {
      GTEST_SKIP() << "heap allocations are counted only on glibc without sanitizers";
    }
    if (CachingAllocator::global().stats().max_cached_bytes == 0) {
      GTEST_SKIP() << "the buffer cache is disabled (STRATA_BUFFER_CACHE_MIB=0): every block of a "
                      "step comes from the C heap";
    }
  }
  void TearDown() override { internal::reset_runtime_for_testing(); }
};

// One custom step (GradientTape + apply_gradients) on one device.
auto custom_step(keras::SequentialModel& model, keras::optimizers::Optimizer& optimizer) {
  return [&model, &optimizer](const data::Element& batch) {
    std::vector<Tensor> grads;
    {
      GradientTape tape;
      Tensor logits = model(batch[0], /*training=*/true);
      Tensor per_example =
          keras::losses::sparse_categorical_crossentropy(batch[1], logits, {.from_logits = true});
      Tensor loss = nn::compute_average_loss(per_example, {.global_batch_size = kBatch});
      grads = tape.gradient(loss, model.trainable_variables());
    }
    optimizer.apply_gradients(zip(grads, model.trainable_variables()));
  };
}

// What a custom step on one thread still allocates: the five vectors the
// public API returns by value (tape.gradient's std::vector<Tensor>, the two
// model.trainable_variables() vectors, zip's pairs, the dataset's next
// Element) and the two lists apply_gradients splits zip's pairs into. The
// bound is exactly that: a change that adds an allocation to the step fails
// here.
constexpr int64_t kCustomStepBound = 7;

TEST_F(TrainStepAllocations, CustomStepOnOneThreadStaysWithinItsAllocationBound) {
  configure(1, 1);
  auto model = make_mlp();
  auto optimizer = keras::optimizers::Adam({.learning_rate = 1e-3});
  auto step = custom_step(*model, *optimizer);
  data::Iterator it = synthetic_batches().iter();
  const std::vector<int64_t> counts = allocations_per_step([&] { step(it.get_next()); });
  for (int64_t c : counts) {
    EXPECT_LE(c, kCustomStepBound) << "allocations per step: " << to_string(counts);
  }
  // Every step of the steady state does the same work: the same count.
  for (int64_t c : counts) EXPECT_EQ(c, counts[0]) << "allocations per step: " << to_string(counts);
}

// The same step written with Keras 3's optimizer.apply(grads, trainable_variables),
// the gradients moved in: no zip, no split lists.
constexpr int64_t kApplyStepBound = 4;

TEST_F(TrainStepAllocations, CustomStepWithApplyOnOneThreadStaysWithinItsAllocationBound) {
  configure(1, 1);
  auto model = make_mlp();
  auto optimizer = keras::optimizers::Adam({.learning_rate = 1e-3});
  data::Iterator it = synthetic_batches().iter();
  const std::vector<int64_t> counts = allocations_per_step([&] {
    const data::Element batch = it.get_next();
    std::vector<Tensor> grads;
    {
      GradientTape tape;
      Tensor logits = (*model)(batch[0], /*training=*/true);
      Tensor per_example =
          keras::losses::sparse_categorical_crossentropy(batch[1], logits, {.from_logits = true});
      Tensor loss = nn::compute_average_loss(per_example, {.global_batch_size = kBatch});
      grads = tape.gradient(loss, model->trainable_variables());
    }
    optimizer->apply(std::move(grads), model->trainable_variables());
  });
  for (int64_t c : counts) {
    EXPECT_LE(c, kApplyStepBound) << "allocations per step: " << to_string(counts);
  }
}

// model.fit: the allocations of its loop per step, apart from those of each
// fit call (callbacks, history, the dataset's iterator), from fits of two
// lengths. Keras's train_step still takes three vectors a step by value
// from the public API: the dataset's next Element, trainable_variables()
// and tape.gradient's result (it hands both lists to optimizer.apply, which
// makes no copies).
constexpr int64_t kFitStepBound = 3;

TEST_F(TrainStepAllocations, FitStepOnOneThreadStaysWithinItsAllocationBound) {
  configure(1, 1);
  auto model = make_mlp();
  model->compile({.optimizer = keras::optimizers::Adam({.learning_rate = 1e-3}),
                  .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true})});
  const data::Dataset ds = synthetic_batches();
  auto fit_allocations = [&](int64_t steps) {
    const int64_t before = testing::heap_allocations();
    model->fit(ds, {.epochs = 1, .verbose = 0, .steps_per_epoch = steps});
    return testing::heap_allocations() - before;
  };
  fit_allocations(kWarmupSteps);
  const int64_t short_fit = fit_allocations(2);
  const int64_t long_fit = fit_allocations(2 + kMeasuredSteps);
  const double per_step = static_cast<double>(long_fit - short_fit) / kMeasuredSteps;
  EXPECT_LE(per_step, kFitStepBound) << "fit of 2 steps: " << short_fit << " allocations, of "
                                     << 2 + kMeasuredSteps << ": " << long_fit;
}

// MirroredStrategy over 2 logical devices: the same custom step in
// strategy.run on a distributed dataset; the replica threads' handoffs and
// the all-reduce add their own allocations (33-34 a step today).
//
// Two things make one step's count vary with the threads' timing, so the
// bound is on the mean of kMirroredMeasuredSteps steps, with the cache's
// fills counted apart:
//   - The dataset's prefetch thread makes the next elements while the step
//     runs (at most 17 allocations a step's worth), one step ahead at most:
//     its work falls into one step or the next, so under load single steps
//     read above or below the mean, but any run of steps holds that many
//     elements' worth, give or take the one at each end.
//   - Two replica threads interleave differently every step, so how many
//     blocks of one size are live at once, at the peak, varies; a step that
//     sets a new peak takes the blocks beyond the old one from the C heap
//     (the buffer cache's misses), once, and returns them to the cache, which
//     holds them from then on. Those fills over the measured steps can be no
//     more than the blocks one step takes from the cache (every block of a
//     step is freed by its end, so the two replicas never hold more at once),
//     and would be that many every step if the cache stopped serving the
//     step.
constexpr int kMirroredMeasuredSteps = 10;
// 34 a step, and the prefetch's work of one step at each end spread over the steps.
constexpr double kMirroredStepBound = 34 + 2.0 * 17 / kMirroredMeasuredSteps;

TEST_F(TrainStepAllocations, MirroredCustomStepStaysWithinItsAllocationBound) {
  configure(2, 1);
  sd::MirroredStrategy strategy(std::vector<std::string>{"CPU:0", "CPU:1"});
  std::shared_ptr<keras::SequentialModel> model;
  std::shared_ptr<keras::optimizers::AdamOptimizer> optimizer;
  {
    const sd::StrategyScope scope(strategy);
    model = make_mlp();
    optimizer = keras::optimizers::Adam({.learning_rate = 1e-3});
    optimizer->build(model->trainable_variables());
  }
  auto step = custom_step(*model, *optimizer);
  sd::DistributedDataset dd = strategy.experimental_distribute_dataset(synthetic_batches());
  sd::DistributedIterator it = dd.iter();
  const CachingAllocator& cache = CachingAllocator::global();
  std::vector<int64_t> cache_fills;  // of every step, the warm-up's first
  int64_t cache_requests_of_one_step = 0;
  const std::vector<int64_t> counts = allocations_per_step(
      [&] {
        const AllocatorStats before = cache.stats();
        strategy.run(step, it.get_next());
        const AllocatorStats after = cache.stats();
        cache_fills.push_back(after.misses - before.misses);
        cache_requests_of_one_step = (after.hits + after.misses) - (before.hits + before.misses);
        return after.system_allocations - before.system_allocations;
      },
      kMirroredMeasuredSteps);
  const std::vector<int64_t> measured_fills(cache_fills.end() - kMirroredMeasuredSteps,
                                            cache_fills.end());
  int64_t fills = 0;
  for (int64_t f : measured_fills) fills += f;
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  EXPECT_LE(static_cast<double>(total) / kMirroredMeasuredSteps, kMirroredStepBound)
      << "allocations per step besides the cache's fills: " << to_string(counts);
  EXPECT_GT(cache_requests_of_one_step, 0);
  EXPECT_LE(fills, cache_requests_of_one_step)
      << "the cache took " << to_string(measured_fills) << " blocks from the C heap in steps of "
      << cache_requests_of_one_step << " requests each";
}

}  // namespace
}  // namespace strata
