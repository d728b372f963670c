#include "strata/data/dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/io/tfrecord.h"

namespace strata::data {
namespace {

using Ints = std::vector<int64_t>;

// The first component of every element, each flattened.
std::vector<Ints> rows(const Dataset& ds) {
  std::vector<Ints> out;
  for (const Element& e : ds) out.push_back(e[0].to_vector<int64_t>());
  return out;
}
// Scalars of the first component.
Ints values(const Dataset& ds) {
  Ints out;
  for (const Element& e : ds) out.push_back(e[0].item<int64_t>());
  return out;
}
Tensor ints(const Ints& v) { return constant(v); }

TEST(DatasetSources, RangeFollowsStartStopAndStep) {
  EXPECT_EQ(values(Dataset::range(5)), (Ints{0, 1, 2, 3, 4}));
  EXPECT_EQ(values(Dataset::range(2, 10, 3)), (Ints{2, 5, 8}));
  EXPECT_EQ(values(Dataset::range(5, 0, -2)), (Ints{5, 3, 1}));
  EXPECT_EQ(values(Dataset::range(0)), Ints{});
  EXPECT_THROW(Dataset::range(0, 5, 0), InvalidArgumentError);
}

// TensorFlow:
//   tf.data.Dataset.range(10).batch(3).cardinality()          # 4
//   tf.data.Dataset.range(10).batch(3, True).cardinality()    # 3
//   tf.data.Dataset.range(10).repeat().cardinality()          # INFINITE_CARDINALITY (-1)
//   tf.data.Dataset.range(10).filter(f).cardinality()         # UNKNOWN_CARDINALITY (-2)
TEST(DatasetCardinality, FollowsTensorFlowsRulesThroughTheGraph) {
  const Dataset ten = Dataset::range(10);
  EXPECT_EQ(ten.cardinality(), 10);
  EXPECT_EQ(Dataset::range(10, 0, -3).cardinality(), 4);  // 10, 7, 4, 1
  EXPECT_EQ(Dataset::range(2, 10, 3).cardinality(), 3);   // 2, 5, 8
  EXPECT_EQ(Dataset::range(5, 0, 1).cardinality(), 0);
  EXPECT_EQ(Dataset::from_tensors({ints({1, 2})}).cardinality(), 1);
  EXPECT_EQ(Dataset::from_tensor_slices({ints({1, 2, 3})}).cardinality(), 3);
  EXPECT_EQ(ten.batch(3).cardinality(), 4);
  EXPECT_EQ(ten.batch(3, /*drop_remainder=*/true).cardinality(), 3);
  EXPECT_EQ(ten.repeat().cardinality(), INFINITE_CARDINALITY);
  EXPECT_EQ(ten.repeat(2).cardinality(), 20);
  EXPECT_EQ(ten.repeat().take(7).cardinality(), 7);
  EXPECT_EQ(ten.take(15).cardinality(), 10);
  EXPECT_EQ(ten.skip(3).cardinality(), 7);
  EXPECT_EQ(ten.skip(12).cardinality(), 0);
  EXPECT_EQ(ten.shard(3, 1).cardinality(), 3);  // elements 1, 4, 7
  EXPECT_EQ(ten.shard(3, 0).cardinality(), 4);  // 0, 3, 6, 9
  EXPECT_EQ(ten.map([](const Element& e) { return e; }).prefetch(2).cardinality(), 10);
  EXPECT_EQ(ten.shuffle(4).enumerate().cache().cardinality(), 10);
  EXPECT_EQ(Dataset::zip({ten, Dataset::range(4), ten.repeat()}).cardinality(), 4);
  EXPECT_EQ(ten.concatenate(Dataset::range(5)).cardinality(), 15);
  EXPECT_EQ(ten.concatenate(ten.repeat()).cardinality(), INFINITE_CARDINALITY);
  const Dataset filtered = ten.filter([](const Element&) { return true; });
  EXPECT_EQ(filtered.cardinality(), UNKNOWN_CARDINALITY);
  EXPECT_EQ(filtered.batch(2).cardinality(), UNKNOWN_CARDINALITY);
  EXPECT_EQ(Dataset::zip({ten, filtered}).cardinality(), UNKNOWN_CARDINALITY);
  EXPECT_EQ(ten.batch(2).unbatch().cardinality(), UNKNOWN_CARDINALITY);
  // The counts agree with iteration.
  EXPECT_EQ(static_cast<int64_t>(values(ten.shard(3, 1)).size()), 3);
  EXPECT_EQ(static_cast<int64_t>(rows(ten.batch(3)).size()), 4);
}

TEST(DatasetSources, FromTensorSlicesSlicesEveryComponentAlongDimZero) {
  auto x = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {3, 2});
  auto y = ints({7, 8, 9});
  auto ds = Dataset::from_tensor_slices({x, y});
  auto spec = ds.element_spec();
  ASSERT_EQ(spec.size(), 2u);
  EXPECT_EQ(spec[0].shape, (TensorShape{2}));
  EXPECT_EQ(spec[1].shape, TensorShape{});
  std::vector<std::vector<float>> xs;
  Ints ys;
  for (const Element& e : ds) {
    xs.push_back(e[0].to_vector<float>());
    ys.push_back(e[1].item<int64_t>());
  }
  EXPECT_EQ(xs, (std::vector<std::vector<float>>{{1, 2}, {3, 4}, {5, 6}}));
  EXPECT_EQ(ys, (Ints{7, 8, 9}));
}

TEST(DatasetSources, FromTensorSlicesWithMismatchedLeadingDimsNamesBoth) {
  try {
    Dataset::from_tensor_slices({ints({1, 2, 3}), ints({1, 2})});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("3 (component 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2 (component 1"), std::string::npos) << e.what();
  }
}

