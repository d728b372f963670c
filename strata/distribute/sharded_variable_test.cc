#include "strata/distribute/sharded_variable.h"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/core/device.h"
#include "strata/distribute/partitioners.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"
#include "strata/testing/expect_error.h"
#include "strata/testing/logical_devices.h"

namespace strata::distribute {
namespace {

using Ints = std::vector<int64_t>;
using Floats = std::vector<float>;

using testing::expect_invalid_argument;

// rows x cols float32 table whose element (r, c) is r * 10 + c.
Tensor table(int64_t rows, int64_t cols) {
  Floats v;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) v.push_back(static_cast<float>(r * 10 + c));
  }
  return constant(v, TensorShape{rows, cols});
}

Floats row_values(const Tensor& full, const Ints& rows) {
  const int64_t cols = full.shape().dim(1);
  const Floats all = full.to_vector<float>();
  Floats out;
  for (int64_t r : rows) {
    for (int64_t c = 0; c < cols; ++c) out.push_back(all[static_cast<size_t>(r * cols + c)]);
  }
  return out;
}

// Records which variables are read on this thread while registered.
class ReadRecorder final : public VariableAccessObserver {
 public:
  void variable_accessed(const Variable& variable, const Tensor& /*value*/) override {
    names.push_back(variable.name());
  }
  std::vector<std::string> names;
};

class ShardedVariableTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(4); }
};

TEST_F(ShardedVariableTest, ThirteenRowsInFiveShardsUseTheDivLayout) {
  const Tensor full = table(13, 2);
  ShardedVariable v = ShardedVariable::create(full, 5, {.name = "emb"});
  EXPECT_EQ(v.num_shards(), 5);
  EXPECT_EQ(v.shard_rows(), (Ints{3, 3, 3, 2, 2}));
  EXPECT_EQ(v.offsets(), (Ints{0, 3, 6, 9, 11, 13}));
  EXPECT_EQ(v.shape(), (TensorShape{13, 2}));
  EXPECT_EQ(v.dtype(), DType::float32);
  EXPECT_EQ(v.name(), "emb");
  const Ints firsts = {0, 3, 6, 9, 11};
  for (int64_t i = 0; i < 5; ++i) {
    const Variable& s = v.variables()[static_cast<size_t>(i)];
    EXPECT_EQ(s.name(), str_cat("emb/part_", i));
    EXPECT_TRUE(s.trainable());
    Ints rows;
    for (int64_t r = firsts[static_cast<size_t>(i)];
         r < firsts[static_cast<size_t>(i)] + s.shape().dim(0); ++r)
      rows.push_back(r);
    EXPECT_EQ(s.value().to_vector<float>(), row_values(full, rows)) << "shard " << i;
  }
  EXPECT_EQ(v.value().to_vector<float>(), full.to_vector<float>());
  EXPECT_EQ(v.read_value().shape(), (TensorShape{13, 2}));
}

TEST_F(ShardedVariableTest, TenRowsInThreeShardsAndFewerRowsThanShards) {
  EXPECT_EQ(ShardedVariable::create(table(10, 1), 3).shard_rows(), (Ints{4, 3, 3}));
  // The count is capped at the rows, as the strategy does: 3 shards of one row.
  ShardedVariable few = ShardedVariable::create(table(3, 2), 5);
  EXPECT_EQ(few.shard_rows(), (Ints{1, 1, 1}));
  EXPECT_EQ(few.value().to_vector<float>(), table(3, 2).to_vector<float>());
  // One shard, and zero rows (one empty shard).
  EXPECT_EQ(ShardedVariable::create(table(4, 2), 1).shard_rows(), (Ints{4}));
  ShardedVariable empty = ShardedVariable::create(zeros({0, 3}), 4);
  EXPECT_EQ(empty.shard_rows(), (Ints{0}));
  EXPECT_EQ(empty.value().shape(), (TensorShape{0, 3}));
  // Rank 1 and rank 3 values split along axis 0 only.
  EXPECT_EQ(ShardedVariable::create(range(0, 7), 2).shard_rows(), (Ints{4, 3}));
  ShardedVariable r3 = ShardedVariable::create(zeros({5, 2, 3}), 2);
  EXPECT_EQ(r3.variables()[1].shape(), (TensorShape{2, 2, 3}));
}

