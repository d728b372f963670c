// The sharded weight update (CommunicationOptions.shard_weight_update): each
// replica updates its block of every variable and slot, the new values are
// all-gathered, and every copy ends bit-identical to the unsharded update's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/core/config.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/distribute/weight_update_sharding.h"
#include "strata/keras/optimizers/optimizers.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/testing/logical_devices.h"

namespace strata::keras {
namespace {

using strata::testing::cpu_device_names;
using strata::testing::use_logical_cpus;

namespace opt = optimizers;
namespace sd = distribute;

using MakeOptimizer = std::function<opt::OptimizerPtr()>;

struct Case {
  std::string name;
  MakeOptimizer make;
};

std::vector<Case> cases() {
  return {
      {"SGD momentum", [] { return opt::SGD({.learning_rate = 0.05, .momentum = 0.9}); }},
      {"SGD nesterov",
       [] { return opt::SGD({.learning_rate = 0.05, .momentum = 0.9, .nesterov = true}); }},
      {"Adam", [] { return opt::Adam({.learning_rate = 0.01}); }},
      {"Adam amsgrad clipvalue",
       [] { return opt::Adam({.learning_rate = 0.01, .amsgrad = true, .clipvalue = 0.5}); }},
      {"AdamW", [] { return opt::AdamW({.learning_rate = 0.01, .weight_decay = 0.1}); }},
      {"RMSprop centered momentum",
       [] { return opt::RMSprop({.learning_rate = 0.01, .momentum = 0.5, .centered = true}); }},
      {"RMSprop", [] { return opt::RMSprop({.learning_rate = 0.01}); }},
      {"Adagrad", [] { return opt::Adagrad({.learning_rate = 0.1}); }},
  };
}

// Irregular values (so that the order of a sum shows in the last bits):
// element i of replica r's gradient at `step` for variable `salt`.
Tensor gradient_of(const Variable& var, int replica, int step, int salt) {
  std::vector<double> v(size_t(var.shape().num_elements()));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] =
        std::sin(0.37 * double(i + 1) * double(replica + 2) + 1.3 * double(step) + double(salt)) /
        double(3 + replica);
  }
  return cast(constant(v, var.shape()), var.dtype());
}

std::vector<uint8_t> bits_of(const Tensor& t) {
  std::vector<uint8_t> out(t.size_bytes());
  if (!out.empty()) std::memcpy(out.data(), t.raw_data(), out.size());
  return out;
}

// Every copy of every variable and slot, in a fixed order, as bits.
struct State {
  std::vector<std::vector<uint8_t>> copies;
  std::vector<std::string> names;
};

State state_of(const std::vector<Variable>& vars, const opt::Optimizer& optimizer) {
  State s;
  std::vector<Variable> all = vars;
  for (const auto& slot : optimizer.slot_variables()) all.push_back(slot.slot);
  for (const Variable& v : all) {
    const auto components = sd::distributed_components(v);
    for (size_t c = 0; c < components.size(); ++c) {
      s.copies.push_back(bits_of(components[c].value()));
      s.names.push_back(str_cat(v.name(), " copy ", c));
    }
  }
  return s;
}

void expect_same(const State& a, const State& b, const std::string& what) {
  ASSERT_EQ(a.copies.size(), b.copies.size()) << what;
  for (size_t i = 0; i < a.copies.size(); ++i) {
    EXPECT_EQ(a.copies[i], b.copies[i]) << what << ": " << a.names[i] << " differs";
  }
}