TEST(DatasetSources, FromTensorsIsOneElement) {
  auto ds = Dataset::from_tensors({ints({1, 2})});
  EXPECT_EQ(rows(ds), (std::vector<Ints>{{1, 2}}));
  EXPECT_EQ(ds.element_spec()[0].shape, (TensorShape{2}));
}

TEST(DatasetIteration, GetNextThrowsOutOfRangeAtTheEnd) {
  auto it = Dataset::range(1).iter();
  EXPECT_EQ(it.get_next()[0].item<int64_t>(), 0);
  EXPECT_THROW(it.get_next(), OutOfRangeError);
  EXPECT_FALSE(it.next().has_value());
  EXPECT_FALSE(it.get_next_as_optional().has_value());
}

TEST(DatasetIteration, EachIterationStartsFromTheBeginning) {
  auto ds = Dataset::range(3).map([](const Element& e) { return e; });
  EXPECT_EQ(values(ds), (Ints{0, 1, 2}));
  EXPECT_EQ(values(ds), (Ints{0, 1, 2}));
}

TEST(DatasetGenerator, YieldsTheCallableElementsAndChecksTheSignature) {
  auto make = [](int64_t n) {
    return [n]() -> GeneratorFn {
      auto i = std::make_shared<int64_t>(0);
      return [i, n]() -> std::optional<Element> {
        if (*i == n) return std::nullopt;
        return Element{constant((*i)++ * 10)};
      };
    };
  };
  EXPECT_EQ(values(Dataset::from_generator(make(3), {TensorSpec({}, int64)})), (Ints{0, 10, 20}));
  auto bad = Dataset::from_generator(make(3), {TensorSpec({}, float32)});
  EXPECT_THROW(values(bad), InvalidArgumentError);
}

TEST(DatasetBatch, KeepsThePartialLastBatch) {
  EXPECT_EQ(rows(Dataset::range(7).batch(3)), (std::vector<Ints>{{0, 1, 2}, {3, 4, 5}, {6}}));
  EXPECT_EQ(Dataset::range(7).batch(3).element_spec()[0].shape, (TensorShape{-1}));
}