TEST_F(ShardedVariableTest, DivRoutingMatchesTheOffsetsForEveryLayout) {
  for (int64_t rows = 1; rows <= 20; ++rows) {
    for (int64_t k = 1; k <= rows; ++k) {
      ShardedVariable v = ShardedVariable::create(zeros({rows}), k);
      const Ints& off = v.offsets();
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t s = v.shard_of(r);
        ASSERT_TRUE(off[static_cast<size_t>(s)] <= r && r < off[static_cast<size_t>(s) + 1])
            << rows << " rows, " << k << " shards, row " << r << " routed to " << s;
      }
    }
  }
  ShardedVariable v = ShardedVariable::create(zeros({13}), 5);
  expect_invalid_argument([&] { v.shard_of(13); }, {"row 13", "[0, 13)"});
  expect_invalid_argument([&] { v.shard_of(-1); }, {"row -1"});
}

TEST_F(ShardedVariableTest, LookupsAtShardBoundariesReturnTheRightRows) {
  const Tensor full = table(13, 2);
  ShardedVariable v = ShardedVariable::create(full, 5);
  // Every first and last row of every shard: 0,2 | 3,5 | 6,8 | 9,10 | 11,12.
  const Ints ids = {0, 2, 3, 5, 6, 8, 9, 10, 11, 12};
  Tensor got = embedding_lookup(v, constant(ids, TensorShape{10}));
  EXPECT_EQ(got.shape(), (TensorShape{10, 2}));
  EXPECT_EQ(got.to_vector<float>(), row_values(full, ids));
  // Unsorted, repeated, int32 ids.
  const Ints mixed = {12, 0, 3, 3, 9, 11, 2};
  Tensor got32 =
      v.embedding_lookup(constant(std::vector<int32_t>{12, 0, 3, 3, 9, 11, 2}, TensorShape{7}));
  EXPECT_EQ(got32.to_vector<float>(), row_values(full, mixed));
  // Ids keep their shape: [2, 2] ids -> [2, 2, 2]; a scalar id -> one row.
  Tensor grid = v.embedding_lookup(constant(Ints{10, 9, 8, 11}, TensorShape{2, 2}));
  EXPECT_EQ(grid.shape(), (TensorShape{2, 2, 2}));
  EXPECT_EQ(grid.to_vector<float>(), row_values(full, {10, 9, 8, 11}));
  Tensor one = v.embedding_lookup(constant(int64_t{11}));
  EXPECT_EQ(one.shape(), (TensorShape{2}));
  EXPECT_EQ(one.to_vector<float>(), row_values(full, {11}));
  // No ids: an empty [0, 2] result.
  EXPECT_EQ(v.embedding_lookup(constant(Ints{}, TensorShape{0})).shape(), (TensorShape{0, 2}));
}

TEST_F(ShardedVariableTest, LookupsInOtherLayouts) {
  const Tensor full = table(10, 3);
  ShardedVariable v = ShardedVariable::create(full, 3);  // 4, 3, 3
  const Ints ids = {3, 4, 6, 7, 9, 0};
  EXPECT_EQ(v.embedding_lookup(constant(ids, TensorShape{6})).to_vector<float>(),
            row_values(full, ids));
  ShardedVariable few = ShardedVariable::create(table(3, 2), 8);  // 1, 1, 1
  EXPECT_EQ(few.embedding_lookup(constant(Ints{2, 1, 0}, TensorShape{3})).to_vector<float>(),
            row_values(table(3, 2), {2, 1, 0}));
  // Shards built by hand in a non-div layout (1, 4, 0, 2 rows) route by offsets.
  ShardedVariable odd({Variable(table(1, 2)), Variable(table(4, 2) + 100.f),
                       Variable(zeros({0, 2})), Variable(table(2, 2) + 500.f)},
                      "odd");
  EXPECT_EQ(odd.offsets(), (Ints{0, 1, 5, 5, 7}));
  EXPECT_EQ(odd.shard_of(4), 1);
  EXPECT_EQ(odd.shard_of(5), 3);
  Tensor got = odd.embedding_lookup(constant(Ints{6, 0, 4, 5, 1}, TensorShape{5}));
  EXPECT_EQ(got.to_vector<float>(), (Floats{510, 511, 0, 1, 130, 131, 500, 501, 100, 101}));
  EXPECT_EQ(odd.value().to_vector<float>(),
            (Floats{0, 1, 100, 101, 110, 111, 120, 121, 130, 131, 500, 501, 510, 511}));
}

