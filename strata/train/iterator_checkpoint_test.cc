// Dataset iterators in train::Checkpoint: a restored iterator continues with
// exactly the elements the saved one had left.
//
//   it = iter(ds); for _ in range(k): next(it)
//   ckpt = tf.train.Checkpoint(iterator=it); path = ckpt.write(prefix)
//   fresh = iter(make_ds()); tf.train.Checkpoint(iterator=fresh).read(path)
//   list(fresh) == list(it)
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/core/config.h"
#include "strata/data/dataset.h"
#include "strata/distribute/distributed_dataset.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/io/tfrecord.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/testing/expect_error.h"
#include "strata/testing/logical_devices.h"
#include "strata/train/checkpoint.h"

namespace strata::train {
namespace {

using strata::testing::cpu_device_names;

using data::Dataset;
using data::Element;
using testing::expect_error;

std::string show(const Element& e) {
  std::string s = "(";
  for (const Tensor& t : e) s += t.to_string() + "; ";
  return s + ")";
}

std::vector<std::string> drain(data::Iterator& it, int limit = 1000) {
  std::vector<std::string> out;
  while (auto e = it.next()) {
    out.push_back(show(*e));
    if (static_cast<int>(out.size()) == limit) break;
  }
  return out;
}

// Reads `k` elements of make().iter(), writes a checkpoint of the iterator,
// and checks that (1) the saved iterator goes on with the elements of an
// uninterrupted run, (2) a fresh iterator of a freshly built dataset,
// restored from the file, yields exactly those too. Returns the remainder.
std::vector<std::string> expect_resumes(const std::function<Dataset()>& make, int k,
                                        bool deterministic = true, int limit = 1000) {
  TempDir dir("iter_ckpt");
  std::vector<std::string> uninterrupted;
  if (deterministic) {
    auto ref = make().iter();
    uninterrupted = drain(ref, limit + k);
  }
  auto it = make().iter();
  std::vector<std::string> head;
  head.reserve(k);
  for (int i = 0; i < k; ++i) head.push_back(show(it.get_next()));
  Checkpoint ckpt({{"iterator", it}});
  const std::string path = ckpt.write(dir.file("ckpt"));
  std::vector<std::string> rest = drain(it, limit);
  if (deterministic) {
    std::vector<std::string> all = head;
    all.insert(all.end(), rest.begin(), rest.end());
    EXPECT_EQ(all, uninterrupted) << "saving disturbed the iteration";
  }
  auto fresh = make().iter();
  Checkpoint restored({{"iterator", fresh}});
  restored.read(path).assert_consumed();
  EXPECT_EQ(drain(fresh, limit), rest);
  return rest;
}

Tensor iota_f(int64_t n, int64_t cols) {
  std::vector<float> v(n * cols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return constant(v, {n, cols});
}
Tensor iota_i(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i * 10;
  return constant(v, {n});
}

TEST(IteratorCheckpoint, RangeResumesAfterEveryPrefix) {
  for (int k = 0; k <= 7; ++k) {
    auto rest = expect_resumes([] { return Dataset::range(0, 20, 3); }, k);
    EXPECT_EQ(rest.size(), static_cast<size_t>(7 - k));
  }
}

TEST(IteratorCheckpoint, FromTensorSlicesAndFromTensorsResume) {
  expect_resumes([] { return Dataset::from_tensor_slices({iota_f(10, 3), iota_i(10)}); }, 4);
  expect_resumes([] { return Dataset::from_tensors({iota_f(2, 2)}).repeat(3); }, 1);
  expect_resumes([] { return Dataset::from_tensors({iota_f(2, 2)}); }, 0);
}

TEST(IteratorCheckpoint, TFRecordReadingResumesInTheMiddleOfAFileAndAcrossFiles) {
  TempDir dir("iter_ckpt_tfr");
  std::vector<std::string> files;
  for (int f = 0; f < 3; ++f) {
    files.push_back(dir.file("f" + std::to_string(f) + ".tfrecord.gz"));
    io::TFRecordWriter w(files.back(), {.compression_type = "GZIP"});
    for (int r = 0; r < 4; ++r)
      w.write("file " + std::to_string(f) + " record " + std::to_string(r));
    w.close();
  }
  for (int k : {0, 2, 4, 5, 11, 12}) {
    auto rest = expect_resumes(
        [&] { return data::TFRecordDataset(files, {.compression_type = "GZIP"}); }, k);
    EXPECT_EQ(rest.size(), static_cast<size_t>(12 - k));
  }
}

TEST(IteratorCheckpoint, MapFilterBatchUnbatchAndEnumerateResume) {
  auto square = [](const Element& e) { return Element{e[0] * e[0]}; };
  expect_resumes([&] { return Dataset::range(12).map(square); }, 5);
  expect_resumes([&] { return Dataset::range(40).map(square, {.num_parallel_calls = 3}); }, 7);
  expect_resumes(
      [&] {
        return Dataset::range(40).map(square, {.num_parallel_calls = 4, .deterministic = true});
      },
      0);
  expect_resumes(
      [] {
        return Dataset::range(20).filter(
            [](const Element& e) { return e[0].item<int64_t>() % 3 == 0; });
      },
      2);
  expect_resumes([] { return Dataset::range(11).batch(3); }, 2);
  expect_resumes([] { return Dataset::range(11).batch(4, /*drop_remainder=*/true); }, 1);
  expect_resumes([] { return Dataset::range(12).batch(5).unbatch(); }, 7);
  expect_resumes([] { return Dataset::range(6).enumerate(100); }, 3);
}

TEST(IteratorCheckpoint, ShuffleResumesWithItsBufferAndRandomStreamAcrossEpochs) {
  // reshuffle_each_iteration: every epoch of the repeat draws another order,
  // and a restore continues the saved epoch and the later ones alike.
  for (int k : {0, 1, 9, 10, 23, 29}) {
    expect_resumes([] { return Dataset::range(10).shuffle(4, {.seed = 7}).repeat(3); }, k);
  }
  expect_resumes(
      [] {
        return Dataset::range(10)
            .shuffle(4, {.seed = 7, .reshuffle_each_iteration = false})
            .repeat(2);
      },
      13);
  // Without a seed each dataset draws its own: the restored iterator takes the
  // saved run's seeds, so it continues that run (not an uninterrupted new one).
  expect_resumes([] { return Dataset::range(30).shuffle(8).repeat(2); }, 17,
                 /*deterministic=*/false);
}

TEST(IteratorCheckpoint, RepeatTakeSkipShardZipAndConcatenateResume) {
  expect_resumes([] { return Dataset::range(4).repeat(3); }, 6);
  expect_resumes([] { return Dataset::range(4).repeat(); }, 9, true, 20);
  expect_resumes([] { return Dataset::range(20).take(7); }, 3);
  expect_resumes([] { return Dataset::range(20).skip(4); }, 0);
  expect_resumes([] { return Dataset::range(20).skip(4); }, 5);
  expect_resumes([] { return Dataset::range(20).shard(3, 1); }, 2);
  expect_resumes([] { return Dataset::zip({Dataset::range(5), Dataset::range(10, 20)}); }, 2);
  expect_resumes([] { return Dataset::range(3).concatenate(Dataset::range(10, 14)); }, 2);
  expect_resumes([] { return Dataset::range(3).concatenate(Dataset::range(10, 14)); }, 5);
}

TEST(IteratorCheckpoint, PrefetchHandsItsBufferBackToTheInput) {
  // The prefetch thread reads ahead; the elements it buffered are saved as the
  // input's, so the restored pipeline yields them again.
  for (int k : {0, 1, 5}) {
    expect_resumes([] { return Dataset::range(30).prefetch(4); }, k);
    expect_resumes([] { return Dataset::range(30).prefetch(data::AUTOTUNE).batch(4); }, k);
    expect_resumes([] { return Dataset::range(30).batch(4).prefetch(2).prefetch(3); }, k);
  }
}

TEST(IteratorCheckpoint, ATypicalShuffleMapBatchPrefetchPipelineResumes) {
  // ds.shuffle(16, seed).map(f, parallel).batch(4, drop_remainder).repeat().prefetch(AUTOTUNE)
  const Tensor x = iota_f(40, 2);
  const Tensor y = iota_i(40);
  auto make = [&] {
    return Dataset::from_tensor_slices({x, y})
        .shuffle(16, {.seed = 3})
        .map(
            [](const Element& e) {
              return Element{e[0] * 2.f, e[1] + int64_t{1}};
            },
            {.num_parallel_calls = 2})
        .batch(4, /*drop_remainder=*/true)
        .repeat()
        .prefetch(data::AUTOTUNE);
  };
  for (int k : {0, 3, 10, 11, 25}) {
    SCOPED_TRACE(k);
    expect_resumes(make, k, true, 30);
  }
}

TEST(IteratorCheckpoint, AGeneratorCannotBeSavedUnlessTheExternalStatePolicySaysSo) {
  auto gen_ds = [] {
    return Dataset::from_generator(
        [] {
          auto i = std::make_shared<int64_t>(0);
          return data::GeneratorFn([i]() -> std::optional<Element> {
            if (*i == 5) return std::nullopt;
            return Element{constant((*i)++)};
          });
        },
        {TensorSpec(TensorShape{}, DType::int64)});
  };
  TempDir dir("iter_ckpt_gen");
  auto it = gen_ds().map([](const Element& e) { return e; }).iter();
  it.get_next();
  Checkpoint ckpt({{"iterator", it}});
  // TF: FailedPreconditionError: PyFunc is stateful. [Op:SerializeIterator]
  expect_error([&] { ckpt.write(dir.file("ckpt")); }, ErrorCode::FAILED_PRECONDITION,
               {"GeneratorDataset", "stateful", "experimental_external_state_policy"});
  EXPECT_FALSE(file_exists(dir.file("ckpt")));

  // options.experimental_external_state_policy = ExternalStatePolicy.IGNORE
  data::Options o;
  o.experimental_external_state_policy = data::ExternalStatePolicy::IGNORE;
  auto it2 = Dataset::range(3).concatenate(gen_ds()).with_options(o).iter();
  for (int i = 0; i < 4; ++i) it2.get_next();  // 0 1 2 | 0
  Checkpoint ckpt2({{"iterator", it2}});
  const std::string path = ckpt2.write(dir.file("ckpt2"));
  auto fresh = Dataset::range(3).concatenate(gen_ds()).with_options(o).iter();
  Checkpoint({{"iterator", fresh}}).read(path).assert_consumed();
  // The generator's position is not saved: it starts over.
  EXPECT_EQ(fresh.get_next()[0].item<int64_t>(), 0);
}

// ds.interleave(lambda x: tf.data.Dataset.range(10 * x, 11 * x), cycle_length, block_length)
// over ds = tf.data.Dataset.range(1, n + 1): input element x opens a dataset of x elements.
Dataset interleave_ranges(int64_t n, int64_t cycle_length, int64_t block_length,
                          int64_t num_parallel_calls = 1) {
  return Dataset::range(1, n + 1).interleave(
      [](const Element& e) {
        const int64_t x = e[0].item<int64_t>();
        return Dataset::range(10 * x, 11 * x);
      },
      {.cycle_length = cycle_length,
       .block_length = block_length,
       .num_parallel_calls = num_parallel_calls});
}

std::vector<int64_t> drain_ints(data::Iterator& it) {
  std::vector<int64_t> out;
  while (auto e = it.next()) out.push_back((*e)[0].item<int64_t>());
  return out;
}

TEST(IteratorCheckpoint, InterleaveResumesWithItsOpenElements) {
  // cycle_length 3, block_length 2 over elements of 1..5 values, worked out by
  // hand from TF's loop: slots {1, 2, 3} give 10 | 20 21 | 30 31; slot 0 ends
  // and takes 4: 40 41 | slot 1 ends: 32, slot 2 ends | 42 43 | slot 1 takes 5:
  // 50 51 | the input ends | slot 0 ends | 52 53 | 54.
  const std::vector<int64_t> expected = {10, 20, 21, 30, 31, 40, 41, 32,
                                         42, 43, 50, 51, 52, 53, 54};
  auto it = interleave_ranges(5, 3, 2).iter();
  EXPECT_EQ(drain_ints(it), expected);
  for (int k = 0; k <= 15; ++k) {
    SCOPED_TRACE(k);
    auto rest = expect_resumes([] { return interleave_ranges(5, 3, 2); }, k);
    EXPECT_EQ(rest.size(), static_cast<size_t>(15 - k));
  }
  // Saved after 8 elements (at 32): slot 0 holds 4's dataset (next 42),
  // slot 1 is empty, slot 2 holds 3's (at its end); the cycle is at slot 2.
  auto saved = interleave_ranges(5, 3, 2).iter();
  for (int i = 0; i < 8; ++i) saved.get_next();
  auto fresh = interleave_ranges(5, 3, 2).iter();
  fresh.restore_state(saved.save_state());
  EXPECT_EQ(drain_ints(fresh), std::vector<int64_t>(expected.begin() + 8, expected.end()));

  for (int k : {0, 1, 4, 7, 9}) {
    SCOPED_TRACE(k);
    expect_resumes([] { return interleave_ranges(6, 2, 1); }, k);
    expect_resumes([] { return interleave_ranges(4, 3, 1); }, k);
    expect_resumes([] { return interleave_ranges(7, 2, 2); }, k);
    // flat_map: one open element at a time.
    expect_resumes(
        [] {
          return Dataset::range(1, 5).flat_map(
              [](const Element& e) { return Dataset::range(e[0].item<int64_t>()).repeat(2); });
        },
        k);
  }
}

TEST(IteratorCheckpoint, ParallelInterleaveAndNestedStateResume) {
  // num_parallel_calls: each open element is prefetched in the background;
  // the order is the sequential one, and so is the restored remainder.
  for (int k : {0, 1, 3, 8, 14}) {
    SCOPED_TRACE(k);
    expect_resumes([] { return interleave_ranges(5, 3, 2, /*num_parallel_calls=*/2); }, k);
    expect_resumes([] { return interleave_ranges(6, 2, 1, data::AUTOTUNE); }, k);
  }
  // Open elements with state of their own (a shuffle buffer), over a shuffled
  // input of dict elements: the element that made each open dataset is saved
  // with its names, and the function runs again on it when restored.
  auto make = [] {
    return Dataset::from_tensor_slices(
               {{"start", iota_i(6)}, {"count", constant<int64_t>({3, 1, 4, 1, 5, 2})}})
        .shuffle(3, {.seed = 11})
        .interleave(
            [](const Element& e) {
              const int64_t start = e["start"].item<int64_t>();
              return Dataset::range(start, start + e["count"].item<int64_t>())
                  .shuffle(2, {.seed = 5});
            },
            {.cycle_length = 2, .block_length = 2})
        .batch(3);
  };
  for (int k : {0, 1, 2, 4, 5}) {
    SCOPED_TRACE(k);
    expect_resumes(make, k);
  }
}

// ds.map(f).cache() where f counts its calls: a replayed cache calls f no more.
struct CountingCache {
  std::shared_ptr<int> calls = std::make_shared<int>(0);
  Dataset operator()(int64_t n, int64_t repeats) const {
    auto c = calls;
    return Dataset::range(n)
        .map(
            [c](const Element& e) {
              ++*c;
              return Element{e[0] * int64_t{3}};
            },
            // Given, so that no call is spent on working out the spec.
            {.output_signature = {TensorSpec(TensorShape{}, DType::int64)}})
        .cache()
        .repeat(repeats);
  }
};

TEST(IteratorCheckpoint, MemoryCacheResumesWhileFillingAndWhileReplaying) {
  // range(5).map(3x).cache().repeat(3): 0 3 6 9 12, three times.
  for (int k : {0, 2, 4, 5, 7, 10, 12, 15}) {
    SCOPED_TRACE(k);
    CountingCache make;
    auto rest = expect_resumes([&] { return make(5, 3); }, k);
    EXPECT_EQ(rest.size(), static_cast<size_t>(15 - k));
  }
  // Saved in the second pass: the cache (5 elements) and the position travel
  // with the state, so the restored run replays them without reading the input.
  CountingCache saving;
  auto it = saving(5, 3).iter();
  for (int i = 0; i < 7; ++i) it.get_next();
  EXPECT_EQ(*saving.calls, 5);
  const Tensor state = it.save_state();
  CountingCache restoring;
  auto fresh = restoring(5, 3).iter();
  fresh.restore_state(state);
  EXPECT_EQ(drain_ints(fresh), (std::vector<int64_t>{6, 9, 12, 0, 3, 6, 9, 12}));
  EXPECT_EQ(*restoring.calls, 0);
  // Saved in the first pass: the elements cached so far and the input's
  // position; the restored run reads the rest of the input once.
  auto first = saving(5, 2).iter();
  first.get_next();
  first.get_next();
  CountingCache refilling;
  auto refilled = refilling(5, 2).iter();
  refilled.restore_state(first.save_state());
  EXPECT_EQ(drain_ints(refilled), (std::vector<int64_t>{6, 9, 12, 0, 3, 6, 9, 12}));
  EXPECT_EQ(*refilling.calls, 3);
  // A cache under a shuffle and a prefetch.
  for (int k : {0, 3, 9, 13}) {
    SCOPED_TRACE(k);
    expect_resumes(
        [] { return Dataset::range(8).cache().shuffle(4, {.seed = 2}).repeat(2).prefetch(2); }, k);
  }
}

TEST(IteratorCheckpoint, CorruptAndMismatchedStatesFailClearly) {
  TempDir dir("iter_ckpt_err");
  auto r = Dataset::range(10).iter();
  r.get_next();
  const std::string path = Checkpoint({{"iterator", r}}).write(dir.file("b"));
  auto other = Dataset::range(10).batch(2).iter();
  expect_error(
      [&] {
        Checkpoint({{"iterator", other}}).read(path);
      },
      ErrorCode::INVALID_ARGUMENT, {"BatchDataset", "RangeDataset"});
  // A state that is not one.
  auto bytes = r.save_state();
  static_cast<uint8_t*>(bytes.mutable_raw_data())[10] ^= 1;
  expect_error([&] { other.restore_state(bytes); }, ErrorCode::DATA_LOSS, {"iterator state"});

  // Interleave: another cycle length, a cycle index out of range, another pipeline.
  auto il = interleave_ranges(5, 3, 2).iter();
  for (int i = 0; i < 4; ++i) il.get_next();
  const Tensor il_state = il.save_state();
  auto two = interleave_ranges(5, 2, 2).iter();
  expect_error([&] { two.restore_state(il_state); }, ErrorCode::INVALID_ARGUMENT,
               {"InterleaveDataset", "cycle_length 3"});
  data::IteratorState edited = data::IteratorState::decode(il_state);
  edited.set("cycle_index", constant(int64_t{7}));
  auto three = interleave_ranges(5, 3, 2).iter();
  expect_error([&] { three.restore_state(edited.encode()); }, ErrorCode::DATA_LOSS,
               {"InterleaveDataset", "cycle index 7"});
  auto cached = Dataset::range(5).cache().iter();
  expect_error([&] { cached.restore_state(il_state); }, ErrorCode::INVALID_ARGUMENT,
               {"CacheDataset", "InterleaveDataset"});

  // Cache: a position past the saved cache.
  CountingCache make;
  auto c = make(5, 2).iter();
  for (int i = 0; i < 6; ++i) c.get_next();
  data::IteratorState cache_state = data::IteratorState::decode(c.save_state());
  ASSERT_TRUE(cache_state.contains("input/position"));
  cache_state.set("input/position", constant(int64_t{9}));
  auto c2 = make(5, 2).iter();
  expect_error([&] { c2.restore_state(cache_state.encode()); }, ErrorCode::DATA_LOSS,
               {"CacheDataset", "position 9"});
}

// --- distributed iterators ---------------------------------------------------

class DistributedIteratorCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(4); }
  // The global batches of the remaining steps: each step's replica batches
  // concatenated in replica order (rows of the first component).
  static std::vector<std::vector<int64_t>> global_steps(distribute::DistributedIterator& it,
                                                        int limit) {
    std::vector<std::vector<int64_t>> out;
    while (auto step = it.get_next_as_optional()) {
      std::vector<int64_t> rows;
      for (const Element& e : step->values()) {
        auto v = e[0].to_vector<int64_t>();
        rows.insert(rows.end(), v.begin(), v.end());
      }
      out.push_back(rows);
      if (static_cast<int>(out.size()) == limit) break;
    }
    return out;
  }
};

TEST_F(DistributedIteratorCheckpoint, RestoresUnderTheSameAndOtherReplicaCounts) {
  // A shuffled, batched pipeline (global batch 8) read under 2 replicas for
  // 3 steps, saved, and restored under 1... 4 replicas: every restored run
  // sees the global batches the uninterrupted 2-replica run would.
  auto make = [] {
    return Dataset::range(64)
        .shuffle(20, {.seed = 5})
        .batch(8, /*drop_remainder=*/true)
        .repeat(2)
        .prefetch(2);
  };
  TempDir dir("dist_iter_ckpt");
  std::vector<std::vector<int64_t>> uninterrupted;
  {
    distribute::MirroredStrategy s(cpu_device_names(2));
    auto it = s.experimental_distribute_dataset(make()).iter();
    uninterrupted = global_steps(it, 100);
  }
  ASSERT_EQ(uninterrupted.size(), 16u);
  std::string path;
  {
    distribute::MirroredStrategy s(cpu_device_names(2));
    auto it = s.experimental_distribute_dataset(make()).iter();
    auto head = global_steps(it, 3);
    path = Checkpoint({{"iterator", it}}).write(dir.file("ckpt"));
    auto rest = global_steps(it, 100);
    head.insert(head.end(), rest.begin(), rest.end());
    EXPECT_EQ(head, uninterrupted);
  }
  const std::vector<std::vector<int64_t>> expected(uninterrupted.begin() + 3, uninterrupted.end());
  for (int replicas : {2, 3, 4}) {
    distribute::MirroredStrategy s(cpu_device_names(replicas));
    auto it = s.experimental_distribute_dataset(make()).iter();
    Checkpoint({{"iterator", it}}).read(path).assert_consumed();
    EXPECT_EQ(global_steps(it, 100), expected) << replicas << " replicas";
  }
}

TEST_F(DistributedIteratorCheckpoint, DatasetsFromFunctionRestoreTheirPipelines) {
  // distribute_datasets_from_function: each replica batch comes from the
  // function's dataset; restored under the same strategy it continues.
  auto fn = [](const distribute::InputContext& ctx) {
    return Dataset::range(40)
        .shard(ctx.num_input_pipelines(), ctx.input_pipeline_id())
        .batch(ctx.get_per_replica_batch_size(4));
  };
  TempDir dir("dist_iter_fn");
  distribute::MirroredStrategy s(cpu_device_names(2));
  auto it = s.distribute_datasets_from_function(fn).iter();
  global_steps(it, 2);
  const std::string path = Checkpoint({{"iterator", it}}).write(dir.file("ckpt"));
  auto rest = global_steps(it, 100);
  auto fresh = s.distribute_datasets_from_function(fn).iter();
  Checkpoint({{"iterator", fresh}}).read(path).assert_consumed();
  EXPECT_EQ(global_steps(fresh, 100), rest);
  EXPECT_EQ(rest.size(), 8u);  // 20 batches of 2, 10 steps, 2 read
}

TEST_F(DistributedIteratorCheckpoint, RestoresBetweenOneAndSeveralReplicasAndWithoutAStrategy) {
  // The same pipeline read for 3 global batches under one strategy and
  // continued under another: 2 -> 1 (a one-device MirroredStrategy, the
  // default strategy, no strategy at all), 1 -> 2, no strategy -> 2, 1 -> 4.
  // Every continued run sees the global batches of the uninterrupted run.
  auto make = [] {
    return Dataset::range(48)
        .shuffle(10, {.seed = 9})
        .batch(4, /*drop_remainder=*/true)
        .repeat(2)
        .prefetch(3);
  };
  TempDir dir("dist_iter_replicas");
  std::vector<std::vector<int64_t>> uninterrupted;
  {
    auto it = make().iter();
    while (auto e = it.next()) uninterrupted.push_back((*e)[0].to_vector<int64_t>());
  }
  ASSERT_EQ(uninterrupted.size(), 24u);
  const std::vector<std::vector<int64_t>> expected(uninterrupted.begin() + 3, uninterrupted.end());
  // Saves after 3 global batches of a distributed run under `replicas`.
  auto save_under = [&](int replicas, const std::string& name) {
    distribute::MirroredStrategy s(cpu_device_names(replicas));
    auto it = s.experimental_distribute_dataset(make()).iter();
    auto head = global_steps(it, 3);
    EXPECT_EQ(head,
              std::vector<std::vector<int64_t>>(uninterrupted.begin(), uninterrupted.begin() + 3));
    return Checkpoint({{"iterator", it}}).write(dir.file(name));
  };
  const std::string saved2 = save_under(2, "two");
  const std::string saved1 = save_under(1, "one");
  std::string plain;
  {
    auto it = make().iter();
    for (int i = 0; i < 3; ++i) it.get_next();
    plain = Checkpoint({{"iterator", it}}).write(dir.file("plain"));
  }
  for (const std::string& path : std::vector<std::string>{saved2, saved1, plain}) {
    SCOPED_TRACE(path);
    for (int replicas : {1, 2, 4}) {
      distribute::MirroredStrategy s(cpu_device_names(replicas));
      auto it = s.experimental_distribute_dataset(make()).iter();
      Checkpoint({{"iterator", it}}).read(path).assert_consumed();
      EXPECT_EQ(global_steps(it, 100), expected) << replicas << " replicas";
    }
    auto it = distribute::default_strategy().experimental_distribute_dataset(make()).iter();
    Checkpoint({{"iterator", it}}).read(path).assert_consumed();
    EXPECT_EQ(global_steps(it, 100), expected) << "the default strategy";
    auto fresh = make().iter();
    Checkpoint({{"iterator", fresh}}).read(path).assert_consumed();
    std::vector<std::vector<int64_t>> rest;
    while (auto e = fresh.next()) rest.push_back((*e)[0].to_vector<int64_t>());
    EXPECT_EQ(rest, expected) << "no strategy";
  }
}

TEST_F(DistributedIteratorCheckpoint, BatchesWithoutAStaticSizeRestoreBetweenOneAndTwoReplicas) {
  // Elements of 1, 2, 3, 1, 2, 3, ... rows and no static batch size: under 2
  // replicas each is cut into two ceil-sized pieces (TF's legacy rebatch).
  // Saved between steps, the position restores under 1 replica, without a
  // strategy, and back under 2.
  auto make = [] {
    return Dataset::range(12).map(
        [](const Element& e) {
          const int64_t x = e[0].item<int64_t>();
          return Element{constant(std::vector<int64_t>(static_cast<size_t>(x % 3 + 1), x))};
        },
        {.output_signature = {TensorSpec(TensorShape{-1}, DType::int64)}});
  };
  std::vector<std::vector<int64_t>> expected;
  for (int64_t x = 4; x < 12; ++x) expected.emplace_back(static_cast<size_t>(x % 3 + 1), x);
  TempDir dir("dist_iter_legacy");
  std::string saved2, saved1;
  {
    distribute::MirroredStrategy s(cpu_device_names(2));
    auto it = s.experimental_distribute_dataset(make()).iter();
    global_steps(it, 4);
    saved2 = Checkpoint({{"iterator", it}}).write(dir.file("two"));
  }
  {
    distribute::MirroredStrategy s(cpu_device_names(1));
    auto it = s.experimental_distribute_dataset(make()).iter();
    global_steps(it, 4);
    saved1 = Checkpoint({{"iterator", it}}).write(dir.file("one"));
  }
  for (const std::string& path : std::vector<std::string>{saved2, saved1}) {
    SCOPED_TRACE(path);
    for (int replicas : {1, 2}) {
      distribute::MirroredStrategy s(cpu_device_names(replicas));
      auto it = s.experimental_distribute_dataset(make()).iter();
      Checkpoint({{"iterator", it}}).read(path).assert_consumed();
      EXPECT_EQ(global_steps(it, 100), expected) << replicas << " replicas";
    }
    auto fresh = make().iter();
    Checkpoint({{"iterator", fresh}}).read(path).assert_consumed();
    std::vector<std::vector<int64_t>> rest;
    while (auto e = fresh.next()) rest.push_back((*e)[0].to_vector<int64_t>());
    EXPECT_EQ(rest, expected) << "no strategy";
  }
}

TEST_F(DistributedIteratorCheckpoint, ALegacyRebatchTakesPrefetchedPiecesBackAsWholeBatches) {
  // Batches of x % 3 + 1 copies of x, cut into 2 pieces each and prefetched:
  // after 2 batches (4 pieces) the prefetch holds pieces of later batches.
  // Saved then, the state holds whole batches again, so it restores cut into
  // 3 pieces, or without a rebatch.
  auto batches = [] {
    return Dataset::range(8).map(
        [](const Element& e) {
          const int64_t x = e[0].item<int64_t>();
          return Element{constant(std::vector<int64_t>(static_cast<size_t>(x % 3 + 1), x))};
        },
        {.output_signature = {TensorSpec(TensorShape{-1}, DType::int64)}});
  };
  std::vector<std::vector<int64_t>> expected;
  for (int64_t x = 2; x < 8; ++x) expected.emplace_back(static_cast<size_t>(x % 3 + 1), x);
  auto it = batches().rebatch_legacy(2).prefetch(4).iter();
  for (int i = 0; i < 4; ++i) it.get_next();
  // Gives the prefetch thread time to fill its buffer (the result is the same
  // either way; a full buffer is the case under test).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const Tensor state = it.save_state();

  auto three = batches().rebatch_legacy(3).prefetch(4).iter();
  three.restore_state(state);
  std::vector<std::vector<int64_t>> regrouped;
  while (auto a = three.next()) {
    std::vector<int64_t> rows = (*a)[0].to_vector<int64_t>();
    for (int p = 1; p < 3; ++p) {
      auto piece = three.next();
      ASSERT_TRUE(piece.has_value());
      auto v = (*piece)[0].to_vector<int64_t>();
      rows.insert(rows.end(), v.begin(), v.end());
    }
    regrouped.push_back(rows);
  }
  EXPECT_EQ(regrouped, expected);

  auto plain = batches().iter();
  plain.restore_state(state);
  std::vector<std::vector<int64_t>> rest;
  while (auto e = plain.next()) rest.push_back((*e)[0].to_vector<int64_t>());
  EXPECT_EQ(rest, expected);
}

TEST_F(DistributedIteratorCheckpoint, PerReplicaPipelinesDoNotRestoreIntoOnePipeline) {
  // InputReplicationMode::PER_REPLICA: one pipeline per replica, each saved
  // on its own; a plain iterator cannot take two pipelines' positions.
  distribute::MirroredStrategy s(cpu_device_names(2));
  auto it =
      s.distribute_datasets_from_function(
           [](const distribute::InputContext& ctx) {
             return Dataset::range(8).shard(ctx.num_input_pipelines(), ctx.input_pipeline_id());
           },
           {.experimental_replication_mode = distribute::InputReplicationMode::PER_REPLICA})
          .iter();
  it.get_next();
  const Tensor state = it.save_state();
  auto plain = Dataset::range(8).iter();
  expect_error([&] { plain.restore_state(state); }, ErrorCode::INVALID_ARGUMENT,
               {"PER_REPLICA", "2"});
  auto one = Dataset::range(8).iter();
  one.get_next();
  expect_error([&] { it.restore_state(one.save_state()); }, ErrorCode::INVALID_ARGUMENT,
               {"PER_REPLICA", "2"});
}

}  // namespace
}  // namespace strata::train
