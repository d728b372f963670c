// Checkpoints under MultiWorkerMirroredStrategy in real processes on loopback:
// two workers started by `strata launch` run tests/fault_tolerance/
// checkpoint_worker.cc. Only the chief's files may appear at the user's paths,
// the other worker's temporary directory must be gone, and BackupAndRestore
// must survive a SIGKILLed worker: restarting both resumes at the backup's
// epoch and ends with bit-for-bit the weights of an uninterrupted run.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "strata/base/crc32c.h"
#include "strata/keras/weights_io.h"
#include "tests/cli/cli_util.h"

namespace {

namespace fs = std::filesystem;

using strata_cli_test::Result;
using strata_cli_test::TempDir;

// `strata launch --nproc 2 -- checkpoint_worker ARGS` (ctest's TIMEOUT bounds
// it; the workers' collectives time out after 20 s and launch stops the rest
// when one dies).
Result launch(const std::string& args) {
  return strata_cli_test::run("launch --nproc 2 --devices-per-worker 1 --grace-seconds 2 -- " +
                              std::string(CHECKPOINT_WORKER_PATH) + " " + args);
}

// The value a worker printed after "<key> ", or "" when it printed none.
std::string printed(const Result& run, int worker, const std::string& key) {
  const std::regex line("\\[worker:" + std::to_string(worker) + "\\] " + key + " (\\S+)");
  std::smatch m;
  return std::regex_search(run.output, m, line) ? m[1].str() : "";
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

std::string crc_of_file_weights(const fs::path& file) {
  const strata::keras::WeightsFile f = strata::keras::read_weights_file(file.string());
  uint32_t crc = 0;
  for (const strata::keras::NamedTensor& t : f.model) {
    crc = strata::crc32c::extend(
        crc, std::string_view(static_cast<const char*>(t.value.raw_data()), t.value.size_bytes()));
  }
  char hex[16];
  std::snprintf(hex, sizeof(hex), "%08x", crc);
  return hex;
}

TEST(MultiWorkerCheckpoint, OnlyTheChiefsFilesAppearAndWorkerTempDirsAreRemoved) {
  TempDir dir;
  const Result run =
      launch("--dir " + fs::path(dir.str()).string() + " --scenario checkpoint --epochs 3");
  ASSERT_EQ(run.status, 0) << run.output;
  // ModelCheckpoint's files (3 epochs; every 5 of 16 batches), no
  // workertemp_1 (its marker was removed with it), no temporaries.
  EXPECT_EQ(names_in(fs::path(dir.str()) / "ckpt"),
            (std::set<std::string>{"model-latest.keras", "weights-01.weights", "weights-02.weights",
                                   "weights-03.weights"}))
      << run.output;
  EXPECT_EQ(names_in(fs::path(dir.str())), (std::set<std::string>{"ckpt", "final.weights"}));
  // Both workers hold the same weights, and the chief's file holds them.
  const std::string crc0 = printed(run, 0, "weights-crc");
  ASSERT_FALSE(crc0.empty()) << run.output;
  EXPECT_EQ(printed(run, 1, "weights-crc"), crc0) << run.output;
  EXPECT_EQ(crc_of_file_weights(fs::path(dir.str()) / "final.weights"), crc0);
  EXPECT_EQ(crc_of_file_weights(fs::path(dir.str()) / "ckpt" / "weights-03.weights"), crc0);
  // save() stored the optimizer's variables too (SGD momentum: iterations + 4 slots).
  EXPECT_EQ(strata::keras::read_weights_file(
                (fs::path(dir.str()) / "ckpt" / "model-latest.keras").string())
                .optimizer.size(),
            5u);
}

TEST(MultiWorkerCheckpoint, BackupAndRestoreResumesAfterAKilledWorkerWithTheSameWeights) {
  TempDir reference, resumed;
  const std::string epochs = " --scenario backup --epochs 4";
  // An uninterrupted run.
  const Result whole = launch("--dir " + fs::path(reference.str()).string() + epochs);
  ASSERT_EQ(whole.status, 0) << whole.output;
  const std::string expected = printed(whole, 0, "weights-crc");
  ASSERT_FALSE(expected.empty()) << whole.output;
  EXPECT_EQ(printed(whole, 1, "weights-crc"), expected);
  EXPECT_EQ(printed(whole, 0, "epochs-run"), "0,1,2,3");
  EXPECT_EQ(printed(whole, 0, "resumed-at"), "none");
  // A successful fit deletes the backup (the chief's directory); no worker left a temp dir.
  EXPECT_TRUE(names_in(fs::path(reference.str()) / "backup").empty()) << whole.output;

  // Worker 1 is SIGKILLed after batch 5 of epoch 2: backups of epochs 0 and 1 exist.
  const Result killed = launch("--dir " + fs::path(resumed.str()).string() + epochs +
                               " --kill-worker 1 --kill-at 2:5");
  ASSERT_NE(killed.status, 0) << killed.output;
  ASSERT_NE(killed.output.find("[worker:1] killing myself (SIGKILL) after batch 5 of epoch 2"),
            std::string::npos)
      << killed.output;
  EXPECT_EQ(names_in(fs::path(resumed.str())), (std::set<std::string>{"backup"})) << killed.output;
  EXPECT_EQ(names_in(fs::path(resumed.str()) / "backup"), (std::set<std::string>{"chief"}));
  const fs::path backup_file =
      fs::path(resumed.str()) / "backup" / "chief" / "training_state.weights";
  EXPECT_EQ(names_in(backup_file.parent_path()), (std::set<std::string>{"training_state.weights"}));
  EXPECT_EQ(strata::keras::read_weights_file(backup_file.string()).metadata.at("epoch"), "2");

  // Both restart: they resume at epoch 2 and finish equal to the uninterrupted run.
  const Result again = launch("--dir " + fs::path(resumed.str()).string() + epochs);
  ASSERT_EQ(again.status, 0) << again.output;
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(printed(again, w, "resumed-at"), "2") << again.output;
    EXPECT_EQ(printed(again, w, "epochs-run"), "2,3") << again.output;
    EXPECT_EQ(printed(again, w, "weights-crc"), expected) << again.output;
  }
  EXPECT_EQ(crc_of_file_weights(fs::path(resumed.str()) / "final.weights"), expected);
  // Bit for bit: every tensor of the two final files.
  const auto a =
      strata::keras::read_weights_file((fs::path(reference.str()) / "final.weights").string());
  const auto b =
      strata::keras::read_weights_file((fs::path(resumed.str()) / "final.weights").string());
  ASSERT_EQ(a.model.size(), b.model.size());
  for (size_t i = 0; i < a.model.size(); ++i) {
    ASSERT_EQ(a.model[i].value.size_bytes(), b.model[i].value.size_bytes());
    EXPECT_EQ(std::memcmp(a.model[i].value.raw_data(), b.model[i].value.raw_data(),
                          a.model[i].value.size_bytes()),
              0)
        << a.model[i].name;
  }
  EXPECT_TRUE(names_in(fs::path(resumed.str()) / "backup").empty()) << again.output;

  // save_freq = 6 batches (counted across epochs, 16 per epoch): the last
  // backup before worker 1 dies after batch 11 of epoch 2 follows global batch
  // 42 = batch 9 of epoch 2, so both restarted workers resume at its batch 10
  // and still end equal to the uninterrupted run.
  TempDir batches;
  const std::string every6 = epochs + " --save-freq 6";
  const Result killed6 = launch("--dir " + fs::path(batches.str()).string() + every6 +
                                " --kill-worker 1 --kill-at 2:11");
  ASSERT_NE(killed6.status, 0) << killed6.output;
  const auto meta =
      strata::keras::read_weights_file(
          (fs::path(batches.str()) / "backup" / "chief" / "training_state.weights").string())
          .metadata;
  EXPECT_EQ(meta.at("epoch"), "2");
  EXPECT_EQ(meta.at("batch"), "9");
  const Result again6 = launch("--dir " + fs::path(batches.str()).string() + every6);
  ASSERT_EQ(again6.status, 0) << again6.output;
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(printed(again6, w, "resumed-at"), "2") << again6.output;
    EXPECT_EQ(printed(again6, w, "resumed-step"), "10") << again6.output;
    EXPECT_EQ(printed(again6, w, "epochs-run"), "2,3") << again6.output;
    EXPECT_EQ(printed(again6, w, "weights-crc"), expected) << again6.output;
  }
  EXPECT_TRUE(names_in(fs::path(batches.str()) / "backup").empty()) << again6.output;
}

}  // namespace