TEST_F(ShardedVariableTest, LookupReadsOnlyTheShardsItsIdsFallIn) {
  ShardedVariable v = ShardedVariable::create(table(13, 2), 5, {.name = "emb"});
  ReadRecorder recorder;
  {
    VariableAccessObserverScope observe(recorder);
    v.embedding_lookup(constant(Ints{3, 12, 4}, TensorShape{3}));
  }
  EXPECT_EQ(recorder.names, (std::vector<std::string>{"emb/part_1", "emb/part_4"}));
  // A full read touches every shard once, then the container.
  recorder.names.clear();
  {
    VariableAccessObserverScope observe(recorder);
    v.value();
  }
  EXPECT_EQ(recorder.names.size(), 6u);
  EXPECT_EQ(recorder.names.back(), "emb");
}

TEST_F(ShardedVariableTest, LookupRefusesIdsOutOfRangeNamingThem) {
  ShardedVariable v = ShardedVariable::create(table(13, 2), 5, {.name = "emb"});
  expect_invalid_argument(
      [&] {
        v.embedding_lookup(constant(Ints{1, 13}, TensorShape{2}));
      },
      {"embedding_lookup(emb)", "ids[1] = 13", "[0, 13)"});
  expect_invalid_argument(
      [&] { v.embedding_lookup(constant(std::vector<int32_t>{-1}, TensorShape{1})); },
      {"ids[0] = -1", "[0, 13)"});
  expect_invalid_argument([&] { v.embedding_lookup(constant(Floats{1.f}, TensorShape{1})); },
                          {"int32 or int64 ids", "float32"});
  expect_invalid_argument([&] { v.embedding_lookup(Tensor()); }, {"empty tensor"});
  ShardedVariable empty = ShardedVariable::create(zeros({0, 2}), 2);
  expect_invalid_argument([&] { empty.embedding_lookup(constant(Ints{0}, TensorShape{1})); },
                          {"ids[0] = 0", "[0, 0)"});
}