// Irregular initial values of `shape`.
Tensor initial_of(const TensorShape& shape, int salt) {
  std::vector<float> v(size_t(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.91f * float(i) + float(salt)) * 2.f;
  return constant(v, shape);
}

// The variables of every test. Blocks are ceil(n / R) rounded up to 16
// elements: 7 x 13 = 91 splits 48 + 43 over 2 replicas and 32 + 32 + 27 + 0
// over 4; 40 splits 32 + 8 and 16 + 16 + 8 + 0; 7 elements, a scalar and a
// float64 [50] (its own all-gather) test small and odd cases.
std::vector<Variable> make_variables() {
  return {Variable(initial_of(TensorShape({7, 13}), 0), {.name = "kernel"}),
          Variable(initial_of(TensorShape({40}), 1), {.name = "wide"}),
          Variable(initial_of(TensorShape({7}), 2), {.name = "bias"}),
          Variable(constant(0.75f), {.name = "scale"}),
          Variable(cast(initial_of(TensorShape({50}), 3), DType::float64), {.name = "double"})};
}

// `steps` steps of `make()` under `strategy`, each replica with its own
// gradients; returns the state after the slots are gathered (the sharded
// run's checkpoint view).
State train(sd::Strategy& strategy, const MakeOptimizer& make, int steps,
            bool* sharded_after_step = nullptr) {
  std::vector<Variable> vars;
  opt::OptimizerPtr optimizer;
  {
    auto scope = strategy.scope();
    vars = make_variables();
    optimizer = make();
  }
  for (int step = 0; step < steps; ++step) {
    strategy.run([&] {
      const int r = sd::get_replica_context()->replica_id_in_sync_group();
      opt::GradsAndVars gv;
      for (size_t i = 0; i < vars.size(); ++i) {
        gv.emplace_back(gradient_of(vars[i], r, step, int(i)), vars[i]);
      }
      optimizer->apply_gradients(gv);
    });
  }
  if (sharded_after_step != nullptr) *sharded_after_step = optimizer->slots_sharded();
  EXPECT_EQ(optimizer->iterations(), steps);
  return state_of(vars, *optimizer);
}

// TensorFlow has no such switch (XLA shards the update on TPUs by itself);
// the Strata extension reads
//   strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"],
//       communication_options=CommunicationOptions(shard_weight_update=True))
// and a training loop of optimizer.apply_gradients(zip(grads, vars)) in
// strategy.run gives the same bits with and without it.
TEST(ShardedWeightUpdate, EveryCopyIsBitIdenticalToTheUnshardedUpdate) {
  for (int replicas : {2, 4}) {
    for (const Case& c : cases()) {
      const std::string what = str_cat(c.name, " on ", replicas, " replicas");
      use_logical_cpus(replicas);
      sd::MirroredStrategy plain(cpu_device_names(replicas), {});
      const State expected = train(plain, c.make, 4);
      sd::MirroredStrategy sharded(cpu_device_names(replicas), {.shard_weight_update = true});
      bool was_sharded = false;
      const State got = train(sharded, c.make, 4, &was_sharded);
      EXPECT_TRUE(was_sharded) << what;
      expect_same(got, expected, what);
    }
  }
}

// Under deterministic_reduction the gradients are summed in the fixed
// pairwise tree of the all-reduce (each replica keeping its block rather than
// reduce-scattering), so the sharded update still matches the unsharded one
// bit for bit.
TEST(ShardedWeightUpdate, DeterministicReductionKeepsItsTreeAndTheBits) {
  for (int replicas : {2, 4}) {
    use_logical_cpus(replicas);
    const MakeOptimizer adam = [] { return opt::Adam({.learning_rate = 0.01}); };
    sd::MirroredStrategy plain(cpu_device_names(replicas), {.deterministic_reduction = true});
    const State expected = train(plain, adam, 3);
    sd::MirroredStrategy sharded(cpu_device_names(replicas),
                                 {.deterministic_reduction = true, .shard_weight_update = true});
    bool was_sharded = false;
    const State got = train(sharded, adam, 3, &was_sharded);
    EXPECT_TRUE(was_sharded) << replicas;
    expect_same(got, expected, str_cat("Adam, deterministic_reduction, ", replicas, " replicas"));
  }
}

// The sharded update must change the values at all: a run with zero
// gradients would pass the comparison above trivially.
TEST(ShardedWeightUpdate, TheUpdateMovesEveryElement) {
  use_logical_cpus(2);
  sd::MirroredStrategy sharded(cpu_device_names(2), {.shard_weight_update = true});
  std::vector<Variable> vars;
  opt::OptimizerPtr adam;
  {
    auto scope = sharded.scope();
    vars = make_variables();
    adam = opt::Adam({.learning_rate = 0.01});
  }
  std::vector<std::vector<double>> before;
  before.reserve(vars.size());
  for (const Variable& v : vars)
    before.push_back(cast(v.value(), DType::float64).to_vector<double>());
  sharded.run([&] {
    const int r = sd::get_replica_context()->replica_id_in_sync_group();
    opt::GradsAndVars gv;
    for (size_t i = 0; i < vars.size(); ++i) {
      gv.emplace_back(gradient_of(vars[i], r, 0, int(i)), vars[i]);
    }
    adam->apply_gradients(gv);
  });
  // Adam's first step moves every element by about lr (the gradients here have no zero sum).
  for (size_t i = 0; i < vars.size(); ++i) {
    for (const Variable& copy : sd::distributed_components(vars[i])) {
      const std::vector<double> after = cast(copy.value(), DType::float64).to_vector<double>();
      for (size_t k = 0; k < after.size(); ++k) {
        EXPECT_NEAR(std::fabs(after[k] - before[i][k]), 0.01, 1e-3)
            << vars[i].name() << "[" << k << "]";
      }
    }
  }
  // Before the gather each replica's slot copy holds only its own block.
  ASSERT_TRUE(adam->slots_sharded());
  const Variable m = adam->slot_variables().front().slot;  // gathers
  EXPECT_FALSE(adam->slots_sharded());
  const auto copies = sd::distributed_components(m);
  EXPECT_EQ(bits_of(copies[0].value()), bits_of(copies[1].value()));
}

// global_clipnorm needs the norm of every whole gradient: such an optimizer
// (and a subclass whose update is not element-wise) keeps the unsharded path.
TEST(ShardedWeightUpdate, NormClippingTakesTheUnshardedPath) {
  for (const Case& c : std::vector<Case>{
           {"global_clipnorm",
            [] { return opt::Adam({.learning_rate = 0.01, .global_clipnorm = 0.5}); }},
           {"clipnorm", [] { return opt::SGD({.learning_rate = 0.1, .clipnorm = 0.3}); }}}) {
    use_logical_cpus(2);
    sd::MirroredStrategy plain(cpu_device_names(2), {});
    const State expected = train(plain, c.make, 3);
    sd::MirroredStrategy sharded(cpu_device_names(2), {.shard_weight_update = true});
    bool was_sharded = true;
    const State got = train(sharded, c.make, 3, &was_sharded);
    EXPECT_FALSE(was_sharded) << c.name;
    expect_same(got, expected, c.name);
  }
}

// A sharded step followed by an unsharded one (skip_gradients_aggregation,
// the caller reducing) first makes the slots whole on every replica.
TEST(ShardedWeightUpdate, AnUnshardedStepAfterShardedOnesSeesWholeSlots) {
  auto run = [](bool shard) {
    use_logical_cpus(2);
    sd::MirroredStrategy strategy(cpu_device_names(2), {.shard_weight_update = shard});
    std::vector<Variable> vars;
    opt::OptimizerPtr adam;
    {
      auto scope = strategy.scope();
      vars = make_variables();
      adam = opt::Adam({.learning_rate = 0.01});
    }
    for (int step = 0; step < 3; ++step) {
      strategy.run([&] {
        sd::ReplicaContext& ctx = *sd::get_replica_context();
        const int r = ctx.replica_id_in_sync_group();
        opt::GradsAndVars gv;
        for (size_t i = 0; i < vars.size(); ++i) {
          Tensor g = gradient_of(vars[i], r, step, int(i));
          if (step == 2) g = ctx.all_reduce(sd::ReduceOp::SUM, g);
          gv.emplace_back(g, vars[i]);
        }
        adam->apply_gradients(gv, {.skip_gradients_aggregation = step == 2});
      });
    }
    EXPECT_FALSE(adam->slots_sharded());
    return state_of(vars, *adam);
  };
  expect_same(run(true), run(false), "Adam, third step unsharded");
}

// Slot memory: each replica's copy of a sharded slot stores only its block.
// Adam's m and v of make_variables() hold (91 + 40 + 7 + 1) float32 and 50
// float64 elements each: 2 x (139 x 4 + 50 x 8) = 1912 bytes whole. The
// blocks (ceil(n / R) rounded up to 16) give, per replica,
//   2 replicas: kernel 48 | 43, wide 32 | 8, bias 7 | 0, scale 1 | 0,
//               double 32 | 18  -> 2 x (88 x 4 + 32 x 8) = 1216 and
//               2 x (51 x 4 + 18 x 8) = 696 bytes;
//   4 replicas: kernel 32 | 32 | 27 | 0, wide 16 | 16 | 8 | 0, bias and
//               scale on replica 0, double 16 | 16 | 16 | 2 -> 704, 640, 536
//               and 32 bytes;
// which add up to one whole copy (1912) in both cases.
TEST(ShardedWeightUpdate, EachReplicaStoresOnlyItsBlockOfEverySlot) {
  const std::vector<std::pair<int, std::vector<int64_t>>> expected = {{2, {1216, 696}},
                                                                      {4, {704, 640, 536, 32}}};
  for (const auto& entry : expected) {
    const int replicas = entry.first;
    const std::vector<int64_t>& blocks = entry.second;
    use_logical_cpus(replicas);
    for (bool shard : {false, true}) {
      sd::MirroredStrategy strategy(cpu_device_names(replicas), {.shard_weight_update = shard});
      std::vector<Variable> vars;
      opt::OptimizerPtr adam;
      {
        auto scope = strategy.scope();
        vars = make_variables();
        adam = opt::Adam({.learning_rate = 0.01});
        adam->build(vars);
      }
      auto bytes = [&] {
        std::vector<int64_t> out;
        out.reserve(size_t(replicas));
        for (int r = 0; r < replicas; ++r) out.push_back(adam->slot_bytes(r));
        return out;
      };
      const std::vector<int64_t> whole(size_t(replicas), 1912);
      const std::string what = str_cat(replicas, " replicas, shard_weight_update=", shard);
      // Divided from the start (made in the block state).
      EXPECT_EQ(bytes(), shard ? blocks : whole) << what;
      auto step = [&](int n) {
        strategy.run([&] {
          const int r = sd::get_replica_context()->replica_id_in_sync_group();
          opt::GradsAndVars gv;
          for (size_t i = 0; i < vars.size(); ++i) {
            gv.emplace_back(gradient_of(vars[i], r, n, int(i)), vars[i]);
          }
          adam->apply_gradients(gv);
        });
      };
      step(0);
      step(1);
      EXPECT_EQ(bytes(), shard ? blocks : whole) << what;
      EXPECT_EQ(adam->slots_sharded(), shard) << what;
      // A gather (what a checkpoint save does) makes every copy whole; the
      // next sharded step divides them again.
      (void)adam->slot_variables();
      EXPECT_EQ(bytes(), whole) << what;
      step(2);
      EXPECT_EQ(bytes(), shard ? blocks : whole) << what;
    }
  }
}

// The saving on a layer-sized variable: Adam's two slots of a [1024, 256]
// kernel and its [256] bias, 2 x (262144 + 256) x 4 = 2099200 bytes whole,
// are 1049600 bytes per replica over 2 replicas (each stores half).
TEST(ShardedWeightUpdate, AdamSlotsOfADenseLayerTakeHalfTheBytesOnTwoReplicas) {
  use_logical_cpus(2);
  for (bool shard : {false, true}) {
    sd::MirroredStrategy strategy(cpu_device_names(2), {.shard_weight_update = shard});
    opt::OptimizerPtr adam;
    {
      auto scope = strategy.scope();
      const std::vector<Variable> vars = {
          Variable(zeros({1024, 256}, DType::float32), {.name = "kernel"}),
          Variable(zeros({256}, DType::float32), {.name = "bias"})};
      adam = opt::Adam({.learning_rate = 0.01});
      adam->build(vars);
    }
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(adam->slot_bytes(r), shard ? 1049600 : 2099200) << "replica " << r;
    }
  }
}

