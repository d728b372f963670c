// Distributed values in train::Checkpoint: what is saved for a
// SyncOnReadVariable and a ShardedVariable, restoring under other replica
// and shard counts (the resharding matrix), and the multi-worker rule that
// only the chief's files are kept.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/str_cat.h"
#include "strata/cluster/cluster_resolver.h"
#include "strata/cluster/socket.h"
#include "strata/core/config.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/distribute/multi_worker_mirrored_strategy.h"
#include "strata/distribute/partitioners.h"
#include "strata/distribute/sharded_variable.h"
#include "strata/keras/layers/dense.h"
#include "strata/keras/optimizers/adam.h"
#include "strata/keras/sequential.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/random_ops.h"
#include "strata/testing/logical_devices.h"
#include "strata/train/checkpoint.h"
#include "strata/train/checkpoint_manager.h"
#include "strata/train/checkpoint_reader.h"

namespace strata::train {
namespace {

using strata::testing::cpu_device_names;

namespace sd = distribute;

class DistributedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(4); }
};

std::vector<float> values_of(const Variable& v) { return v.value().to_vector<float>(); }

// A SUM SyncOnReadVariable (a metric's total) whose replica i holds i + 1.
Variable sync_on_read_total(sd::Strategy& s) {
  Variable v;
  {
    auto scope = s.scope();
    v = Variable(constant(0.f), {.name = "total",
                                 .synchronization = VariableSynchronization::ON_READ,
                                 .aggregation = VariableAggregation::SUM});
  }
  s.run([&] {
    v.assign(
        constant(static_cast<float>(sd::get_replica_context()->replica_id_in_sync_group() + 1)));
  });
  return v;
}

TEST_F(DistributedCheckpointTest, SyncOnReadSavesItsAggregateAndRestoresUnderOtherReplicaCounts) {
  // TF: a SyncOnReadVariable is saved as its aggregated value, and a restore
  // assigns it in cross-replica context (SUM: value / replicas per copy).
  TempDir dir("sync_on_read");
  std::string path;
  {
    sd::MirroredStrategy s(cpu_device_names(2));
    Variable total = sync_on_read_total(s);  // copies 1 and 2
    path = Checkpoint({{"total", total}}).write(dir.file("ckpt"));
  }
  EXPECT_EQ(CheckpointReader(path).get_tensor("total/.ATTRIBUTES/VARIABLE_VALUE").item<float>(),
            3.f);
  for (int replicas : {1, 2, 4}) {
    sd::MirroredStrategy s(cpu_device_names(replicas));
    Variable total;
    {
      auto scope = s.scope();
      total = Variable(constant(0.f), {.name = "total",
                                       .synchronization = VariableSynchronization::ON_READ,
                                       .aggregation = VariableAggregation::SUM});
    }
    Checkpoint({{"total", total}}).read(path).assert_consumed();
    EXPECT_EQ(total.value().item<float>(), 3.f) << replicas;
    for (const Variable& c : sd::distributed_components(total))
      EXPECT_FLOAT_EQ(c.value().item<float>(), 3.f / static_cast<float>(replicas));
  }
  Variable plain(constant(0.f), {.name = "total"});
  Checkpoint({{"total", plain}}).read(path).assert_consumed();
  EXPECT_EQ(plain.value().item<float>(), 3.f);
}

// An Adam run on variables of 40 elements (blocks of 32 and 8 over 2
// replicas) and a scalar (replica 0's alone), under MirroredStrategy over 2
// replicas, sharded or not (CommunicationOptions.shard_weight_update), or
// under a given strategy.
struct AdamRun {
  explicit AdamRun(bool shard)
      : owned(std::make_unique<sd::MirroredStrategy>(
            std::vector<std::string>{"CPU:0", "CPU:1"},
            sd::CommunicationOptions{.shard_weight_update = shard})),
        strategy(*owned) {
    make();
  }
  explicit AdamRun(sd::Strategy& s) : strategy(s) { make(); }
  void make() {
    auto scope = strategy.scope();
    std::vector<float> initial(40);
    for (size_t i = 0; i < initial.size(); ++i) initial[i] = std::cos(0.9f * float(i)) * 2.f;
    w = Variable(constant(initial), {.name = "w"});
    b = Variable(constant(0.75f), {.name = "b"});
    adam = keras::optimizers::Adam({.learning_rate = 0.01});
  }
  void step(int n) {
    strategy.run([&] {
      const float r = float(sd::get_replica_context()->replica_id_in_sync_group());
      std::vector<float> g(40);
      for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.7f * float(i + 1) * (r + 2) + n);
      adam->apply_gradients({{constant(g), w}, {constant(std::cos(r + float(n))), b}});
    });
  }
  Checkpoint checkpoint() { return Checkpoint({{"w", w}, {"b", b}, {"optimizer", adam}}); }
  // Every copy of w, b and every slot (slot_variables() first gathers them whole).
  std::vector<std::vector<float>> copies() {
    std::vector<Variable> all{w, b};
    for (const auto& s : adam->slot_variables()) all.push_back(s.slot);
    std::vector<std::vector<float>> out;
    for (const Variable& v : all) {
      for (const Variable& c : sd::distributed_components(v)) out.push_back(values_of(c));
    }
    return out;
  }
  std::unique_ptr<sd::Strategy> owned;
  sd::Strategy& strategy;
  Variable w;
  Variable b;
  std::shared_ptr<keras::optimizers::AdamOptimizer> adam;
};