TEST_F(ShardedVariableTest, AssignRoundTripsThroughEveryShard) {
  ShardedVariable v = ShardedVariable::create(table(13, 2), 5);
  const Tensor next = table(13, 2) * -1.f;
  v.assign(next);
  EXPECT_EQ(v.value().to_vector<float>(), next.to_vector<float>());
  EXPECT_EQ(v.variables()[3].value().to_vector<float>(), row_values(next, {9, 10}));
  v.assign_add(ones({13, 2}));
  EXPECT_EQ(v.value().to_vector<float>(), (next + 1.f).to_vector<float>());
  v.assign_sub(fill({13, 2}, constant(3.f)));
  EXPECT_EQ(v.value().to_vector<float>(), (next - 2.f).to_vector<float>());
  EXPECT_EQ(v.variables()[4].value().to_vector<float>(), row_values(next - 2.f, {11, 12}));
  // Integer variables and the Variable handle take the same path.
  ShardedVariable counts = ShardedVariable::create(range(0, 7), 3);
  counts.as_variable().assign_add(range(0, 7));
  EXPECT_EQ(counts.value().to_vector<int64_t>(), (Ints{0, 2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(counts.variables()[2].value().to_vector<int64_t>(), (Ints{10, 12}));
}

TEST_F(ShardedVariableTest, AssignRefusesOtherShapesAndDtypes) {
  ShardedVariable v = ShardedVariable::create(table(13, 2), 5, {.name = "emb"});
  expect_invalid_argument([&] { v.assign(table(12, 2)); }, {"emb", "[12, 2]", "[13, 2]"});
  expect_invalid_argument([&] { v.assign_add(zeros({13, 2}, DType::int64)); }, {"emb", "int64"});
  expect_invalid_argument([&] { v.assign_sub(table(13, 3)); }, {"emb", "[13, 3]"});
  EXPECT_EQ(v.value().to_vector<float>(), table(13, 2).to_vector<float>());  // untouched
}

TEST_F(ShardedVariableTest, ConstructorFromVariablesValidatesLikeTensorFlow) {
  expect_invalid_argument([] { ShardedVariable(std::vector<Variable>{}); }, {"non-empty list"});
  expect_invalid_argument(
      [] {
        ShardedVariable({Variable(zeros({2})), Variable()});
      },
      {"variables[1] is an empty handle"});
  expect_invalid_argument([] { ShardedVariable({Variable(constant(1.f), {.name = "s"})}); },
                          {"rank >= 1", "'s'", "[]"});
  expect_invalid_argument(
      [] {
        ShardedVariable({Variable(zeros({2})), Variable(zeros({2}, DType::int64))});
      },
      {"same dtype", "[float32, int64]"});
  expect_invalid_argument(
      [] {
        ShardedVariable({Variable(zeros({2, 3})), Variable(zeros({2, 4}))});
      },
      {"except for the first axis", "[[2, 3], [2, 4]]"});
  Variable twice(zeros({2}), {.name = "twice"});
  expect_invalid_argument(
      [&] {
        ShardedVariable({twice, twice});
      },
      {"variables[0] and variables[1]", "'twice'"});
  ShardedVariable ok({Variable(zeros({2, 3})), Variable(ones({5, 3}))});
  EXPECT_EQ(ok.shape(), (TensorShape{7, 3}));
  EXPECT_EQ(ok.name(), "ShardedVariable");  // TF's default container name
}

TEST_F(ShardedVariableTest, CreateValidatesItsArguments) {
  expect_invalid_argument([] { ShardedVariable::create(Tensor(), 2, {.name = "e"}); },
                          {"ShardedVariable::create(e)", "empty tensor"});
  expect_invalid_argument([] { ShardedVariable::create(constant(1.f), 2); }, {"rank >= 1", "[]"});
  expect_invalid_argument([] { ShardedVariable::create(zeros({4}), 0); },
                          {"num_shards >= 1", "got 0"});
  expect_invalid_argument([] { ShardedVariable::create(zeros({4}), -3); }, {"got -3"});
  expect_invalid_argument(
      [] {
        ShardedVariable::create(
            TensorShape{}, DType::float32, [](const ShardInfo&) { return Tensor(); }, 2);
      },
      {"fully defined shape of rank >= 1", "[]"});
  expect_invalid_argument(
      [] {
        ShardedVariable::create(TensorShape{4, 2}, DType::float32, {}, 2);
      },
      {"shard initializer"});
  // An initializer or a hook that returns the wrong thing is named with its shard.
  expect_invalid_argument(
      [] {
        ShardedVariable::create(TensorShape{5, 2}, DType::float32,
                                [](const ShardInfo& info) {
                                  return info.offset[0] == 0 ? zeros(info.shape) : zeros({1, 2});
                                },
                                2, {.name = "w"});
      },
      {"shard 1", "[2, 2]", "got [1, 2]"});
  expect_invalid_argument(
      [] {
        ShardedVariable::create(zeros({4, 2}), 2, {}, [](int64_t, int64_t, const VariableArgs&) {
          return Variable(zeros({1}));
        });
      },
      {"shard creator", "shard 0", "[2, 2]", "got [1]"});
}

TEST_F(ShardedVariableTest, ShardInitializerBuildsEachShardFromItsShardInfo) {
  std::vector<ShardInfo> seen;
  ShardedVariable v = ShardedVariable::create(
      TensorShape{7, 2}, DType::float32,
      [&seen](const ShardInfo& info) {
        seen.push_back(info);
        return fill(info.shape, constant(static_cast<float>(info.offset[0])));
      },
      3);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1].shape, (TensorShape{2, 2}));
  EXPECT_EQ(seen[1].offset, (Ints{3, 0}));
  EXPECT_EQ(seen[2].offset, (Ints{5, 0}));
  EXPECT_EQ(v.value().to_vector<float>(), (Floats{0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 5, 5, 5, 5}));
}

TEST_F(ShardedVariableTest, PlacementHookPutsShardsWhereItSays) {
  ShardedVariable v =
      ShardedVariable::create(table(13, 2), 5, {}, place_shards_round_robin({"CPU:1", "CPU:3"}));
  const Ints expected = {1, 3, 1, 3, 1};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(v.variables()[i].device(), find_device(str_cat("CPU:", expected[i])).name());
  }
  EXPECT_EQ(v.value().to_vector<float>(), table(13, 2).to_vector<float>());
  // The default is the current device, through the thread's creator stack.
  {
    auto scope = strata::device("CPU:2");
    VariableCreatorScope prefix([](const NextVariableCreator& next, VariableArgs args) {
      args.options.name = "outer/" + args.options.name;
      return next(std::move(args));
    });
    ShardedVariable here = ShardedVariable::create(table(4, 2), 2, {.name = "h"});
    EXPECT_EQ(here.variables()[1].name(), "outer/h/part_1");
    EXPECT_EQ(here.variables()[0].device(), find_device("CPU:2").name());
  }
  expect_invalid_argument([] { place_shards_round_robin({}); }, {"at least one device"});
  EXPECT_THROW(ShardedVariable::create(table(4, 2), 2, {}, place_shards_round_robin({"CPU:9"})),
               NotFoundError);
}