TEST(DatasetBatch, DropRemainderDropsItAndMakesTheBatchDimStatic) {
  auto ds = Dataset::range(7).batch(3, true);
  EXPECT_EQ(rows(ds), (std::vector<Ints>{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(ds.element_spec()[0].shape, (TensorShape{3}));
}

TEST(DatasetBatch, BatchLargerThanTheDataset) {
  EXPECT_EQ(rows(Dataset::range(3).batch(10)), (std::vector<Ints>{{0, 1, 2}}));
  EXPECT_TRUE(rows(Dataset::range(3).batch(10, true)).empty());
  EXPECT_TRUE(rows(Dataset::range(0).batch(2)).empty());
}

TEST(DatasetBatch, StacksMultiDimensionalAndStringComponents) {
  auto x = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {3, 2});
  auto s = constant(std::vector<std::string>{"a", "bb", "ccc"}, {3});
  auto it = Dataset::from_tensor_slices({x, s}).batch(2).iter();
  auto e = it.get_next();
  EXPECT_EQ(e[0].shape(), (TensorShape{2, 2}));
  EXPECT_EQ(e[0].to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(e[1].to_vector<std::string>(), (std::vector<std::string>{"a", "bb"}));
  e = it.get_next();
  EXPECT_EQ(e[1].to_vector<std::string>(), (std::vector<std::string>{"ccc"}));
}

TEST(DatasetBatch, ShapeMismatchNamesTheElementAndBothShapes) {
  auto ds = Dataset::range(1, 4).map([](const Element& e) {
    return Element{constant(std::vector<int64_t>(e[0].item<int64_t>(), 1))};
  });
  try {
    values(ds.batch(3));
    FAIL();
  } catch (const InvalidArgumentError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("element 1"), std::string::npos) << m;
    EXPECT_NE(m.find("[1]"), std::string::npos) << m;
    EXPECT_NE(m.find("[2]"), std::string::npos) << m;
  }
}

TEST(DatasetPaddedBatch, PadsToTheLongestWithZerosOrToTheGivenShape) {
  auto ds = Dataset::range(1, 4).map([](const Element& e) {
    const int64_t n = e[0].item<int64_t>();
    return Element{constant(std::vector<int64_t>(n, n))};
  });
  EXPECT_EQ(rows(ds.padded_batch(2)), (std::vector<Ints>{{1, 0, 2, 2}, {3, 3, 3}}));
  auto fixed = ds.padded_batch(
      2, {.padded_shapes = {TensorShape{4}}, .padding_values = {constant(int64_t{-1})}});
  EXPECT_EQ(rows(fixed), (std::vector<Ints>{{1, -1, -1, -1, 2, 2, -1, -1}, {3, 3, 3, -1}}));
  EXPECT_EQ(fixed.element_spec()[0].shape, (TensorShape{-1, 4}));
  auto too_small = ds.padded_batch(3, {.padded_shapes = {TensorShape{2}}});
  EXPECT_THROW(rows(too_small), InvalidArgumentError);
}

TEST(DatasetUnbatch, SplitsBatchesBackIntoRows) {
  EXPECT_EQ(values(Dataset::range(5).batch(2).unbatch()), (Ints{0, 1, 2, 3, 4}));
  EXPECT_EQ(Dataset::range(5).batch(2).unbatch().element_spec()[0].shape, TensorShape{});
  EXPECT_THROW(Dataset::range(5).unbatch(), InvalidArgumentError);
}

TEST(DatasetRebatch, BatchSizesSplitSevenOverTwoWorkersOfTwoReplicas) {
  auto ds = Dataset::range(14).batch(7);
  EXPECT_EQ(rows(ds.rebatch({2, 2, 2, 1})),
            (std::vector<Ints>{{0, 1}, {2, 3}, {4, 5}, {6}, {7, 8}, {9, 10}, {11, 12}, {13}}));
  EXPECT_EQ(rows(ds.rebatch({2, 1, 2, 2})),
            (std::vector<Ints>{{0, 1}, {2}, {3, 4}, {5, 6}, {7, 8}, {9}, {10, 11}, {12, 13}}));
}

TEST(DatasetRebatch, ZeroSizesGiveEmptyBatchesWithoutConsumingInput) {
  auto out = rows(Dataset::range(4).batch(2).rebatch({1, 1, 0, 0}));
  EXPECT_EQ(out, (std::vector<Ints>{{0}, {1}, {}, {}, {2}, {3}, {}, {}}));
}

TEST(DatasetRebatch, PullsRowsAcrossInputBatchesAndHonoursDropRemainder) {
  EXPECT_EQ(rows(Dataset::range(5).batch(2).rebatch({3})), (std::vector<Ints>{{0, 1, 2}, {3, 4}}));
  EXPECT_EQ(rows(Dataset::range(5).batch(2).rebatch({3}, true)), (std::vector<Ints>{{0, 1, 2}}));
  EXPECT_EQ(Dataset::range(8).batch(4, true).rebatch({2}, true).element_spec()[0].shape,
            (TensorShape{2}));
}

TEST(DatasetRebatch, LegacyCutsEachBatchIntoCeilSizedPieces) {
  EXPECT_EQ(rows(Dataset::range(4).batch(4).rebatch_legacy(3)),
            (std::vector<Ints>{{0, 1}, {2, 3}, {}}));
  EXPECT_EQ(rows(Dataset::range(8).batch(8).rebatch_legacy(3)),
            (std::vector<Ints>{{0, 1, 2}, {3, 4, 5}, {6, 7}}));
  EXPECT_EQ(Dataset::range(8).batch(8, true).rebatch_legacy(2).element_spec()[0].shape,
            (TensorShape{4}));
  EXPECT_EQ(Dataset::range(8).batch(8, true).rebatch_legacy(3).element_spec()[0].shape,
            (TensorShape{-1}));
}

TEST(DatasetRebatch, ScalarComponentsAreRejected) {
  try {
    Dataset::range(4).rebatch({2});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Perhaps your input dataset is not batched?"),
              std::string::npos);
  }
}

TEST(DatasetShuffle, SeededShuffleIsADeterministicPermutation) {
  auto a = values(Dataset::range(20).shuffle(5, {.seed = 42}));
  auto b = values(Dataset::range(20).shuffle(5, {.seed = 42}));
  EXPECT_EQ(a, b);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, values(Dataset::range(20)));
  EXPECT_NE(a, values(Dataset::range(20)));
}