TEST_F(DistributedCheckpointTest, ShardedSlotsAreSavedWholeAndRestoreAcrossTheSwitch) {
  // Each replica of a sharded run keeps only its block of a slot current; the
  // checkpoint still holds every slot whole (as TF saves full values), so it
  // restores into an unsharded run and the other way round, and training
  // continues with the same bits either way.
  TempDir dir("sharded_update");
  AdamRun sharded(true);
  AdamRun plain(false);
  for (int n = 0; n < 3; ++n) {
    sharded.step(n);
    plain.step(n);
  }
  ASSERT_TRUE(sharded.adam->slots_sharded());
  const std::string sharded_path = sharded.checkpoint().write(dir.file("sharded"));
  const std::string plain_path = plain.checkpoint().write(dir.file("plain"));
  const CheckpointReader from_sharded(sharded_path);
  const CheckpointReader from_plain(plain_path);
  const auto keys = from_plain.get_variable_to_shape_map();
  EXPECT_EQ(from_sharded.get_variable_to_shape_map(), keys);
  int slots = 0;
  for (const auto& [key, shape] : keys) {
    if (key.find("OPTIMIZER_SLOT") != std::string::npos) ++slots;
    if (from_plain.get_variable_to_dtype_map().at(key) != DType::float32) continue;
    EXPECT_EQ(from_sharded.get_tensor(key).to_vector<float>(),
              from_plain.get_tensor(key).to_vector<float>())
        << key;
  }
  EXPECT_EQ(slots, 4);  // m and v of w and b
  for (int n = 3; n < 5; ++n) plain.step(n);
  const auto expected = plain.copies();
  for (const auto& [path, shard] : {std::pair{sharded_path, false}, std::pair{plain_path, true}}) {
    AdamRun resumed(shard);
    {
      auto scope = resumed.strategy.scope();
      resumed.adam->build({resumed.w, resumed.b});
    }
    resumed.checkpoint().read(path).assert_consumed();
    for (int n = 3; n < 5; ++n) resumed.step(n);
    // A sharded run stores only its block of each slot again (m and v of w's
    // 40 elements: 32 on replica 0 and 8 on replica 1; b's on replica 0).
    EXPECT_EQ(resumed.adam->slot_bytes(1), shard ? 2 * 8 * 4 : 2 * 41 * 4);
    EXPECT_EQ(resumed.copies(), expected)
        << (shard ? "unsharded -> sharded" : "sharded -> unsharded");
  }
}

TEST_F(DistributedCheckpointTest, ADeferredRestoreScattersTheSavedSlotsIntoTheBlocks) {
  // Restored before the optimizer is built, the saved (whole) slots are
  // assigned when the first apply_gradients builds the sharded slots: each
  // replica's copy keeps its block of the saved value, and training goes on
  // with the bits of the run that never stopped.
  TempDir dir("sharded_deferred");
  AdamRun first(true);
  for (int n = 0; n < 3; ++n) first.step(n);
  const std::string path = first.checkpoint().write(dir.file("ckpt"));
  for (int n = 3; n < 5; ++n) first.step(n);
  AdamRun resumed(true);
  resumed.checkpoint().read(path);  // the slots do not exist yet
  EXPECT_FALSE(resumed.adam->built());
  for (int n = 3; n < 5; ++n) resumed.step(n);
  // m and v of w's 40 elements: 32 on replica 0 (with b's scalar), 8 on replica 1.
  EXPECT_EQ(resumed.adam->slot_bytes(0), 2 * 33 * 4);
  EXPECT_EQ(resumed.adam->slot_bytes(1), 2 * 8 * 4);
  EXPECT_EQ(resumed.copies(), first.copies());
}