TEST_F(ShardedVariableTest, ShardsShareTheVariableOptions) {
  ShardedVariable v = ShardedVariable::create(
      table(4, 2), 2, {.name = "acc", .trainable = false, .aggregation = VariableAggregation::SUM});
  for (const Variable& s : v.variables()) {
    EXPECT_FALSE(s.trainable());
    EXPECT_EQ(s.aggregation(), VariableAggregation::SUM);
  }
  EXPECT_FALSE(v.as_variable().trainable());
}

TEST_F(ShardedVariableTest, LivesBehindTheOrdinaryVariableHandle) {
  ShardedVariable v = ShardedVariable::create(table(5, 2), 2, {.name = "emb"});
  Variable handle = v.as_variable();
  EXPECT_TRUE(is_sharded_variable(handle));
  EXPECT_FALSE(is_sharded_variable(v.variables()[0]));
  EXPECT_FALSE(ShardedVariable::from_variable(v.variables()[0]).has_value());
  std::optional<ShardedVariable> back = ShardedVariable::from_variable(handle);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->is_same(v));
  EXPECT_EQ(handle.name(), "emb");
  EXPECT_EQ(handle.shape(), (TensorShape{5, 2}));
  EXPECT_EQ(handle.device(), v.variables()[0].device());
  handle.assign(table(5, 2) + 1.f);
  EXPECT_EQ(v.variables()[1].value().to_vector<float>(), (Floats{31, 32, 41, 42}));
  EXPECT_EQ(handle.value().to_vector<float>(), (table(5, 2) + 1.f).to_vector<float>());
  std::ostringstream os;
  os << v;
  EXPECT_EQ(os.str().rfind("ShardedVariable:{\n  0: <tf.Variable 'emb/part_0:0' shape=(3, 2)", 0),
            0u)
      << os.str();
  EXPECT_EQ(handle.to_string(), v.to_string());
  ShardedVariable none;
  EXPECT_FALSE(none.defined());
  EXPECT_THROW(none.value(), FailedPreconditionError);
  EXPECT_THROW(none.as_variable(), FailedPreconditionError);
  EXPECT_EQ(none.to_string(), "<ShardedVariable (empty handle)>");
}

TEST_F(ShardedVariableTest, GradientsReachEveryShardThroughTheFullValue) {
  ShardedVariable v = ShardedVariable::create(table(5, 2), 3);  // 2, 2, 1 rows
  GradientTape tape({.persistent = true});
  Tensor loss = reduce_sum(square(v.value()));
  std::vector<Tensor> g = tape.gradient(loss, v.variables());
  ASSERT_EQ(g.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(g[i].to_vector<float>(), (v.variables()[i].value() * 2.f).to_vector<float>()) << i;
  }
  // Through the handle: the gradient of the whole value.
  Tensor loss2 = reduce_sum(v.as_variable().value() * 3.f);
  EXPECT_EQ(tape.gradient(loss2, v.as_variable()).to_vector<float>(),
            fill({5, 2}, constant(3.f)).to_vector<float>());
}