TEST(DatasetShuffle, BufferBoundsHowFarAnElementMoves) {
  // With a buffer of k, output i is one of the first i + k inputs.
  auto a = values(Dataset::range(50).shuffle(3, {.seed = 1}));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(a[i], static_cast<int64_t>(i + 3));
  EXPECT_EQ(values(Dataset::range(5).shuffle(1, {.seed = 3})), (Ints{0, 1, 2, 3, 4}));
}

TEST(DatasetShuffle, ReshuffleEachIterationControlsTheEpochOrder) {
  auto same = Dataset::range(20).shuffle(20, {.seed = 9, .reshuffle_each_iteration = false});
  EXPECT_EQ(values(same), values(same));
  auto fresh = Dataset::range(20).shuffle(20, {.seed = 9});
  auto first = values(fresh), second = values(fresh);
  EXPECT_NE(first, second);
  // Reshuffling is seeded too: a new dataset with the same seed replays both epochs.
  auto again = Dataset::range(20).shuffle(20, {.seed = 9});
  EXPECT_EQ(values(again), first);
  EXPECT_EQ(values(again), second);
}

TEST(DatasetRepeat, RepeatsCountTimesOrForever) {
  EXPECT_EQ(values(Dataset::range(2).repeat(3)), (Ints{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(values(Dataset::range(2).repeat(0)), Ints{});
  EXPECT_EQ(values(Dataset::range(3).repeat().take(7)), (Ints{0, 1, 2, 0, 1, 2, 0}));
}

TEST(DatasetRepeat, RepeatOfAnEmptyDatasetEnds) {
  EXPECT_EQ(values(Dataset::range(0).repeat()), Ints{});
  EXPECT_EQ(values(Dataset::range(0).repeat(5)), Ints{});
}

TEST(DatasetRepeat, APassOverASourceStartsOverAsAFreshIteratorWouldAndSavesAcrossIt) {
  // repeat() starts each pass of from_tensors / from_tensor_slices over in
  // the same iterator (IteratorImpl::rewind) instead of making a new one.
  EXPECT_EQ(values(Dataset::from_tensor_slices({ints({1, 2, 3})}).repeat(3)),
            (Ints{1, 2, 3, 1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(values(Dataset::from_tensors({constant(int64_t{7})}).repeat(4)), (Ints{7, 7, 7, 7}));
  EXPECT_EQ(values(Dataset::from_tensor_slices({ints({1, 2})}).repeat().take(5)),
            (Ints{1, 2, 1, 2, 1}));
  // Saved mid-pass, at the end of a pass and right after a pass started over.
  const Dataset ds = Dataset::from_tensor_slices({ints({1, 2, 3})}).repeat();
  for (int before : {2, 3, 4, 6, 7}) {
    SCOPED_TRACE(before);
    Iterator it = ds.iter();
    for (int i = 0; i < before; ++i) it.get_next();
    const Tensor state = it.save_state();
    Ints expected;
    for (int i = 0; i < 4; ++i) expected.push_back(it.get_next()[0].item<int64_t>());
    Iterator restored = ds.iter();
    restored.restore_state(state);
    Ints got;
    for (int i = 0; i < 4; ++i) got.push_back(restored.get_next()[0].item<int64_t>());
    EXPECT_EQ(got, expected);
    EXPECT_EQ(expected[0], before % 3 + 1);
  }
}

TEST(DatasetTakeSkip, TakeAndSkipHandleZeroAllAndBeyondTheEnd) {
  EXPECT_EQ(values(Dataset::range(5).take(0)), Ints{});
  EXPECT_EQ(values(Dataset::range(5).take(2)), (Ints{0, 1}));
  EXPECT_EQ(values(Dataset::range(5).take(9)), (Ints{0, 1, 2, 3, 4}));
  EXPECT_EQ(values(Dataset::range(5).take(-1)), (Ints{0, 1, 2, 3, 4}));
  EXPECT_EQ(values(Dataset::range(5).skip(3)), (Ints{3, 4}));
  EXPECT_EQ(values(Dataset::range(5).skip(9)), Ints{});
  EXPECT_EQ(values(Dataset::range(5).skip(-1)), Ints{});
  EXPECT_EQ(values(Dataset::range(5).skip(0)), (Ints{0, 1, 2, 3, 4}));
}

TEST(DatasetShard, KeepsEveryNthElementFromIndex) {
  EXPECT_EQ(values(Dataset::range(10).shard(3, 1)), (Ints{1, 4, 7}));
  EXPECT_EQ(values(Dataset::range(10).shard(3, 0)), (Ints{0, 3, 6, 9}));
  EXPECT_EQ(values(Dataset::range(2).shard(4, 3)), Ints{});
  EXPECT_EQ(values(Dataset::range(2).shard(4, 1)), (Ints{1}));
}

TEST(DatasetShard, RejectsBadShardArguments) {
  EXPECT_THROW(Dataset::range(4).shard(2, 2), InvalidArgumentError);
  EXPECT_THROW(Dataset::range(4).shard(0, 0), InvalidArgumentError);
  EXPECT_THROW(Dataset::range(4).shard(2, -1), InvalidArgumentError);
  EXPECT_THROW(values(Dataset::range(4).shard(SHARD_HINT, 0)), InvalidArgumentError);
}

TEST(DatasetMap, AppliesTheFunctionInOrder) {
  auto ds = Dataset::range(4).map(
      [](const Element& e) { return Element{constant(e[0].item<int64_t>() * 2)}; });
  EXPECT_EQ(values(ds), (Ints{0, 2, 4, 6}));
  EXPECT_EQ(ds.element_spec()[0], TensorSpec({}, int64));
}

TEST(DatasetMap, ParallelMapKeepsOrderWhenDeterministic) {
  auto fn = [](const Element& e) { return Element{constant(e[0].item<int64_t>() + 100)}; };
  Ints expected;
  for (int64_t i = 0; i < 200; ++i) expected.push_back(i + 100);
  EXPECT_EQ(values(Dataset::range(200).map(fn, {.num_parallel_calls = 4})), expected);
  EXPECT_EQ(values(Dataset::range(200).map(fn, {.num_parallel_calls = AUTOTUNE})), expected);
  auto any = values(Dataset::range(200).map(fn, {.num_parallel_calls = 4, .deterministic = false}));
  std::sort(any.begin(), any.end());
  EXPECT_EQ(any, expected);
}

TEST(DatasetMap, ParallelMapRunsAtMostNumParallelCallsAheadOfTheConsumer) {
  // TF's ParallelMapDataset keeps num_parallel_calls results in flight or
  // waiting: the function never runs on an element further ahead. Each
  // element taken frees one place, and the idle workers all wake for it.
  constexpr int64_t kCalls = 4;
  for (bool deterministic : {true, false}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "non-deterministic");
    std::atomic<int64_t> started{0};
    auto ds = Dataset::range(400).map(
        [&started](const Element& e) {
          ++started;
          return e;
        },
        {.num_parallel_calls = kCalls, .deterministic = deterministic});
    Iterator it = ds.iter();
    int64_t consumed = 0;
    int64_t most_ahead = 0;
    while (it.next()) {
      ++consumed;
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // the workers catch up
      most_ahead = std::max(most_ahead, started.load() - consumed);
    }
    EXPECT_EQ(consumed, 400);
    EXPECT_LE(most_ahead, kCalls);
  }
}

TEST(DatasetMap, ErrorsReachTheConsumerWithTheirTypeInOrder) {
  auto fn = [](const Element& e) {
    if (e[0].item<int64_t>() == 2) throw NotFoundError("map: element 2 missing");
    return e;
  };
  for (int64_t p : {int64_t{1}, int64_t{3}}) {
    auto it = Dataset::range(5)
                  .map(fn, {.num_parallel_calls = p, .output_signature = {TensorSpec({}, int64)}})
                  .iter();
    EXPECT_EQ(it.get_next()[0].item<int64_t>(), 0);
    EXPECT_EQ(it.get_next()[0].item<int64_t>(), 1);
    EXPECT_THROW(it.get_next(), NotFoundError);
    // As in TF, iteration may continue after an element's error.
    EXPECT_EQ(it.get_next()[0].item<int64_t>(), 3);
  }
}

TEST(DatasetFilter, KeepsElementsThatMatch) {
  auto even = [](const Element& e) { return e[0].item<int64_t>() % 2 == 0; };
  EXPECT_EQ(values(Dataset::range(7).filter(even)), (Ints{0, 2, 4, 6}));
  EXPECT_EQ(values(Dataset::range(7).filter([](const Element&) { return false; })), Ints{});
}

TEST(DatasetPrefetch, DeliversEveryElementInOrder) {
  Ints expected;
  for (int64_t i = 0; i < 100; ++i) expected.push_back(i);
  EXPECT_EQ(values(Dataset::range(100).prefetch(3)), expected);
  EXPECT_EQ(values(Dataset::range(100).prefetch(AUTOTUNE)), expected);
  EXPECT_EQ(values(Dataset::range(100).prefetch(0)), expected);
}

TEST(DatasetPrefetch, ErrorsKeepTheirTypeAndPosition) {
  auto ds = Dataset::range(4)
                .map(
                    [](const Element& e) {
                      if (e[0].item<int64_t>() == 1) throw DataLossError("bad record 1");
                      return e;
                    },
                    {.output_signature = {TensorSpec({}, int64)}})
                .prefetch(2);
  auto it = ds.iter();
  EXPECT_EQ(it.get_next()[0].item<int64_t>(), 0);
  EXPECT_THROW(it.get_next(), DataLossError);
  EXPECT_EQ(it.get_next()[0].item<int64_t>(), 2);
}

TEST(DatasetPrefetch, DestroyingTheIteratorMidPrefetchJoinsTheProducer) {
  // An endless generator: the producer is blocked on the full buffer when the
  // iterator dies. The generator's state is freed only once the thread joined.
  auto alive = std::make_shared<std::atomic<int>>(0);
  std::weak_ptr<int64_t> state;
  Mutex mu;
  auto ds = Dataset::from_generator(
      [alive, &state, &mu]() -> GeneratorFn {
        auto counter = std::make_shared<int64_t>(0);
        {
          MutexLock l(mu);
          state = counter;
        }
        return [counter]() -> std::optional<Element> { return Element{constant((*counter)++)}; };
      },
      {TensorSpec({}, int64)});
  for (int64_t p : {int64_t{2}, AUTOTUNE}) {
    {
      auto it =
          ds.map([](const Element& e) { return e; }, {.num_parallel_calls = 2}).prefetch(p).iter();
      EXPECT_EQ(it.get_next()[0].item<int64_t>(), 0);
      EXPECT_EQ(it.get_next()[0].item<int64_t>(), 1);
    }
    MutexLock l(mu);
    EXPECT_TRUE(state.expired());
  }
}

TEST(DatasetPrefetch, DestroyingTheIteratorWhileTheGeneratorIsBusyWaitsForIt) {
  // The generator blocks inside a call until the test releases it; the
  // iterator's destructor must wait for that call and then join.
  Mutex mu;
  CondVar cv;
  bool release = false;
  int calls = 0;
  auto ds = Dataset::from_generator(
      [&]() -> GeneratorFn {
        return [&]() -> std::optional<Element> {
          MutexLock l(mu);
          ++calls;
          cv.notify_all();
          if (calls > 1) cv.wait(mu, [&] { return release; });
          return Element{constant(int64_t{calls})};
        };
      },
      {TensorSpec({}, int64)});
  auto it = std::make_unique<Iterator>(ds.prefetch(1).iter());
  EXPECT_EQ(it->get_next()[0].item<int64_t>(), 1);
  {
    MutexLock l(mu);
    cv.wait(mu, [&] { return calls >= 2; });  // the producer is inside call 2
    release = true;
  }
  cv.notify_all();
  it.reset();
  SUCCEED();
}

TEST(DatasetInterleave, FollowsTheDocumentedCycleAndBlockOrder) {
  // tf.data's interleave docs: range(1, 6).interleave(from_tensors(x).repeat(6),
  // cycle_length=2, block_length=4).
  auto fn = [](const Element& e) { return Dataset::from_tensors(e).repeat(6); };
  Ints expected{1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3,
                3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5};
  EXPECT_EQ(values(Dataset::range(1, 6).interleave(fn, {.cycle_length = 2, .block_length = 4})),
            expected);
  EXPECT_EQ(values(Dataset::range(1, 6).interleave(
                fn, {.cycle_length = 2, .block_length = 4, .num_parallel_calls = AUTOTUNE})),
            expected);
}

TEST(DatasetInterleave, FlatMapConcatenatesTheInnerDatasets) {
  auto fn = [](const Element& e) { return Dataset::range(e[0].item<int64_t>()); };
  EXPECT_EQ(values(Dataset::range(4).flat_map(fn)), (Ints{0, 0, 1, 0, 1, 2}));
}

TEST(DatasetZip, StopsAtTheShortestAndConcatenatesComponents) {
  auto ds = Dataset::zip({Dataset::range(3), Dataset::range(10, 20)});
  ASSERT_EQ(ds.element_spec().size(), 2u);
  std::vector<Ints> got;
  for (const Element& e : ds) got.push_back({e[0].item<int64_t>(), e[1].item<int64_t>()});
  EXPECT_EQ(got, (std::vector<Ints>{{0, 10}, {1, 11}, {2, 12}}));
}

TEST(DatasetConcatenate, AppendsAndChecksSpecs) {
  EXPECT_EQ(values(Dataset::range(2).concatenate(Dataset::range(5, 7))), (Ints{0, 1, 5, 6}));
  EXPECT_EQ(values(Dataset::range(0).concatenate(Dataset::range(2))), (Ints{0, 1}));
  auto f = Dataset::from_tensors({constant(1.f)});
  EXPECT_THROW(Dataset::range(2).concatenate(f), InvalidArgumentError);
  auto a = Dataset::from_tensors({ints({1, 2})}), b = Dataset::from_tensors({ints({1, 2, 3})});
  EXPECT_EQ(a.concatenate(b).element_spec()[0].shape, (TensorShape{-1}));
}

TEST(DatasetEnumerate, PrependsAnInt64Index) {
  auto ds = Dataset::range(10, 13).enumerate();
  EXPECT_EQ(ds.element_spec()[0], TensorSpec({}, int64));
  std::vector<Ints> got;
  for (const Element& e : ds) got.push_back({e[0].item<int64_t>(), e[1].item<int64_t>()});
  EXPECT_EQ(got, (std::vector<Ints>{{0, 10}, {1, 11}, {2, 12}}));
}

TEST(DatasetCache, SecondIterationIsServedFromTheCache) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto ds = Dataset::range(3)
                .map(
                    [calls](const Element& e) {
                      ++*calls;
                      return e;
                    },
                    {.output_signature = {TensorSpec({}, int64)}})
                .cache();
  EXPECT_EQ(values(ds), (Ints{0, 1, 2}));
  EXPECT_EQ(values(ds), (Ints{0, 1, 2}));
  EXPECT_EQ(*calls, 3);
}

TEST(DatasetCache, APartialFirstIterationDoesNotPoisonTheCache) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto ds = Dataset::range(3)
                .map(
                    [calls](const Element& e) {
                      ++*calls;
                      return e;
                    },
                    {.output_signature = {TensorSpec({}, int64)}})
                .cache();
  {
    auto it = ds.iter();
    it.get_next();
  }
  EXPECT_EQ(values(ds), (Ints{0, 1, 2}));
  EXPECT_EQ(values(ds), (Ints{0, 1, 2}));
  EXPECT_EQ(*calls, 4);
}

TEST(DatasetOptions, LaterOptionsOverrideEarlierOnes) {
  Options a;
  a.experimental_distribute.auto_shard_policy = AutoShardPolicy::FILE;
  a.deterministic = false;
  Options b;
  b.experimental_distribute.auto_shard_policy = AutoShardPolicy::DATA;
  auto ds =
      Dataset::range(3).with_options(a).map([](const Element& e) { return e; }).with_options(b);
  EXPECT_EQ(ds.options().experimental_distribute.policy(), AutoShardPolicy::DATA);
  EXPECT_EQ(ds.options().deterministic, std::optional<bool>(false));
  EXPECT_EQ(Dataset::range(1).options().experimental_distribute.policy(), AutoShardPolicy::AUTO);
  EXPECT_EQ(values(ds), (Ints{0, 1, 2}));
}

TEST(DatasetSpec, SpecsPropagateThroughTransformations) {
  auto x = Tensor::allocate(float32, {10, 28, 28});
  auto y = Tensor::allocate(int64, {10});
  auto ds = Dataset::from_tensor_slices({x, y}).shuffle(4, {.seed = 1}).batch(4, true).prefetch(1);
  auto spec = ds.element_spec();
  EXPECT_EQ(spec[0], TensorSpec({4, 28, 28}, float32));
  EXPECT_EQ(spec[1], TensorSpec({4}, int64));
  EXPECT_EQ(ds.unbatch().enumerate().element_spec()[2], TensorSpec({}, int64));
}

class FileDatasets : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("strata_data_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  static std::vector<std::string> strings(const Dataset& ds) {
    std::vector<std::string> out;
    for (const Element& e : ds) out.push_back(e[0].item<std::string>());
    return out;
  }
  std::filesystem::path dir_;
};

TEST_F(FileDatasets, ListFilesIsSortedUnlessShuffled) {
  for (const char* n : {"b.txt", "a.txt", "c.txt", "d.bin"}) write(n, "x");
  auto sorted = strings(Dataset::list_files(path("*.txt"), {.shuffle = false}));
  EXPECT_EQ(sorted, (std::vector<std::string>{path("a.txt"), path("b.txt"), path("c.txt")}));
  auto shuffled = strings(Dataset::list_files(path("*.txt"), {.seed = 3}));
  std::sort(shuffled.begin(), shuffled.end());
  EXPECT_EQ(shuffled, sorted);
  try {
    Dataset::list_files(path("*.none"));
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("No files matched pattern"), std::string::npos);
  }
}

TEST_F(FileDatasets, TextLineDatasetReadsLinesOfEveryFileInOrder) {
  write("a.txt", "one\ntwo\n");
  write("b.txt", "three\r\nfour");
  EXPECT_EQ(strings(TextLineDataset({path("a.txt"), path("b.txt")})),
            (std::vector<std::string>{"one", "two", "three", "four"}));
}

TEST_F(FileDatasets, TFRecordDatasetReadsWhatTheWriterWrote) {
  for (std::string ct : {"", "GZIP"}) {
    {
      io::TFRecordWriter w(path("r" + ct), {.compression_type = ct});
      w.write("alpha");
      w.write("");
      w.write("gamma");
      w.close();
    }
    EXPECT_EQ(strings(TFRecordDataset({path("r" + ct)}, {.compression_type = ct})),
              (std::vector<std::string>{"alpha", "", "gamma"}));
  }
  write("bad", "not a tfrecord file at all");
  EXPECT_THROW(strings(TFRecordDataset({path("bad")})), DataLossError);
}

TEST_F(FileDatasets, FixedLengthRecordDatasetSkipsHeaderAndFooter) {
  write("f.bin", "HHabcdefFF");
  EXPECT_EQ(strings(FixedLengthRecordDataset({path("f.bin")}, 3, 2, 2)),
            (std::vector<std::string>{"abc", "def"}));
}

TEST_F(FileDatasets, ListFilesInterleavedWithReaders) {
  write("0.txt", "a\nb\n");
  write("1.txt", "c\nd\n");
  auto ds =
      Dataset::list_files(path("*.txt"), {.shuffle = false})
          .interleave([](const Element& f) { return TextLineDataset({f[0].item<std::string>()}); },
                      {.cycle_length = 2});
  EXPECT_EQ(strings(ds), (std::vector<std::string>{"a", "c", "b", "d"}));
}

// dataset = tf.data.Dataset.from_tensor_slices({"a": [1, 2], "b": [3, 4]})
// list(dataset.as_numpy_iterator()) == [{'a': 1, 'b': 3}, {'a': 2, 'b': 4}]
TEST(DatasetNamedComponents, FromTensorSlicesOfADictGivesDictElements) {
  auto dataset = Dataset::from_tensor_slices({{"a", ints({1, 2})}, {"b", ints({3, 4})}});
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const Element& e : dataset) {
    EXPECT_EQ(e.names(), (std::vector<std::string>{"a", "b"}));
    got.emplace_back(e["a"].item<int64_t>(), e["b"].item<int64_t>());
  }
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {2, 4}}));
  // Components are in name order, as tf.nest flattens a dict: {"b": ..., "a": ...} too.
  auto reordered = Dataset::from_tensor_slices({{"b", ints({3, 4})}, {"a", ints({1, 2})}});
  EXPECT_EQ(values(reordered), (Ints{1, 2}));
}