TEST_F(DistributedCheckpointTest, AShardedVariableSavesOneFullTensorAndRestoresIntoAnyShardCount) {
  // A partitioned variable as ParameterServerStrategy makes it
  // (variable_partitioner=FixedShardsPartitioner(3)): one full [13, 2] tensor.
  TempDir dir("sharded");
  const Tensor table = reshape(cast(range(0, 26), DType::float32), {13, 2});
  const int64_t shards =
      sd::num_partitions(sd::FixedShardsPartitioner(3), TensorShape{13, 2}, DType::float32);
  auto emb = sd::ShardedVariable::create(table, shards, {.name = "emb"});
  ASSERT_EQ(emb.num_shards(), 3);
  const std::string path = Checkpoint({{"emb", emb}}).write(dir.file("ckpt"));
  const Tensor saved = CheckpointReader(path).get_tensor("emb/.ATTRIBUTES/VARIABLE_VALUE");
  EXPECT_EQ(saved.shape(), (TensorShape{13, 2}));
  EXPECT_EQ(saved.to_vector<float>(), table.to_vector<float>());
  for (int64_t n : {1, 2, 5}) {
    auto other = sd::ShardedVariable::create(zeros({13, 2}), n, {.name = "emb"});
    Checkpoint({{"emb", other}}).read(path).assert_consumed();
    EXPECT_EQ(other.value().to_vector<float>(), table.to_vector<float>()) << n << " shards";
    // Every shard holds its rows of the full value.
    for (int64_t i = 0; i < other.num_shards(); ++i) {
      const int64_t lo = other.offsets()[i], hi = other.offsets()[i + 1];
      EXPECT_EQ(values_of(other.variables()[i]), table.slice_rows(lo, hi).to_vector<float>());
    }
  }
  Variable plain(zeros({13, 2}), {.name = "emb"});
  Checkpoint({{"emb", plain}}).read(path).assert_consumed();
  EXPECT_EQ(values_of(plain), table.to_vector<float>());
}

// --- the resharding matrix --------------------------------------------------

// A Dense model, its Adam optimizer with slots, and a SyncOnRead total, built
// under `s` and filled with distinct values when `fill`.
struct Trained {
  std::shared_ptr<keras::SequentialModel> model;
  std::shared_ptr<keras::optimizers::AdamOptimizer> optimizer;
  Variable total;
};

Trained build(sd::Strategy& s, bool fill) {
  Trained t;
  {
    auto scope = s.scope();
    t.model = keras::Sequential({keras::layers::Dense(3, {.input_shape = {4}})});
    t.optimizer = keras::optimizers::Adam({});
    t.optimizer->build(t.model->trainable_variables());
    t.total = Variable(constant(0.f), {.name = "total",
                                       .synchronization = VariableSynchronization::ON_READ,
                                       .aggregation = VariableAggregation::SUM});
  }
  if (fill) {
    uint64_t seed = 10;
    for (const Variable& w : t.model->weights())
      w.assign(random::uniform(w.shape(), {.seed = seed++}));
    for (const auto& slot : t.optimizer->slot_variables())
      slot.slot.assign(random::uniform(slot.slot.shape(), {.seed = seed++}));
    t.optimizer->iterations_variable().assign(constant(int64_t{7}));
    s.run([&] {
      t.total.assign(
          constant(static_cast<float>(sd::get_replica_context()->replica_id_in_sync_group() + 1)));
    });
  }
  return t;
}

// Every copy of every variable, in a fixed order.
std::vector<std::vector<float>> copies_of(const Trained& t) {
  std::vector<Variable> vars = t.model->weights();
  for (const auto& slot : t.optimizer->slot_variables()) vars.push_back(slot.slot);
  std::vector<std::vector<float>> out;
  for (const Variable& v : vars)
    for (const Variable& c : sd::distributed_components(v)) out.push_back(values_of(c));
  return out;
}

