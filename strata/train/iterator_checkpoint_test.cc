// Dataset iterators in train::Checkpoint: a restored iterator continues with
// exactly the elements the saved one had left.
//
//   it = iter(ds); for _ in range(k): next(it)
//   ckpt = tf.train.Checkpoint(iterator=it); path = ckpt.write(prefix)
//   fresh = iter(make_ds()); tf.train.Checkpoint(iterator=fresh).read(path)
//   list(fresh) == list(it)
#include <gtest/gtest.h>

#include <functional>
#include <string>
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
#include "strata/train/checkpoint.h"

namespace strata::train {
namespace {

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

TEST(IteratorCheckpoint, UnsupportedTransformationsAndMismatchedPipelinesFailClearly) {
  TempDir dir("iter_ckpt_err");
  auto it = Dataset::range(3).interleave([](const Element&) { return Dataset::range(2); }).iter();
  Checkpoint ckpt({{"iterator", it}});
  expect_error([&] { ckpt.write(dir.file("a")); }, ErrorCode::UNIMPLEMENTED, {"InterleaveDataset"});

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
}

// --- distributed iterators ---------------------------------------------------

class DistributedIteratorCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    strata::internal::reset_runtime_for_testing();
    config::set_logical_device_configuration(config::list_physical_devices("CPU")[0],
                                             std::vector<config::LogicalDeviceConfiguration>(4));
  }
  static std::vector<std::string> cpus(int n) {
    std::vector<std::string> d;
    d.reserve(n);
    for (int i = 0; i < n; ++i) d.push_back("CPU:" + std::to_string(i));
    return d;
  }
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
    distribute::MirroredStrategy s(cpus(2));
    auto it = s.experimental_distribute_dataset(make()).iter();
    uninterrupted = global_steps(it, 100);
  }
  ASSERT_EQ(uninterrupted.size(), 16u);
  std::string path;
  {
    distribute::MirroredStrategy s(cpus(2));
    auto it = s.experimental_distribute_dataset(make()).iter();
    auto head = global_steps(it, 3);
    path = Checkpoint({{"iterator", it}}).write(dir.file("ckpt"));
    auto rest = global_steps(it, 100);
    head.insert(head.end(), rest.begin(), rest.end());
    EXPECT_EQ(head, uninterrupted);
  }
  const std::vector<std::vector<int64_t>> expected(uninterrupted.begin() + 3, uninterrupted.end());
  for (int replicas : {2, 3, 4}) {
    distribute::MirroredStrategy s(cpus(replicas));
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
  distribute::MirroredStrategy s(cpus(2));
  auto it = s.distribute_datasets_from_function(fn).iter();
  global_steps(it, 2);
  const std::string path = Checkpoint({{"iterator", it}}).write(dir.file("ckpt"));
  auto rest = global_steps(it, 100);
  auto fresh = s.distribute_datasets_from_function(fn).iter();
  Checkpoint({{"iterator", fresh}}).read(path).assert_consumed();
  EXPECT_EQ(global_steps(fresh, 100), rest);
  EXPECT_EQ(rest.size(), 8u);  // 20 batches of 2, 10 steps, 2 read
}

}  // namespace
}  // namespace strata::train