// ds = tf.data.Dataset.from_tensor_slices({"a": [1, 2, 3], "b": ["foo", "bar", "baz"]})
// ds = ds.map(lambda d: {"a": d["a"] * 2, "b": d["b"]}).batch(2)
// list(ds.as_numpy_iterator())
//   == [{'a': [2, 4], 'b': [b'foo', b'bar']}, {'a': [6], 'b': [b'baz']}]
TEST(DatasetNamedComponents, MapAndBatchKeepTheNames) {
  auto ds =
      Dataset::from_tensor_slices(
          {{"a", ints({1, 2, 3})}, {"b", constant(std::vector<std::string>{"foo", "bar", "baz"})}})
          .map([](const Element& d) -> Element {
            return {{"a", constant(d["a"].item<int64_t>() * 2)}, {"b", d["b"]}};
          })
          .batch(2);
  std::vector<Ints> a;
  std::vector<std::vector<std::string>> b;
  for (const Element& e : ds) {
    a.push_back(e["a"].to_vector<int64_t>());
    b.push_back(e["b"].to_vector<std::string>());
  }
  EXPECT_EQ(a, (std::vector<Ints>{{2, 4}, {6}}));
  EXPECT_EQ(b, (std::vector<std::vector<std::string>>{{"foo", "bar"}, {"baz"}}));
  // unbatch, rebatch, shuffle, take and prefetch keep them too.
  auto again = ds.unbatch().batch(3).rebatch({1, 2}).shuffle(4, {.seed = 1}).take(5).prefetch(1);
  int64_t total = 0;
  for (const Element& e : again) {
    EXPECT_EQ(e.names(), (std::vector<std::string>{"a", "b"}));
    for (int64_t v : e["a"].to_vector<int64_t>()) total += v;
  }
  EXPECT_EQ(total, 12);
}

TEST(DatasetNamedComponents, AMissingNameOrANestedStructureIsAnError) {
  auto ds = Dataset::from_tensor_slices({{"feature", ints({1, 2})}, {"label", ints({0, 1})}});
  const Element first = ds.iter().get_next();
  try {
    (void)first["labels"];
    ADD_FAILURE() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("no component named 'labels'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("[feature, label]"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)Element{ints({1})}["feature"], InvalidArgumentError);
  EXPECT_EQ(first.as_dict().at("label").item<int64_t>(), 0);
  // TF gives (i, {...}) and ({...}, x): nested structures, which flat elements cannot hold.
  EXPECT_THROW(ds.enumerate().iter().get_next(), UnimplementedError);
  EXPECT_THROW(Dataset::zip({ds, Dataset::range(2)}).iter().get_next(), UnimplementedError);
}

}  // namespace
}  // namespace strata::data
