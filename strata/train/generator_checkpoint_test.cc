// tf.random.Generator: its state, its draws, its behaviour under a strategy,
// and its state in a train::Checkpoint.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/core/config.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/ops/random_generator.h"
#include "strata/testing/expect_error.h"
#include "strata/testing/logical_devices.h"
#include "strata/train/checkpoint.h"
#include "strata/train/checkpoint_reader.h"

namespace strata::train {
namespace {

using random::Generator;

std::vector<int64_t> state_of(const Generator& g) { return g.state().value().to_vector<int64_t>(); }

TEST(RandomGenerator, FromSeedStartsAtTheSeedAndEachDrawAdvancesTheCounterAsTensorFlow) {
  // g = tf.random.Generator.from_seed(1234); g.state -> [1234, 0, 0]
  // g.normal(shape=(2, 3)); g.state -> [2770, 0, 0]   (TF's documented example)
  auto g = Generator::from_seed(1234);
  EXPECT_EQ(state_of(g), (std::vector<int64_t>{1234, 0, 0}));
  const Tensor n = g.normal({2, 3});
  EXPECT_EQ(n.shape(), (TensorShape{2, 3}));
  EXPECT_EQ(state_of(g), (std::vector<int64_t>{2770, 0, 0}));
  g.uniform({4});
  EXPECT_EQ(state_of(g), (std::vector<int64_t>{2770 + 4 * 256, 0, 0}));
  g.skip(10);
  EXPECT_EQ(state_of(g)[0], 2770 + 14 * 256);
}

TEST(RandomGenerator, DrawsAreReproducibleFromTheStateAndDifferBetweenCalls) {
  auto a = Generator::from_seed(7), b = Generator::from_seed(7);
  const auto a1 = a.uniform({100}).to_vector<float>();
  EXPECT_EQ(a1, b.uniform({100}).to_vector<float>());
  const auto a2 = a.uniform({100}).to_vector<float>();
  EXPECT_NE(a1, a2);
  for (float v : a1) {
    EXPECT_GE(v, 0.f);
    EXPECT_LT(v, 1.f);
  }
  // from_state continues a saved stream.
  auto c = Generator::from_state(b.state().value());
  EXPECT_EQ(c.uniform({100}).to_vector<float>(), a2);
  // Normal values: mean about 0 and variance about 1 over 20000 draws.
  const auto z = Generator::from_seed(3).normal({20000}).to_vector<float>();
  double sum = 0, sq = 0;
  for (float v : z) {
    sum += v;
    sq += double(v) * v;
  }
  EXPECT_NEAR(sum / z.size(), 0.0, 0.03);
  EXPECT_NEAR(sq / z.size(), 1.0, 0.05);
  const auto ints = Generator::from_seed(5).uniform_int({1000}, -3, 4).to_vector<int64_t>();
  EXPECT_EQ(std::set<int64_t>(ints.begin(), ints.end()),
            (std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3}));
  // split: independent generators, and the parent advances.
  auto parent = Generator::from_seed(9);
  auto children = parent.split(2);
  EXPECT_NE(children[0].uniform({8}).to_vector<float>(),
            children[1].uniform({8}).to_vector<float>());
  EXPECT_EQ(state_of(parent)[0], 9 + 2 * 256);
  testing::expect_invalid_argument(
      [] {
        Generator::from_state(constant(std::vector<int64_t>{1, 2}));
      },
      {"[3]", "[2]"});
}

class GeneratorStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(4); }
};

TEST_F(GeneratorStrategyTest, InsideAScopeEachReplicaDrawsItsOwnStreamAndTheCopiesStayEqual) {
  // with strat.scope(): g = tf.random.Generator.from_seed(1)
  // strat.run(lambda: g.normal([]))   -> a different number on each replica
  distribute::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  Generator g = [&] {
    auto scope = strategy.scope();
    return Generator::from_seed(1);
  }();
  EXPECT_TRUE(distribute::is_mirrored_variable(g.state()));
  auto values = strategy.run([&] { return g.normal({3}); });
  const auto parts = strategy.experimental_local_results(values);
  EXPECT_NE(parts[0].to_vector<float>(), parts[1].to_vector<float>());
  for (const Variable& c : distribute::distributed_components(g.state()))
    EXPECT_EQ(c.value().to_vector<int64_t>(), (std::vector<int64_t>{1 + 3 * 256, 0, 0}));
  // Reproducible: the same seed gives the same per-replica streams.
  Generator h = [&] {
    auto scope = strategy.scope();
    return Generator::from_seed(1);
  }();
  auto again = strategy.experimental_local_results(strategy.run([&] { return h.normal({3}); }));
  EXPECT_EQ(again[0].to_vector<float>(), parts[0].to_vector<float>());
  EXPECT_EQ(again[1].to_vector<float>(), parts[1].to_vector<float>());
}

TEST_F(GeneratorStrategyTest, ItsStateIsSavedAndRestoredUnderAnotherReplicaCount) {
  // checkpoint = tf.train.Checkpoint(generator=g); the key is TF's
  // "generator/_state_var/.ATTRIBUTES/VARIABLE_VALUE".
  TempDir dir("generator_ckpt");
  std::string path;
  std::vector<float> next;
  {
    distribute::MirroredStrategy strategy({"CPU:0", "CPU:1"});
    Generator g = [&] {
      auto scope = strategy.scope();
      return Generator::from_seed(42);
    }();
    strategy.run([&] { return g.uniform({5}); });
    path = Checkpoint({{"generator", g}}).write(dir.file("ckpt"));
    next = g.uniform({6}).to_vector<float>();  // cross-replica: the un-mixed stream
  }
  EXPECT_EQ(CheckpointReader(path)
                .get_tensor("generator/_state_var/.ATTRIBUTES/VARIABLE_VALUE")
                .to_vector<int64_t>(),
            (std::vector<int64_t>{42 + 5 * 256, 0, 0}));
  distribute::MirroredStrategy four({"CPU:0", "CPU:1", "CPU:2", "CPU:3"});
  Generator restored = [&] {
    auto scope = four.scope();
    return Generator::from_seed(0);
  }();
  Checkpoint({{"generator", restored}}).read(path).assert_consumed();
  for (const Variable& c : distribute::distributed_components(restored.state()))
    EXPECT_EQ(c.value().to_vector<int64_t>(), (std::vector<int64_t>{42 + 5 * 256, 0, 0}));
  EXPECT_EQ(restored.uniform({6}).to_vector<float>(), next);
  auto plain = Generator::from_seed(0);
  Checkpoint({{"generator", plain}}).read(path).assert_consumed();
  EXPECT_EQ(plain.uniform({6}).to_vector<float>(), next);
}

}  // namespace
}  // namespace strata::train
