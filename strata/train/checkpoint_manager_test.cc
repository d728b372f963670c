#include "strata/train/checkpoint_manager.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/testing/expect_error.h"

namespace strata::train {
namespace {

using testing::expect_error;

// A clock the test moves by hand (time.time() in TF's tests is mocked the same way).
class FakeClock {
 public:
  explicit FakeClock(double start) : now_(start) {
    internal::set_checkpoint_clock_for_testing([this] { return now_; });
  }
  ~FakeClock() { internal::set_checkpoint_clock_for_testing(nullptr); }
  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;
  void set(double t) { now_ = t; }

 private:
  double now_;
};

std::vector<std::string> files(const TempDir& dir, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  out.reserve(names.size());
  for (const auto& n : names) out.push_back(dir.file(n));
  return out;
}

// The guide's train_and_checkpoint, run twice over one directory:
//   ckpt = tf.train.Checkpoint(step=tf.Variable(1), optimizer=opt, net=net, iterator=iterator)
//   manager = tf.train.CheckpointManager(ckpt, './tf_ckpts', max_to_keep=3)
//   ckpt.restore(manager.latest_checkpoint)
//   for _ in range(50):
//     ckpt.step.assign_add(1)
//     if int(ckpt.step) % 10 == 0:
//       save_path = manager.save()
// (the model and optimizer are the subject of checkpoint_test.cc; here the step suffices).
TEST(CheckpointManagerTest, TheGuidesLoopKeepsTheLastThreeAndResumes) {
  TempDir dir("ckpt_manager");
  auto run = [&](int64_t expected_start) {
    Variable step(constant(int64_t{1}), {.name = "step", .trainable = false});
    Checkpoint ckpt({{"step", step}});
    CheckpointManager manager(ckpt, dir.path(), {.max_to_keep = 3});
    ckpt.restore(manager.latest_checkpoint());
    EXPECT_EQ(step.value().item<int64_t>(), expected_start);
    std::vector<std::string> saved;
    for (int i = 0; i < 50; ++i) {
      step.assign_add(constant(int64_t{1}));
      if (step.value().item<int64_t>() % 10 == 0) saved.push_back(*manager.save());
    }
    return saved;
  };
  // "Initializing from scratch." ... "Saved checkpoint for step 50: ./tf_ckpts/ckpt-5"
  EXPECT_EQ(run(1), files(dir, {"ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4", "ckpt-5"}));
  // "Restored from ./tf_ckpts/ckpt-5" ... "Saved checkpoint for step 100: ./tf_ckpts/ckpt-10"
  EXPECT_EQ(run(50), files(dir, {"ckpt-6", "ckpt-7", "ckpt-8", "ckpt-9", "ckpt-10"}));
  // print(manager.checkpoints): the three newest remain, the others are deleted.
  Variable step(constant(int64_t{0}));
  Checkpoint ckpt({{"step", step}});
  CheckpointManager manager(ckpt, dir.path(), {.max_to_keep = 3});
  EXPECT_EQ(manager.checkpoints(), files(dir, {"ckpt-8", "ckpt-9", "ckpt-10"}));
  EXPECT_EQ(manager.latest_checkpoint(), dir.file("ckpt-10"));
  for (int n = 1; n <= 10; ++n) {
    EXPECT_EQ(file_exists(dir.file("ckpt-" + std::to_string(n))), n >= 8) << n;
  }
}

TEST(CheckpointManagerTest, TheStateFileIsCheckpointStateText) {
  TempDir dir("ckpt_manager");
  FakeClock clock(1000.5);
  Variable v(constant(1.f));
  Checkpoint ckpt({{"v", v}});
  CheckpointManager manager(ckpt, dir.path(), {.max_to_keep = 2});
  manager.save();
  clock.set(1002.25);
  manager.save();
  clock.set(1010.0);
  manager.save();
  // last_preserved_timestamp is the manager's start time less one second.
  EXPECT_EQ(read_file(dir.file("checkpoint")),
            "model_checkpoint_path: \"ckpt-3\"\n"
            "all_model_checkpoint_paths: \"ckpt-2\"\n"
            "all_model_checkpoint_paths: \"ckpt-3\"\n"
            "all_model_checkpoint_timestamps: 1002.25\n"
            "all_model_checkpoint_timestamps: 1010\n"
            "last_preserved_timestamp: 999.5\n");
  const auto state = get_checkpoint_state(dir.path());
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->model_checkpoint_path, dir.file("ckpt-3"));
  EXPECT_EQ(state->all_model_checkpoint_paths, files(dir, {"ckpt-2", "ckpt-3"}));
  EXPECT_EQ(state->all_model_checkpoint_timestamps, (std::vector<double>{1002.25, 1010.0}));
  EXPECT_EQ(state->last_preserved_timestamp, 999.5);
}

TEST(CheckpointManagerTest, KeepCheckpointEveryNHoursPreservesOnePerInterval) {
  TempDir dir("ckpt_manager");
  const double t0 = 100000.0;
  FakeClock clock(t0);
  Variable v(constant(1.f));
  Checkpoint ckpt({{"v", v}});
  CheckpointManager manager(ckpt, dir.path(),
                            {.max_to_keep = 2, .keep_checkpoint_every_n_hours = 1.0});
  // Saves every half hour. Worked by TF's rule: a checkpoint leaving the
  // window of two is kept when it is at least an hour newer than the last one
  // kept (at first: the manager's start less a second, t0 - 1).
  //   ckpt-3 (t0+3600) leaves at the 5th save: t0+3600-3600 >= t0-1  -> kept
  //   ckpt-4 (t0+5400) leaves at the 6th:      t0+1800 <  t0+3600    -> deleted
  //   ckpt-5 (t0+7200) leaves at the 7th:      t0+3600 >= t0+3600    -> kept
  for (int i = 0; i < 7; ++i) {
    clock.set(t0 + 1800.0 * i);
    manager.save();
  }
  for (int n = 1; n <= 7; ++n) {
    EXPECT_EQ(file_exists(dir.file("ckpt-" + std::to_string(n))), n == 3 || n >= 5) << n;
  }
  EXPECT_EQ(manager.checkpoints(), files(dir, {"ckpt-6", "ckpt-7"}));
  EXPECT_EQ(get_checkpoint_state(dir.path())->last_preserved_timestamp, t0 + 7200.0);

  // A manager made later over the same directory continues from the state file.
  clock.set(t0 + 1800.0 * 7);
  CheckpointManager again(ckpt, dir.path(),
                          {.max_to_keep = 2, .keep_checkpoint_every_n_hours = 1.0});
  EXPECT_EQ(again.checkpoints(), files(dir, {"ckpt-6", "ckpt-7"}));
  again.save();  // ckpt-8; ckpt-6 (t0+9000) leaves: t0+5400 < t0+7200 -> deleted
  EXPECT_FALSE(file_exists(dir.file("ckpt-6")));
  EXPECT_EQ(again.checkpoints(), files(dir, {"ckpt-7", "ckpt-8"}));
}

TEST(CheckpointManagerTest, MaxToKeepUnsetKeepsEverything) {
  TempDir dir("ckpt_manager");
  Variable v(constant(1.f));
  Checkpoint ckpt({{"v", v}});
  CheckpointManager manager(ckpt, dir.path());
  for (int i = 0; i < 4; ++i) manager.save();
  EXPECT_EQ(manager.checkpoints(), files(dir, {"ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4"}));
  for (int n = 1; n <= 4; ++n) EXPECT_TRUE(file_exists(dir.file("ckpt-" + std::to_string(n))));
}

TEST(CheckpointManagerTest, CheckpointNumberAndNameChooseTheFileName) {
  TempDir dir("ckpt_manager");
  Variable v(constant(1.f));
  Checkpoint ckpt({{"v", v}});
  CheckpointManager manager(ckpt, dir.file("d"), {.max_to_keep = 5, .checkpoint_name = "model"});
  EXPECT_EQ(manager.save(100), dir.file("d/model-100"));
  EXPECT_EQ(manager.save(), dir.file("d/model-2"));  // the save counter counted both
  // Saving a number again moves it to the end of the queue.
  EXPECT_EQ(manager.save(100), dir.file("d/model-100"));
  EXPECT_EQ(manager.checkpoints(), files(dir, {"d/model-2", "d/model-100"}));
  EXPECT_EQ(latest_checkpoint(dir.file("d")), dir.file("d/model-100"));
}

TEST(CheckpointManagerTest, CheckpointIntervalSkipsSavesUntilTheStepAdvances) {
  TempDir dir("ckpt_manager");
  Variable step(constant(int64_t{0}));
  Checkpoint ckpt({{"step", step}});
  CheckpointManager manager(ckpt, dir.path(),
                            {.max_to_keep = 10, .step_counter = step, .checkpoint_interval = 5});
  std::vector<int64_t> saved_at;
  for (int64_t s = 0; s < 12; ++s) {
    step.assign(constant(s));
    if (manager.save()) saved_at.push_back(s);
  }
  EXPECT_EQ(saved_at, (std::vector<int64_t>{0, 5, 10}));
  step.assign(constant(int64_t{11}));
  EXPECT_TRUE(manager.save(std::nullopt, /*check_interval=*/false).has_value());
  EXPECT_FALSE(manager.save(std::nullopt, /*check_interval=*/false).has_value());  // same step
  expect_error([&] { CheckpointManager(ckpt, dir.path(), {.checkpoint_interval = 5}); },
               ErrorCode::INVALID_ARGUMENT, {"step_counter"});
  expect_error([&] { CheckpointManager(ckpt, dir.path(), {.max_to_keep = 0}); },
               ErrorCode::INVALID_ARGUMENT, {"max_to_keep", "0"});
}

TEST(CheckpointManagerTest, RestoreOrInitializeRestoresTheLatestOrCallsInitFn) {
  TempDir dir("ckpt_manager");
  Variable v(constant(1.f));
  Checkpoint ckpt({{"v", v}});
  int init_calls = 0;
  CheckpointManager fresh(ckpt, dir.path(), {.max_to_keep = 1, .init_fn = [&] {
                                               v.assign(constant(-1.f));
                                               ++init_calls;
                                             }});
  EXPECT_EQ(fresh.restore_or_initialize(), std::nullopt);
  EXPECT_EQ(init_calls, 1);
  EXPECT_EQ(v.value().item<float>(), -1.f);
  v.assign(constant(5.f));
  const auto path = fresh.save();

  Variable v2(constant(0.f));
  Checkpoint ckpt2({{"v", v2}});
  CheckpointManager resumed(ckpt2, dir.path(),
                            {.max_to_keep = 1, .init_fn = [&] { ++init_calls; }});
  EXPECT_EQ(resumed.restore_or_initialize(), path);
  EXPECT_EQ(init_calls, 1);
  EXPECT_EQ(v2.value().item<float>(), 5.f);
}

TEST(CheckpointManagerTest, LatestCheckpointNeedsAStateFileNamingAnExistingCheckpoint) {
  TempDir dir("ckpt_manager");
  EXPECT_EQ(latest_checkpoint(dir.path()), std::nullopt);
  write_file_atomically(dir.file("checkpoint"), "model_checkpoint_path: \"ckpt-9\"\n");
  EXPECT_EQ(latest_checkpoint(dir.path()), std::nullopt);  // ckpt-9 does not exist
  write_file_atomically(dir.file("checkpoint"),
                        "# written by hand\nmodel_checkpoint_path: 'ck' \"pt\\0551\"\n");
  Variable v(constant(1.f));
  Checkpoint({{"v", v}}).write(dir.file("ckpt-1"));
  EXPECT_EQ(latest_checkpoint(dir.path()), dir.file("ckpt-1"));  // octal \055 is '-'
  write_file_atomically(dir.file("checkpoint"),
                        "model_checkpoint_path: \"ckpt-1\"\nbogus_field: 3\n");
  expect_error([&] { latest_checkpoint(dir.path()); }, ErrorCode::DATA_LOSS,
               {dir.file("checkpoint"), "line 2", "bogus_field"});
  write_file_atomically(dir.file("checkpoint"), "model_checkpoint_path: \"ckpt-1\n");
  expect_error([&] { latest_checkpoint(dir.path()); }, ErrorCode::DATA_LOSS,
               {"line 1", "unterminated"});
}

TEST(CheckpointManagerTest, PathsWithQuotesAndNonAsciiBytesRoundTrip) {
  TempDir dir("ckpt_manager");
  const std::string odd = dir.file("we\"ird\\name\xc3\xa9-1");
  CheckpointState state{.model_checkpoint_path = odd};
  update_checkpoint_state(dir.path(), state, {.save_relative_paths = true});
  EXPECT_EQ(read_file(dir.file("checkpoint")),
            "model_checkpoint_path: \"we\\\"ird\\\\name\\303\\251-1\"\n"
            "all_model_checkpoint_paths: \"we\\\"ird\\\\name\\303\\251-1\"\n");
  EXPECT_EQ(get_checkpoint_state(dir.path())->model_checkpoint_path, odd);
}

}  // namespace
}  // namespace strata::train
