#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <set>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/io/tfrecord.h"
#include "strata/keras/callbacks/backup_and_restore.h"
#include "strata/keras/callbacks/csv_logger.h"
#include "strata/keras/callbacks/early_stopping.h"
#include "strata/keras/callbacks/event.pb.h"
#include "strata/keras/callbacks/lambda_callback.h"
#include "strata/keras/callbacks/learning_rate_scheduler.h"
#include "strata/keras/callbacks/model_checkpoint.h"
#include "strata/keras/callbacks/tensorboard.h"
#include "strata/keras/layers/dense.h"
#include "strata/keras/losses.h"
#include "strata/keras/optimizers/sgd.h"
#include "strata/keras/sequential.h"
#include "strata/keras/weights_io.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/random_ops.h"
#include "strata/testing/files.h"

namespace strata::keras::callbacks {
namespace {

namespace fs = std::filesystem;

class CallbacksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    x_ = strata::random::uniform({16, 4}, {.minval = -1, .maxval = 1, .seed = 21});
    y_ = strata::random::uniform_int({16}, 0, 3, {.seed = 22});
  }

  std::shared_ptr<SequentialModel> make_model(double lr = 0.1, double momentum = 0.0) {
    auto model = Sequential({layers::Dense(3, {.input_shape = {4}})});
    model->compile({.optimizer = optimizers::SGD({.learning_rate = lr, .momentum = momentum}),
                    .loss = LossFunction([](const Tensor& y, const Tensor& p) {
                      return losses::sparse_categorical_crossentropy(y, p, {.from_logits = true});
                    })});
    return model;
  }
  std::string path(const std::string& name) const { return dir_.file(name); }

  strata::testing::TempDir dir_{"strata_callbacks"};
  Tensor x_, y_;
};

// Sets the logs' `name` to values[epoch] before later callbacks see them.
CallbackPtr override_log(const std::string& name, const std::vector<double>& values) {
  return LambdaCallback(
      {.on_epoch_end = [name, values](int epoch, Logs& logs) { logs.set(name, values[epoch]); }});
}

TEST(FormatFilepathTest, FollowsPythonFormatSpecs) {
  const Logs logs{{"loss", 0.5}, {"val_loss", 0.12345}};
  EXPECT_EQ(format_filepath("w-{epoch:02d}-{val_loss:.2f}.h5", 3, logs), "w-03-0.12.h5");
  EXPECT_EQ(format_filepath("{epoch}_{loss}", 12, logs), "12_0.5");
  EXPECT_EQ(format_filepath("{epoch:>4}|{epoch:<3}|{loss:+.1e}|{{x}}", 7, logs),
            "   7|7  |+5.0e-01|{x}");
  EXPECT_THROW(format_filepath("{accuracy}", 1, logs), InvalidArgumentError);
  EXPECT_THROW(format_filepath("{loss:d}", 1, logs), InvalidArgumentError);
  EXPECT_THROW(format_filepath("{epoch", 1, logs), InvalidArgumentError);
}

TEST_F(CallbacksTest, ModelCheckpointWritesFormattedNamesAndOnlyTheBest) {
  auto model = make_model();
  auto every = ModelCheckpoint(path("all-{epoch:02d}.weights"), {.save_weights_only = true});
  auto best = ModelCheckpoint(path("best-{epoch}-{loss:.1f}.weights"),
                              {.monitor = "loss", .save_best_only = true});
  model->fit(x_, y_,
             {.batch_size = 8,
              .epochs = 4,
              .verbose = 0,
              .callbacks = {override_log("loss", {3.0, 1.0, 2.0, 0.5}), every, best}});
  for (const char* f : {"all-01.weights", "all-02.weights", "all-03.weights", "all-04.weights",
                        "best-1-3.0.weights", "best-2-1.0.weights", "best-4-0.5.weights"}) {
    EXPECT_TRUE(fs::exists(path(f))) << f;
  }
  EXPECT_FALSE(fs::exists(path("best-3-2.0.weights")));
  EXPECT_EQ(best->best(), 0.5);
  // save_weights_only=false stores the optimizer too; the last file holds the final weights.
  EXPECT_EQ(read_weights_file(path("best-4-0.5.weights")).kind, "model");
  EXPECT_FALSE(read_weights_file(path("best-4-0.5.weights")).optimizer.empty());
  const WeightsFile last = read_weights_file(path("all-04.weights"));
  EXPECT_EQ(last.kind, "weights");
  EXPECT_EQ(last.model[0].value.to_vector<float>(), model->get_weights()[0].to_vector<float>());
}