TEST_F(DistributedCheckpointTest, TheReshardingMatrixRestoresEverySaveUnderEveryReplicaCount) {
  TempDir dir("matrix");
  for (int saved : {1, 2, 4}) {
    std::vector<std::vector<float>> expected_one_copy;
    std::string path;
    float total = 0;
    {
      sd::MirroredStrategy s(cpu_device_names(saved));
      Trained t = build(s, /*fill=*/true);
      // Mirrored copies are equal; keep one of each variable.
      auto all = copies_of(t);
      for (size_t i = 0; i < all.size(); i += saved) expected_one_copy.push_back(all[i]);
      total = t.total.value().item<float>();
      path = Checkpoint({{"model", t.model}, {"optimizer", t.optimizer}, {"total", t.total}})
                 .write(dir.file(str_cat("ckpt_", saved)));
    }
    for (int restored : {1, 2, 4}) {
      SCOPED_TRACE(str_cat("saved under ", saved, " replicas, restored under ", restored));
      sd::MirroredStrategy s(cpu_device_names(restored));
      Trained t = build(s, /*fill=*/false);
      Checkpoint({{"model", t.model}, {"optimizer", t.optimizer}, {"total", t.total}})
          .read(path)
          .assert_consumed();
      const auto all = copies_of(t);
      ASSERT_EQ(all.size(), expected_one_copy.size() * restored);
      for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], expected_one_copy[i / restored]);
      EXPECT_EQ(t.optimizer->iterations_variable().value().item<int64_t>(), 7);
      EXPECT_FLOAT_EQ(t.total.value().item<float>(), total);
      EXPECT_FLOAT_EQ(total, static_cast<float>(saved * (saved + 1)) / 2.f);
    }
  }
}

TEST_F(DistributedCheckpointTest, TheReshardingMatrixRestoresEverySaveUnderEveryShardCount) {
  TempDir dir("shards");
  const Tensor table = random::uniform({7, 3}, {.seed = 3});
  for (int saved : {1, 2, 3}) {
    auto emb = sd::ShardedVariable::create(table, saved, {.name = "emb"});
    const std::string path = Checkpoint({{"emb", emb}}).write(dir.file(str_cat("ckpt_", saved)));
    for (int restored : {1, 2, 3}) {
      SCOPED_TRACE(str_cat("saved in ", saved, " shards, restored in ", restored));
      auto other = sd::ShardedVariable::create(zeros({7, 3}), restored, {.name = "emb"});
      Checkpoint({{"emb", other}}).read(path).assert_consumed();
      ASSERT_EQ(other.num_shards(), restored);
      for (int64_t i = 0; i < restored; ++i) {
        EXPECT_EQ(values_of(other.variables()[i]),
                  table.slice_rows(other.offsets()[i], other.offsets()[i + 1]).to_vector<float>());
      }
    }
  }
}

// --- MultiWorkerMirroredStrategy --------------------------------------------

TEST_F(DistributedCheckpointTest, UnderMultiWorkerOnlyTheChiefsFilesAreKeptAndEveryWorkerRestores) {
  // Two workers as threads, each with its MultiWorkerMirroredStrategy (2
  // local replicas each). Both run the same save code; the worker that is not
  // the chief writes into <dir>/workertemp_1 and removes it.
  strata::testing::use_logical_cpus(2);
  TempDir dir("multi_worker");
  const std::vector<int> ports = cluster::pick_free_ports(2);
  const ClusterSpec spec(
      {{"worker", {str_cat("127.0.0.1:", ports[0]), str_cat("127.0.0.1:", ports[1])}}});
  auto worker = [&](int w) {
    sd::MultiWorkerMirroredStrategy s(
        {.cluster_resolver = std::make_shared<sd::cluster_resolver::SimpleClusterResolver>(
             spec, sd::cluster_resolver::SimpleClusterResolverOptions{.task_type = "worker",
                                                                      .task_id = w}),
         .communication_options = {.timeout_seconds = 30}});
    Variable weight, total;
    {
      auto scope = s.scope();
      weight = Variable(constant(std::vector<float>{1, 2, 3}), {.name = "w"});
      total = Variable(constant(0.f), {.name = "total",
                                       .synchronization = VariableSynchronization::ON_READ,
                                       .aggregation = VariableAggregation::SUM});
    }
    s.run([&] {
      total.assign(
          constant(static_cast<float>(sd::get_replica_context()->replica_id_in_sync_group() + 1)));
    });
    Checkpoint ckpt({{"w", weight}, {"total", total}});
    CheckpointManager manager(ckpt, dir.path(), {.max_to_keep = 1});
    manager.save();
    weight.assign(constant(std::vector<float>{4, 5, 6}));
    const std::string second = *manager.save();
    // Every worker restores from the chief's files.
    Variable w2, t2;
    {
      auto scope = s.scope();
      w2 = Variable(zeros({3}), {.name = "w"});
      t2 = Variable(constant(0.f), {.name = "total",
                                    .synchronization = VariableSynchronization::ON_READ,
                                    .aggregation = VariableAggregation::SUM});
    }
    Checkpoint restored({{"w", w2}, {"total", t2}});
    restored.restore(latest_checkpoint(dir.path())).assert_existing_objects_matched();
    std::vector<float> out = values_of(w2);
    out.push_back(t2.value().item<float>());  // a SUM across both workers' replicas
    return std::make_pair(second, out);
  };
  auto f0 = std::async(std::launch::async, worker, 0);
  auto f1 = std::async(std::launch::async, worker, 1);
  const auto r0 = f0.get();
  const auto r1 = f1.get();
  EXPECT_EQ(r0.second, (std::vector<float>{4, 5, 6, 10}));  // 1 + 2 + 3 + 4
  EXPECT_EQ(r1.second, r0.second);
  EXPECT_EQ(r0.first, dir.file("ckpt-2"));
  // The chief's two saves, max_to_keep=1: only ckpt-2 and the state file.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"checkpoint", "ckpt-2"}));
}