TEST_F(ShardedVariableTest, GradientsOfALookupGoToTheShardsItRead) {
  ShardedVariable v = ShardedVariable::create(table(13, 2), 5);
  GradientTape tape;
  Tensor rows = v.embedding_lookup(constant(Ints{12, 0, 3, 3}, TensorShape{4}));
  Tensor loss = reduce_sum(rows * constant(Floats{1, 2, 3, 4, 5, 6, 7, 8}, TensorShape{4, 2}));
  std::vector<Tensor> g = tape.gradient(loss, v.variables());
  ASSERT_EQ(g.size(), 5u);
  // Row 0 (shard 0, local 0) got upstream [3, 4]; row 3 (shard 1, local 0)
  // twice: [5+7, 6+8]; row 12 (shard 4, local 1): [1, 2].
  EXPECT_EQ(g[0].to_vector<float>(), (Floats{3, 4, 0, 0, 0, 0}));
  EXPECT_EQ(g[1].to_vector<float>(), (Floats{12, 14, 0, 0, 0, 0}));
  EXPECT_FALSE(g[2].defined());  // never read: unconnected (TF's None)
  EXPECT_FALSE(g[3].defined());
  EXPECT_EQ(g[4].to_vector<float>(), (Floats{0, 0, 1, 2}));
}

}  // namespace
}  // namespace strata::distribute

namespace strata::distribute {
namespace {

TEST_F(ShardedVariableTest, HeaderExampleHolds) {
  namespace sd = strata::distribute;
  auto table = strata::reshape(strata::range(0, 26), {13, 2});
  auto emb = sd::ShardedVariable::create(table, /*num_shards=*/5, {.name = "emb"});
  EXPECT_EQ(emb.shard_rows(), (Ints{3, 3, 3, 2, 2}));
  EXPECT_EQ(emb.variables()[3].name(), "emb/part_3");
  EXPECT_EQ(emb.value().to_vector<int64_t>(), table.to_vector<int64_t>());
  emb.assign_add(strata::ones_like(table));
  strata::Tensor rows = sd::embedding_lookup(emb, strata::constant<int64_t>({12, 0, 3}));
  EXPECT_EQ(rows.to_vector<int64_t>(), (Ints{25, 26, 1, 2, 7, 8}));
  strata::Variable handle = emb.as_variable();
  EXPECT_EQ(sd::ShardedVariable::from_variable(handle)->num_shards(), 5);
}

// What ParameterServerStrategy's creator does: partition, create each shard
// through `next` (never through its own creator again), return the handle.
TEST_F(ShardedVariableTest, AVariableCreatorCanReturnAShardedVariable) {
  const VariablePartitioner partitioner = FixedShardsPartitioner(2);
  std::vector<int64_t> placed;
  VariableCreatorScope scope([&](const NextVariableCreator& next, VariableArgs args) -> Variable {
    const Tensor& init = args.initial_value;
    const int64_t k = num_partitions(partitioner, init.shape(), init.dtype());
    if (k == 1) return next(std::move(args));
    return ShardedVariable::create(init, k, args.options,
                                   [&](int64_t i, int64_t, VariableArgs shard) {
                                     placed.push_back(i);
                                     return next(std::move(shard));
                                   })
        .as_variable();
  });
  Variable w(table(5, 3), {.name = "w"});
  Variable b(constant(1.f), {.name = "b"});  // rank 0: never partitioned
  ASSERT_TRUE(is_sharded_variable(w));
  EXPECT_FALSE(is_sharded_variable(b));
  EXPECT_EQ(placed, (Ints{0, 1}));
  const ShardedVariable sw = *ShardedVariable::from_variable(w);
  EXPECT_EQ(sw.shard_rows(), (Ints{3, 2}));
  EXPECT_FALSE(is_sharded_variable(sw.variables()[0]));
  EXPECT_EQ(w.value().to_vector<float>(), table(5, 3).to_vector<float>());
  // An optimizer-style update through the handle lands in the shards.
  w.assign_sub(fill({5, 3}, constant(1.f)));
  EXPECT_EQ(sw.variables()[1].value().to_vector<float>(), (Floats{29, 30, 31, 39, 40, 41}));
}

}  // namespace
}  // namespace strata::distribute