TEST_F(CallbacksTest, EarlyStoppingStopsAfterPatienceAndRestoresBestWeights) {
  auto model = make_model();
  std::vector<std::vector<Tensor>> weights_at_end;
  auto record = LambdaCallback(
      {.on_epoch_end = [&](int, Logs&) { weights_at_end.push_back(model->get_weights()); }});
  auto stop = EarlyStopping({.monitor = "val_loss", .patience = 2, .restore_best_weights = true});
  History h = model->fit(
      x_, y_,
      {.batch_size = 8,
       .epochs = 10,
       .verbose = 0,
       .callbacks = {override_log("val_loss", {1.0, 0.5, 0.6, 0.7, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1}),
                     record, stop}});
  // Best at epoch 1; epochs 2 and 3 do not improve: stop at epoch 3.
  EXPECT_EQ(h.epoch, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(stop->stopped_epoch(), 3);
  EXPECT_EQ(stop->best_epoch(), 1);
  ASSERT_EQ(weights_at_end.size(), 4u);
  const std::vector<Tensor> final_weights = model->get_weights();
  for (size_t i = 0; i < final_weights.size(); ++i) {
    EXPECT_EQ(final_weights[i].to_vector<float>(), weights_at_end[1][i].to_vector<float>());
  }
  EXPECT_NE(final_weights[0].to_vector<float>(), weights_at_end[3][0].to_vector<float>());
}

TEST_F(CallbacksTest, EarlyStoppingMinDeltaAndMaxModeForAccuracy) {
  auto model = make_model();
  // "accuracy" is maximised; +0.005 is below min_delta 0.01, so it is no improvement.
  auto stop = EarlyStopping({.monitor = "accuracy", .min_delta = 0.01, .patience = 1});
  History h = model->fit(
      x_, y_,
      {.batch_size = 8,
       .epochs = 10,
       .verbose = 0,
       .callbacks = {override_log("accuracy", {0.5, 0.6, 0.605, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}),
                     stop}});
  EXPECT_EQ(h.epoch.size(), 3u);
  EXPECT_EQ(stop->stopped_epoch(), 2);
  EXPECT_DOUBLE_EQ(stop->best(), 0.6);
}

TEST_F(CallbacksTest, CSVLoggerWritesSortedColumnsAndAppends) {
  auto model = make_model();
  const std::string csv = path("log.csv");
  model->fit(x_, y_,
             {.batch_size = 8,
              .epochs = 2,
              .verbose = 0,
              .callbacks = {override_log("loss", {0.5, 0.25}), override_log("val_loss", {1.5, 0.1}),
                            override_log("acc", {0.75, 1.0}), CSVLogger(csv)}});
  EXPECT_EQ(strata::read_file(csv),
            "epoch,acc,loss,val_loss\r\n0,0.75,0.5,1.5\r\n1,1.0,0.25,0.1\r\n");
  model->fit(x_, y_,
             {.batch_size = 8,
              .epochs = 1,
              .verbose = 0,
              .callbacks = {override_log("loss", {0.125}), override_log("val_loss", {2.0}),
                            override_log("acc", {0.5}), CSVLogger(csv, ";", /*append=*/true)}});
  EXPECT_EQ(strata::read_file(csv),
            "epoch,acc,loss,val_loss\r\n0,0.75,0.5,1.5\r\n1,1.0,0.25,0.1\r\n0;0.5;0.125;2.0\r\n");
}

TEST_F(CallbacksTest, BackToBackTensorBoardRunsNeverShareAnEventFile) {
  // Two fits starting within the same second in one process: TensorFlow's
  // per-process counter in the name keeps their files apart.
  std::set<std::string> files;
  for (int run = 0; run < 3; ++run) {
    auto tb = TensorBoard({.log_dir = path("same_logs")});
    make_model()->fit(x_, y_, {.batch_size = 8, .epochs = 1, .verbose = 0, .callbacks = {tb}});
    files.insert(tb->event_file("train"));
  }
  EXPECT_EQ(files.size(), 3u);
  int on_disk = 0;
  for (const auto& e : fs::directory_iterator(fs::path(path("same_logs")) / "train")) {
    on_disk += e.is_regular_file();
  }
  EXPECT_EQ(on_disk, 3);
}

TEST_F(CallbacksTest, TensorBoardEventFilesParseBackWithEpochScalars) {
  auto model = make_model();
  auto tb = TensorBoard({.log_dir = path("logs")});
  History h = model->fit(x_, y_,
                         {.batch_size = 8,
                          .epochs = 2,
                          .verbose = 0,
                          .callbacks = {tb},
                          .validation_data = {{x_, y_}}});
  for (const std::string run : {"train", "validation"}) {
    const std::string file = tb->event_file(run);
    EXPECT_EQ(fs::path(file).parent_path(), fs::path(path("logs")) / run);
    EXPECT_TRUE(std::regex_match(fs::path(file).filename().string(),
                                 std::regex("events\\.out\\.tfevents\\.\\d{10}\\..+\\." +
                                            std::to_string(::getpid()) + "\\.\\d+\\.v2")))
        << file;
    io::TFRecordReader reader(file);
    std::vector<tensorflow::Event> events;
    while (std::optional<std::string> rec = reader.read_next()) {
      tensorflow::Event e;
      ASSERT_TRUE(e.ParseFromString(*rec));
      events.push_back(e);
    }
    ASSERT_EQ(events.size(), 3u) << run;
    EXPECT_EQ(events[0].file_version(), "brain.Event:2");
    const std::vector<double>& loss = h.history[run == "train" ? "loss" : "val_loss"];
    for (int epoch = 0; epoch < 2; ++epoch) {
      const tensorflow::Event& e = events[epoch + 1];
      EXPECT_EQ(e.step(), epoch);
      ASSERT_EQ(e.summary().value_size(), 1);
      EXPECT_EQ(e.summary().value(0).tag(), "epoch_loss");
      EXPECT_FLOAT_EQ(e.summary().value(0).simple_value(), float(loss[epoch]));
    }
  }
  EXPECT_THROW(TensorBoard({.histogram_freq = 1}), UnimplementedError);
}

TEST_F(CallbacksTest, LearningRateSchedulerSetsTheOptimizersRate) {
  auto model = make_model(/*lr=*/0.4);
  std::vector<double> seen;
  History h = model->fit(x_, y_,
                         {.batch_size = 8,
                          .epochs = 3,
                          .verbose = 0,
                          .callbacks = {LearningRateScheduler([&](int epoch, double lr) {
                            seen.push_back(lr);
                            return epoch == 0 ? 0.1 : lr * 0.5;
                          })}});
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_NEAR(seen[0], 0.4, 1e-7);
  EXPECT_NEAR(seen[2], 0.05, 1e-7);
  EXPECT_NEAR(model->optimizer()->learning_rate(), 0.025, 1e-7);
  ASSERT_EQ(h.history["lr"].size(), 3u);
  EXPECT_NEAR(h.history["lr"][0], 0.1, 1e-7);
  EXPECT_NEAR(h.history["lr"][2], 0.025, 1e-7);
}

// The guide "Distributed training with Keras":
//   def decay(epoch):
//     if epoch < 3: return 1e-3
//     elif epoch >= 3 and epoch < 7: return 1e-4
//     else: return 1e-5
//   tf.keras.callbacks.LearningRateScheduler(decay)
TEST_F(CallbacksTest, LearningRateSchedulerTakesAOneArgumentScheduleAsTheGuideWritesIt) {
  auto decay = [](int epoch) {
    if (epoch < 3) return 1e-3;
    if (epoch >= 3 && epoch < 7) return 1e-4;
    return 1e-5;
  };
  auto model = make_model(/*lr=*/0.4);
  History h = model->fit(
      x_, y_,
      {.batch_size = 8, .epochs = 8, .verbose = 0, .callbacks = {LearningRateScheduler(decay)}});
  const std::vector<double> want = {1e-3, 1e-3, 1e-3, 1e-4, 1e-4, 1e-4, 1e-4, 1e-5};
  ASSERT_EQ(h.history["lr"].size(), want.size());
  for (size_t e = 0; e < want.size(); ++e) EXPECT_FLOAT_EQ(h.history["lr"][e], want[e]) << e;
}

// The same guide:
//   checkpoint_dir = './training_checkpoints'
//   checkpoint_prefix = os.path.join(checkpoint_dir, "ckpt_{epoch}")
//   tf.keras.callbacks.ModelCheckpoint(filepath=checkpoint_prefix, save_weights_only=True)
// The folder does not exist before the first save; Keras creates it.
TEST_F(CallbacksTest, ModelCheckpointCreatesTheFoldersOfItsFilepath) {
  const std::string checkpoint_dir = path("training_checkpoints/nested");
  const std::string checkpoint_prefix = (fs::path(checkpoint_dir) / "ckpt_{epoch}").string();
  auto model = make_model();
  model->fit(x_, y_,
             {.batch_size = 8,
              .epochs = 2,
              .verbose = 0,
              .callbacks = {ModelCheckpoint(checkpoint_prefix, {.save_weights_only = true})}});
  EXPECT_TRUE(fs::exists(fs::path(checkpoint_dir) / "ckpt_1"));
  EXPECT_TRUE(fs::exists(fs::path(checkpoint_dir) / "ckpt_2"));
}

TEST_F(CallbacksTest, LambdaCallbackHooksRunInKerasOrder) {
  auto model = make_model();
  std::vector<std::string> events;
  auto cb = LambdaCallback({
      .on_epoch_begin = [&](int e, Logs&) { events.push_back("epoch_begin " + std::to_string(e)); },
      .on_epoch_end =
          [&](int e, Logs& logs) {
            events.push_back("epoch_end " + std::to_string(e) +
                             (logs.contains("loss") ? " loss" : ""));
          },
      .on_batch_begin = [&](int64_t b,
                            Logs&) { events.push_back("batch_begin " + std::to_string(b)); },
      .on_batch_end = [&](int64_t b, Logs&) { events.push_back("batch_end " + std::to_string(b)); },
      .on_train_begin = [&](Logs&) { events.push_back("train_begin"); },
      .on_train_end =
          [&](Logs& logs) {
            events.push_back(std::string("train_end") + (logs.contains("loss") ? " loss" : ""));
          },
  });
  model->fit(x_, y_,
             {.batch_size = 8, .epochs = 2, .verbose = 0, .callbacks = {cb}, .shuffle = false});
  EXPECT_EQ(events,
            (std::vector<std::string>{
                "train_begin", "epoch_begin 0", "batch_begin 0", "batch_end 0", "batch_begin 1",
                "batch_end 1", "epoch_end 0 loss", "epoch_begin 1", "batch_begin 0", "batch_end 0",
                "batch_begin 1", "batch_end 1", "epoch_end 1 loss", "train_end loss"}));
}

// A resumed run ends where the uninterrupted reference did: weights and step count.
void expect_same_training_state(const SequentialModel& got, const SequentialModel& want) {
  const std::vector<Tensor> g = got.get_weights(), w = want.get_weights();
  for (size_t i = 0; i < g.size(); ++i) {
    const std::vector<float> gv = g[i].to_vector<float>(), wv = w[i].to_vector<float>();
    for (size_t j = 0; j < gv.size(); ++j) EXPECT_NEAR(gv[j], wv[j], 1e-6) << i << "/" << j;
  }
  EXPECT_EQ(got.optimizer()->iterations(), want.optimizer()->iterations());
}

TEST_F(CallbacksTest, BackupAndRestoreResumesAnInterruptedRunToTheSameWeights) {
  // Uninterrupted reference: momentum makes the optimizer's slots matter.
  auto reference = make_model(0.2, 0.9);
  const std::vector<Tensor> init = reference->get_weights();
  reference->fit(x_, y_, {.batch_size = 4, .epochs = 5, .verbose = 0});

  const std::string backup_dir = path("backup");
  struct Interrupted : std::runtime_error {
    Interrupted() : std::runtime_error("simulated crash") {}
  };
  auto crash_at_2 = LambdaCallback({.on_epoch_end = [](int epoch, Logs&) {
    if (epoch == 2) throw Interrupted();
  }});
  {
    auto first = make_model(0.2, 0.9);
    first->set_weights(init);
    EXPECT_THROW(first->fit(x_, y_,
                            {.batch_size = 4,
                             .epochs = 5,
                             .verbose = 0,
                             .callbacks = {crash_at_2, BackupAndRestore(backup_dir)}}),
                 Interrupted);
  }
  auto backup = BackupAndRestore(backup_dir);
  // TF's layout: the backup lives in <backup_dir>/chief (every worker reads it).
  EXPECT_EQ(backup->backup_path(),
            (fs::path(backup_dir) / "chief" / "training_state.weights").string());
  EXPECT_TRUE(fs::exists(backup->backup_path()));
  // A new model and optimizer, as a restarted process would build them.
  auto second = make_model(0.2, 0.9);
  second->set_weights(init);
  std::vector<int> epochs_run;
  auto record = LambdaCallback({.on_epoch_begin = [&](int e, Logs&) { epochs_run.push_back(e); }});
  History h = second->fit(
      x_, y_, {.batch_size = 4, .epochs = 5, .verbose = 0, .callbacks = {backup, record}});
  EXPECT_EQ(backup->resumed_epoch(), 2);  // epochs 0 and 1 were backed up; epoch 2 crashed
  EXPECT_EQ(epochs_run, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(h.epoch, (std::vector<int>{2, 3, 4}));
  expect_same_training_state(*second, *reference);
  // Training finished: the backup is gone, so the next fit starts afresh.
  EXPECT_FALSE(fs::exists(backup->backup_path()));
  EXPECT_FALSE(fs::exists(fs::path(backup_dir) / "chief"));
}

TEST_F(CallbacksTest, ABackupWithAMalformedEpochOrBatchIsDataLossNamingTheField) {
  struct Case {
    std::map<std::string, std::string> metadata;
    const char* named;
  };
  const std::vector<Case> cases = {
      {{{"epoch", "x7"}}, "'epoch' = 'x7'"},
      {{{"epoch", "-1"}}, "'epoch' = '-1'"},
      {{{"epoch", "99999999999"}}, "'epoch' = '99999999999'"},
      {{{"epoch", "1"}, {"batch", "3b"}}, "'batch' = '3b'"},
  };
  for (const Case& c : cases) {
    const std::string backup_dir = path("bad_backup");
    fs::remove_all(backup_dir);
    auto model = make_model(0.2, 0.9);
    model->fit(x_, y_, {.batch_size = 4, .epochs = 1, .verbose = 0});  // builds the optimizer
    fs::create_directories(fs::path(backup_dir) / "chief");
    save_training_state(
        *model, (fs::path(backup_dir) / "chief" / "training_state.weights").string(), c.metadata);
    try {
      model->fit(x_, y_,
                 {.batch_size = 4,
                  .epochs = 2,
                  .verbose = 0,
                  .callbacks = {BackupAndRestore(backup_dir)}});
      ADD_FAILURE() << c.named << ": resumed";
    } catch (const DataLossError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(c.named));
      EXPECT_THAT(e.what(), ::testing::HasSubstr("training_state.weights"));
    }
  }
}

// With steps_per_epoch the data runs on across epochs (2 batches an epoch over 4
// batches of data: epochs 0 and 1 share one shuffled pass, epoch 2 starts a new
// one that epoch 3 continues): the resumed run must start its epoch at the batch
// the uninterrupted run reached there, not at the start of a new pass.
TEST_F(CallbacksTest, BackupAndRestoreWithStepsPerEpochResumesAtTheSameDataPosition) {
  const FitOptions base{.batch_size = 4, .epochs = 5, .verbose = 0, .steps_per_epoch = 2};
  auto reference = make_model(0.2, 0.9);
  const std::vector<Tensor> init = reference->get_weights();
  reference->fit(x_, y_, base);

  const std::string backup_dir = path("backup_steps");
  struct Interrupted : std::runtime_error {
    Interrupted() : std::runtime_error("simulated crash") {}
  };
  {
    auto first = make_model(0.2, 0.9);
    first->set_weights(init);
    FitOptions crashing = base;
    crashing.callbacks = {LambdaCallback({.on_epoch_end =
                                              [](int epoch, Logs&) {
                                                if (epoch == 3) throw Interrupted();
                                              }}),
                          BackupAndRestore(backup_dir)};
    EXPECT_THROW(first->fit(x_, y_, crashing), Interrupted);
  }
  auto second = make_model(0.2, 0.9);
  second->set_weights(init);
  auto backup = BackupAndRestore(backup_dir);
  FitOptions resumed = base;
  resumed.callbacks = {backup};
  second->fit(x_, y_, resumed);
  EXPECT_EQ(backup->resumed_epoch(), 3);
  expect_same_training_state(*second, *reference);
}

// fit(x, y) with save_freq = N batches, interrupted by an exception thrown from
// a batch hook before batch `crash_batch` of epoch `crash_epoch`; then a fresh
// model resumes. Returns the (epoch, batch) pairs the resumed fit trained.
struct BatchResumeRun {
  std::vector<std::pair<int, int64_t>> batches;
  std::shared_ptr<BackupAndRestoreCallback> backup;
  std::shared_ptr<SequentialModel> model;
};

TEST_F(CallbacksTest, BackupAndRestoreEveryNBatchesResumesAtTheNextBatchWithTheSameWeights) {
  // 16 examples in batches of 4: 4 batches per epoch, shuffled per epoch, so
  // resuming anywhere but at the right batch of the right epoch changes the weights.
  auto reference = make_model(0.2, 0.9);
  const std::vector<Tensor> init = reference->get_weights();
  reference->fit(x_, y_, {.batch_size = 4, .epochs = 3, .verbose = 0});

  struct Interrupted : std::runtime_error {
    Interrupted() : std::runtime_error("simulated crash") {}
  };
  auto run = [&](int64_t save_freq, int crash_epoch, int64_t crash_batch) {
    const std::string backup_dir = path("backup_" + std::to_string(save_freq));
    {
      int epoch_now = 0;
      auto crash = LambdaCallback({.on_epoch_begin = [&](int e, Logs&) { epoch_now = e; },
                                   .on_batch_begin =
                                       [&](int64_t b, Logs&) {
                                         if (epoch_now == crash_epoch && b == crash_batch)
                                           throw Interrupted();
                                       }});
      auto first = make_model(0.2, 0.9);
      first->set_weights(init);
      EXPECT_THROW(first->fit(x_, y_,
                              {.batch_size = 4,
                               .epochs = 3,
                               .verbose = 0,
                               .callbacks = {BackupAndRestore(backup_dir, {.save_freq = save_freq}),
                                             crash}}),
                   Interrupted);
    }
    BatchResumeRun r;
    r.backup = BackupAndRestore(backup_dir, {.save_freq = save_freq});
    r.model = make_model(0.2, 0.9);
    r.model->set_weights(init);
    int epoch_now = -1;
    auto record = LambdaCallback(
        {.on_epoch_begin = [&](int e, Logs&) { epoch_now = e; },
         .on_batch_begin = [&](int64_t b, Logs&) { r.batches.emplace_back(epoch_now, b); }});
    r.model->fit(x_, y_,
                 {.batch_size = 4, .epochs = 3, .verbose = 0, .callbacks = {r.backup, record}});
    EXPECT_FALSE(fs::exists(r.backup->backup_path()));  // deleted after the complete fit
    return r;
  };
  using Batches = std::vector<std::pair<int, int64_t>>;
  {
    // Backups after global batches 3, 6, 9 (counted across epochs): the crash
    // before epoch 1's batch 3 resumes after the backup at epoch 1, batch 1.
    SCOPED_TRACE("save_freq 3");
    BatchResumeRun r = run(3, 1, 3);
    EXPECT_EQ(r.backup->resumed_epoch(), 1);
    EXPECT_EQ(r.backup->resumed_step(), 2);
    EXPECT_EQ(r.batches, (Batches{{1, 2}, {1, 3}, {2, 0}, {2, 1}, {2, 2}, {2, 3}}));
    expect_same_training_state(*r.model, *reference);
  }
  {
    // A backup after an epoch's last batch (every 4 = each epoch end): fit
    // continues with the next epoch (TF's batch == steps_per_epoch - 1 case).
    SCOPED_TRACE("save_freq 4");
    BatchResumeRun r = run(4, 1, 2);
    EXPECT_EQ(r.backup->resumed_epoch(), 0);
    EXPECT_EQ(r.backup->resumed_step(), 4);
    EXPECT_EQ(r.batches, (Batches{{1, 0}, {1, 1}, {1, 2}, {1, 3}, {2, 0}, {2, 1}, {2, 2}, {2, 3}}));
    expect_same_training_state(*r.model, *reference);
  }
}

}  // namespace
}  // namespace strata::keras::callbacks