// Slots that the update cannot shard stay whole on every replica: norm
// clipping needs whole gradients, so its optimizer's slots are ordinary
// mirrored slots from the start.
TEST(ShardedWeightUpdate, NormClippingKeepsEverySlotWhole) {
  use_logical_cpus(2);
  sd::MirroredStrategy strategy(cpu_device_names(2), {.shard_weight_update = true});
  opt::OptimizerPtr adam;
  {
    auto scope = strategy.scope();
    const std::vector<Variable> vars = make_variables();
    adam = opt::Adam({.learning_rate = 0.01, .global_clipnorm = 1.0});
    adam->build(vars);
  }
  EXPECT_EQ(adam->slot_bytes(0), 1912);
  EXPECT_EQ(adam->slot_bytes(1), 1912);
  EXPECT_FALSE(adam->slots_sharded());
}

// A copy that stores only its block cannot be read whole: reading it names
// the slot and how to make it whole, instead of returning a stale mix.
TEST(ShardedWeightUpdate, ReadingACopyThatStoresItsBlockIsAFailedPrecondition) {
  use_logical_cpus(2);
  sd::MirroredStrategy strategy(cpu_device_names(2), {.shard_weight_update = true});
  std::vector<Variable> vars;
  opt::OptimizerPtr adam;
  {
    auto scope = strategy.scope();
    vars = make_variables();
    adam = opt::Adam({.learning_rate = 0.01});
    adam->build(vars);
  }
  const Variable m = adam->slot_variables().front().slot;  // whole now
  EXPECT_EQ(sd::distributed_components(m)[1].value().shape(), TensorShape({7, 13}));
  strategy.run([&] {
    const int r = sd::get_replica_context()->replica_id_in_sync_group();
    opt::GradsAndVars gv;
    for (size_t i = 0; i < vars.size(); ++i)
      gv.emplace_back(gradient_of(vars[i], r, 0, int(i)), vars[i]);
    adam->apply_gradients(gv);
  });
  try {
    (void)sd::distributed_components(m)[1].value();
    ADD_FAILURE() << "expected FailedPreconditionError";
  } catch (const FailedPreconditionError& e) {
    EXPECT_NE(std::string(e.what()).find("holds only replica 1's block [48, 91)"),
              std::string::npos)
        << e.what();
  }
  // Cross-replica reads of the slot (component 0 here) fail alike until a gather.
  EXPECT_THROW((void)m.value(), FailedPreconditionError);
  adam->gather_sharded_slots();
  EXPECT_EQ(m.value().shape(), TensorShape({7, 13}));
}