TEST_F(DistributedCheckpointTest,
       ShardedUpdatesAcrossWorkersMatchTheUnshardedOnesAndSaveWholeSlots) {
  // MultiWorkerMirroredStrategy, two workers as threads with 2 local replicas
  // each (4 in all), over the real rendezvous, Gloo and the hierarchical
  // group: 3 sharded Adam steps leave every copy on every worker with the
  // unsharded run's bits, and a save on every worker (the slots are gathered
  // across the workers first) writes the same tensors.
  strata::testing::use_logical_cpus(2);
  TempDir dir("sharded_multi_worker");
  auto on_two_workers = [&](bool shard) {
    const std::vector<int> ports = cluster::pick_free_ports(2);
    const ClusterSpec spec(
        {{"worker", {str_cat("127.0.0.1:", ports[0]), str_cat("127.0.0.1:", ports[1])}}});
    const std::string where = dir.file(shard ? "sharded" : "plain");
    std::filesystem::create_directories(where);
    auto worker = [&spec, &where, shard](int w) {
      sd::MultiWorkerMirroredStrategy s(
          {.cluster_resolver = std::make_shared<sd::cluster_resolver::SimpleClusterResolver>(
               spec, sd::cluster_resolver::SimpleClusterResolverOptions{.task_type = "worker",
                                                                        .task_id = w}),
           .communication_options = {.timeout_seconds = 60, .shard_weight_update = shard}});
      EXPECT_EQ(s.num_replicas_in_sync(), 4);
      AdamRun run(s);
      for (int n = 0; n < 3; ++n) run.step(n);
      EXPECT_EQ(run.adam->slots_sharded(), shard);
      Checkpoint ckpt = run.checkpoint();
      CheckpointManager(ckpt, where, {.max_to_keep = 1}).save();
      return run.copies();
    };
    auto f0 = std::async(std::launch::async, worker, 0);
    auto f1 = std::async(std::launch::async, worker, 1);
    const auto copies0 = f0.get();
    const auto copies1 = f1.get();
    EXPECT_EQ(copies0, copies1);
    const std::optional<std::string> latest = latest_checkpoint(where);
    EXPECT_TRUE(latest.has_value()) << where;
    return std::make_pair(copies0, latest.value_or(""));
  };
  const auto plain = on_two_workers(false);
  const auto sharded = on_two_workers(true);
  EXPECT_EQ(sharded.first, plain.first);
  const CheckpointReader from_sharded(sharded.second);
  const CheckpointReader from_plain(plain.second);
  const auto keys = from_plain.get_variable_to_shape_map();
  EXPECT_EQ(from_sharded.get_variable_to_shape_map(), keys);
  for (const auto& [key, shape] : keys) {
    if (from_plain.get_variable_to_dtype_map().at(key) != DType::float32) continue;
    EXPECT_EQ(from_sharded.get_tensor(key).to_vector<float>(),
              from_plain.get_tensor(key).to_vector<float>())
        << key;
  }
}

}  // namespace
}  // namespace strata::train