// Replicas that are threads of one process sum their blocks straight from
// each other's gradients (and read each other's packed rows in place)
// instead of going through the collectives; with deterministic_reduction the
// collectives' fixed tree stays.
TEST(ShardedWeightUpdate, ReplicasOfOneProcessSumTheirBlocksFromEachOthersTensors) {
  use_logical_cpus(3);
  sd::MirroredStrategy strategy(cpu_device_names(3), {.shard_weight_update = true});
  std::vector<std::vector<float>> blocks(3);
  strategy.run([&] {
    sd::ReplicaContext& ctx = *sd::get_replica_context();
    EXPECT_TRUE(sd::replicas_share_process(ctx));
    const int r = ctx.replica_id_in_sync_group();
    // Replica q holds q * 100 + j at element j of a 40-element tensor: the
    // blocks are 16 elements wide ([0, 16), [16, 32), [32, 40)), and element
    // j of the sum is 300 + 3j.
    std::vector<float> mine(40);
    for (int j = 0; j < 40; ++j) mine[size_t(j)] = float(r * 100 + j);
    const std::vector<Tensor> sums =
        sd::reduce_blocks_in_process(ctx, {constant(mine, TensorShape({5, 8}))});
    const Tensor& b = sums.front();
    blocks[size_t(r)].assign(b.data<float>(), b.data<float>() + b.num_elements());
  });
  for (int r = 0; r < 3; ++r) {
    const int64_t begin = 16 * r, end = std::min<int64_t>(40, begin + 16);
    std::vector<float> expected;
    for (int64_t j = begin; j < end; ++j) expected.push_back(float(300 + 3 * j));
    EXPECT_EQ(blocks[size_t(r)], expected) << "replica " << r;
  }
  // Shapes that differ between the replicas are named on every replica.
  try {
    strategy.run([&] {
      sd::ReplicaContext& ctx = *sd::get_replica_context();
      const int r = ctx.replica_id_in_sync_group();
      (void)sd::reduce_blocks_in_process(ctx, {zeros(TensorShape({r == 1 ? 4 : 6}))});
    });
    ADD_FAILURE() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 0 is [4] float32 on replica 1 but [6] float32"),
              std::string::npos)
        << e.what();
  }
  sd::MirroredStrategy tree(cpu_device_names(2),
                            {.deterministic_reduction = true, .shard_weight_update = true});
  tree.run([&] { EXPECT_FALSE(sd::replicas_share_process(*sd::get_replica_context())); });
}

}  // namespace
}  // namespace strata::keras
