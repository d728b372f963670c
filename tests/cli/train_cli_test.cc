// End-to-end tests of `strata train` and `strata bench`: they run the real
// binary on a small synthetic Fashion-MNIST-shaped dataset (hermetic and fast)
// and, once, on the installed Debian dataset with --limit-examples.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "strata/cluster/socket.h"
#include "strata/core/tensor.h"
#include "strata/train/checkpoint_manager.h"
#include "strata/train/checkpoint_reader.h"

namespace {

using namespace strata_cli_test;  // NOLINT: test helpers

namespace fs = std::filesystem;

// n 28x28 images whose class k lights a 7x7 block at its own place of a 4x3
// grid, over uniform noise: easily separable, so a short run must learn it.
void write_split(const std::string& dir, const std::string& prefix, uint32_t n, uint32_t seed) {
  std::vector<uint8_t> images(size_t{n} * 784), labels(n);
  uint32_t state = seed;
  auto next = [&state] { return state = state * 1664525u + 1013904223u; };
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t k = static_cast<uint8_t>(next() >> 16) % 10;
    labels[i] = k;
    for (int p = 0; p < 784; ++p)
      images[size_t{i} * 784 + p] = static_cast<uint8_t>((next() >> 24) % 64);
    const int r0 = (k / 4) * 7 + 3, c0 = (k % 4) * 7;
    for (int r = r0; r < r0 + 7; ++r) {
      for (int c = c0; c < c0 + 7; ++c) images[size_t{i} * 784 + r * 28 + c] = 230;
    }
  }
  write_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz", {n, 28, 28}, images);
  write_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", {n}, labels);
}

// Runs `strata` with `args`, its output discarded, kills it with SIGKILL after
// `delay` and reaps it. True when the kill ended it, false when it had ended
// by itself (or could not be started).
bool killed_after(const std::vector<std::string>& args, std::chrono::milliseconds delay) {
  std::vector<const char*> argv = {STRATA_CLI_PATH};
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  EXPECT_GE(pid, 0) << "fork failed";
  if (pid < 0) return false;
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    ::execv(STRATA_CLI_PATH, const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  std::this_thread::sleep_for(delay);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status);
}

class Train : public ::testing::Test {
 protected:
  void SetUp() override {
    write_split(data_.str(), "train", 512, 1);
    write_split(data_.str(), "t10k", 128, 2);
  }
  // The common flags of a short run on the synthetic data.
  // --epochs 2 unless `extra` gives its own.
  std::string quick(const std::string& extra) const {
    const bool epochs = extra.find("--epochs") != std::string::npos;
    return "train --data-dir " + data_.str() + (epochs ? "" : " --epochs 2") + " --batch-size 32 " +
           extra;
  }
  // `strata launch` of 2 workers of 2 devices each, every one running quick(extra).
  std::string launch_two_workers(const std::string& extra) const {
    return "launch --nproc 2 --devices-per-worker 2 -- " + std::string(STRATA_CLI_PATH) + " " +
           quick(extra);
  }
  nlohmann::json run_json(const std::string& extra) {
    Result r = run(quick(extra + " --json"), /*merge_stderr=*/false);
    EXPECT_EQ(r.status, 0) << r.output;
    // Exactly one line on stdout.
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    return nlohmann::json::parse(r.output);
  }
  TempDir data_;
};

TEST_F(Train, DefaultStrategyLearnsAndPrintsStrategyProgressAndSummary) {
  Result r = run(quick("--strategy default"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("strategy: default (no distribution), 1 replica on 1 device"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("512 training, 128 test examples"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Epoch 1/2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Epoch 2/2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Total params: 535,818"), std::string::npos) << r.output;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.output, m, std::regex("test accuracy ([0-9.]+), test loss ([0-9.]+)")))
      << r.output;
  EXPECT_GE(std::stod(m[1]), 0.9) << r.output;
  EXPECT_NE(r.output.find("trained 2 epochs (1024 examples)"), std::string::npos) << r.output;
}

TEST_F(Train, JsonIsOneLineOfFinalMetrics) {
  nlohmann::json j = run_json("--strategy one_device");
  EXPECT_EQ(j.at("strategy"), "one_device");
  EXPECT_EQ(j.at("replicas"), 1);
  EXPECT_EQ(j.at("epochs"), 2);
  EXPECT_EQ(j.at("train_examples"), 1024);
  EXPECT_GE(j.at("test_accuracy").get<double>(), 0.9) << j;
  EXPECT_GT(j.at("test_loss").get<double>(), 0.0);
  EXPECT_GT(j.at("examples_per_second").get<double>(), 0.0);
  EXPECT_GE(j.at("wall_time_s").get<double>(), j.at("train_time_s").get<double>());
  EXPECT_EQ(j.at("interrupted"), false);
}

// The CNN end to end under MirroredStrategy for a few steps: the final metrics
// are sane numbers (a few steps do not have to learn the data).
TEST_F(Train, CnnTrainsAFewStepsWithSaneFinalMetrics) {
  nlohmann::json j = run_json(
      "--model cnn --strategy mirrored --devices 2 --epochs 1 --steps-per-epoch 4 "
      "--limit-examples 200");
  EXPECT_EQ(j.at("model"), "cnn");
  EXPECT_EQ(j.at("replicas"), 2);
  EXPECT_EQ(j.at("epochs"), 1);
  EXPECT_EQ(j.at("train_examples"), 4 * 32) << j;  // 4 steps of the global batch
  const double loss = j.at("test_loss").get<double>();
  EXPECT_TRUE(std::isfinite(loss)) << j;
  EXPECT_GT(loss, 0.0) << j;
  const double accuracy = j.at("test_accuracy").get<double>();
  EXPECT_GE(accuracy, 0.0) << j;
  EXPECT_LE(accuracy, 1.0) << j;
  const double rate = j.at("examples_per_second").get<double>();
  EXPECT_TRUE(std::isfinite(rate)) << j;
  EXPECT_GT(rate, 0.0) << j;
  EXPECT_GT(j.at("train_time_s").get<double>(), 0.0) << j;
  EXPECT_EQ(j.at("interrupted"), false);
}

TEST_F(Train, MirroredSplitsTheBatchOverTheLogicalDevices) {
  Result r = run(quick("--strategy mirrored --devices 2"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("strategy: MirroredStrategy, 2 replicas on 2 devices"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("/device:CPU:1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("global batch 32 (16 per replica)"), std::string::npos) << r.output;
  nlohmann::json j = run_json("--strategy mirrored --devices 2");
  EXPECT_EQ(j.at("replicas"), 2);
  EXPECT_GE(j.at("test_accuracy").get<double>(), 0.9) << j;
}

TEST_F(Train, TpuStrategyRunsOnTheLocalMeshWithADeviceAssignment) {
  nlohmann::json plain = run_json("--strategy tpu --tpu-topology 1x1x1x2");
  EXPECT_EQ(plain.at("replicas"), 2);
  EXPECT_GE(plain.at("test_accuracy").get<double>(), 0.9) << plain;
  // Two cores per replica on a 2x1x1x2 mesh: 2 replicas.
  Result r = run(
      quick("--strategy tpu --tpu-topology 2x1x1x2 --computation-shape 1,1,1,2 --num-replicas 2"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("strategy: TPUStrategy, 2 replicas"), std::string::npos) << r.output;
}

// --deterministic (CommunicationOptions.deterministic_reduction): the MLP and
// the CNN of `strata train` give the same bytes of final weights on 1, 2, 4
// and 8 replicas in one process and on 2 launched workers of 2 replicas each,
// for the same global batch and seed. Without the flag the replica counts
// give other weights (the default all-reduce sums in another order), so the
// comparison can fail.
TEST_F(Train, DeterministicReductionGivesTheSameWeightsForAnyReplicaCount) {
  TempDir out;
  for (const std::string model : {"mlp", "cnn"}) {
    SCOPED_TRACE(model);
    const std::string flags = "--model " + model +
                              " --epochs 1 --steps-per-epoch 3 --limit-examples 256 --json "
                              "--deterministic --save-weights ";
    std::map<std::string, std::string> weights;  // run -> bytes
    for (int replicas : {1, 2, 4, 8}) {
      const std::string path = out.str() + "/" + model + std::to_string(replicas);
      std::string args = "--strategy mirrored --devices " + std::to_string(replicas) + " ";
      args += flags;
      args += path;
      Result r = run(quick(args), /*merge_stderr=*/false);
      ASSERT_EQ(r.status, 0) << r.output;
      weights[std::to_string(replicas) + " replicas"] = read_file(path);
    }
    const std::string launched = out.str() + "/" + model + "_2x2";
    std::string worker_args = "--strategy multi_worker " + flags;
    worker_args += launched;
    Result r = run(launch_two_workers(worker_args));
    ASSERT_EQ(r.status, 0) << r.output;
    weights["2 workers x 2 replicas"] = read_file(launched);
    const std::string& one = weights.at("1 replicas");
    ASSERT_GT(one.size(), 1000u);
    for (const auto& [run_name, bytes] : weights) {
      EXPECT_TRUE(bytes == one) << run_name << " gave other weights than 1 replica";
    }
  }
  // The default reduction: 1 and 2 replicas differ in the last bits.
  std::vector<std::string> plain;
  for (int replicas : {1, 2}) {
    const std::string path = out.str() + "/plain" + std::to_string(replicas);
    Result r = run(quick("--strategy mirrored --devices " + std::to_string(replicas) +
                         " --epochs 1 --steps-per-epoch 3 --limit-examples 256 --json "
                         "--save-weights " +
                         path),
                   /*merge_stderr=*/false);
    ASSERT_EQ(r.status, 0) << r.output;
    plain.push_back(read_file(path));
  }
  EXPECT_NE(plain[0], plain[1]) << "the default path happened to agree; the test above proves "
                                   "nothing about the reduction order";
}

// --shared-memory (CommunicationOptions.shared_memory): 2 launched workers on
// this host, 2 replicas each, train the MLP to the same bytes of final weights
// over shared memory (the default here, since both workers share the host) and
// over Gloo's TCP (off). Both sum the two workers' gradients in the same
// order (worker 0's, then worker 1's; the in-process part is the same code),
// and a sum of two floats does not depend on the order anyway. Each worker
// logs which transport it uses.
TEST_F(Train, TwoWorkersGiveTheSameWeightsOverSharedMemoryAsOverGloo) {
  TempDir out;
  std::map<std::string, std::string> weights;  // --shared-memory -> bytes
  for (const std::string mode : {"auto", "off"}) {
    const std::string path = out.str() + "/weights_" + mode;
    std::string args =
        "--strategy multi_worker --epochs 1 --steps-per-epoch 4 --limit-examples 512 --json "
        "--shared-memory ";
    args += mode;
    args += " --save-weights ";
    args += path;
    Result r = run(launch_two_workers(args));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find(mode == "auto" ? "collectives across workers: shared memory "
                                             "(shared_memory)"
                                           : "collectives across workers: Gloo over TCP (gloo)"),
              std::string::npos)
        << r.output;
    weights[mode] = read_file(path);
  }
  ASSERT_GT(weights["auto"].size(), 1000u);
  EXPECT_TRUE(weights["auto"] == weights["off"]) << "shared memory and Gloo gave other weights";
}

// --overlap-gradient-reduction (CommunicationOptions.overlap_gradient_reduction):
// 2 launched workers x 2 replicas train the MLP and the CNN to the same bytes
// of final weights with the gradients' all-reduce overlapped with the
// backward pass as without: the bucket sums are the same two-term sums
// (each replica's, then each worker's) the all-reduce after the pass makes.
TEST_F(Train, TwoWorkersGiveTheSameWeightsWithTheAllReduceOverlappedWithTheBackwardPass) {
  TempDir out;
  for (const std::string model : {"mlp", "cnn"}) {
    std::map<std::string, std::string> weights;  // --overlap-gradient-reduction -> bytes
    for (const std::string mode : {"off", "on"}) {
      std::string path = out.str();
      path += "/" + model;
      path += "_" + mode;
      std::string args = "--strategy multi_worker --model " + model +
                         " --epochs 1 --steps-per-epoch 4 --limit-examples 512 --json "
                         "--overlap-gradient-reduction ";
      args += mode;
      args += " --save-weights ";
      args += path;
      Result r = run(launch_two_workers(args));
      ASSERT_EQ(r.status, 0) << r.output;
      EXPECT_EQ(
          r.output.find("gradients are all-reduced during the backward pass") != std::string::npos,
          mode == "on")
          << r.output;
      if (mode == "on") {
        // fit's apply_gradients took the sums of every step's buckets: 2
        // replicas x 4 steps per worker, 2 buckets per backward pass (256 KiB:
        // the MLP's last two kernels, then its first; the CNN's Dense
        // kernels, then the rest).
        EXPECT_NE(r.output.find("16 gradient buckets all-reduced during backward passes; 8 "
                                "all-reduces took their sums, 0 backward passes' sums went unused"),
                  std::string::npos)
            << r.output;
      }
      weights[mode] = read_file(path);
    }
    ASSERT_GT(weights["off"].size(), 1000u) << model;
    EXPECT_TRUE(weights["on"] == weights["off"])
        << model << ": the overlapped all-reduce gave other weights";
  }
}

// --check-divergence-every: a clean run passes every check; the option is
// refused where there are no mirrored copies.
TEST_F(Train, DivergenceCheckPassesOnACleanRunAndNeedsAMirroredStrategy) {
  nlohmann::json j = run_json(
      "--strategy mirrored --devices 2 --epochs 1 --steps-per-epoch 4 --check-divergence-every 1");
  EXPECT_EQ(j.at("replicas"), 2);
  Result bad = run(quick("--strategy default --check-divergence-every 1"));
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("--strategy mirrored or multi_worker"), std::string::npos)
      << bad.output;
  Result odd = run("train --data-dir " + data_.str() +
                   " --strategy mirrored --devices 2 --deterministic --batch-size 36");
  EXPECT_NE(odd.status, 0);
  EXPECT_NE(odd.output.find("--batch-size must be a multiple of 8, got 36"), std::string::npos)
      << odd.output;
}

TEST_F(Train, MultiWorkerTrainsTheSameModelInTwoLaunchedProcesses) {
  TempDir logs, ckpt;
  Result r = run("launch --nproc 2 -- " + std::string(STRATA_CLI_PATH) + " " +
                 quick("--strategy multi_worker --json --limit-examples 500 --log-dir " +
                       logs.str() + " --checkpoint-dir " + ckpt.str()));
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<nlohmann::json> lines;
  for (int w = 0; w < 2; ++w) {
    const std::string prefix = "[worker:" + std::to_string(w) + "] {";
    const size_t at = r.output.find(prefix);
    ASSERT_NE(at, std::string::npos) << r.output;
    const size_t begin = at + prefix.size() - 1;
    lines.push_back(
        nlohmann::json::parse(r.output.substr(begin, r.output.find('\n', begin) - begin)));
  }
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(lines[w].at("task"), "worker:" + std::to_string(w)) << lines[w];
    EXPECT_EQ(lines[w].at("replicas"), 2) << lines[w];  // one device per worker
    EXPECT_EQ(lines[w].at("chief"), w == 0) << lines[w];
    // 500 examples: 15 global batches of 32 and a partial one of 20, split across the workers.
    EXPECT_EQ(lines[w].at("train_examples"), 2 * 500) << lines[w];
    EXPECT_GE(lines[w].at("test_accuracy").get<double>(), 0.9) << lines[w];
  }
  // Synchronous training: both workers end with the same model, so the same (global) evaluation.
  EXPECT_EQ(lines[0].at("test_accuracy"), lines[1].at("test_accuracy"));
  EXPECT_EQ(lines[0].at("test_loss"), lines[1].at("test_loss"));
  // Only the chief writes the logs.
  EXPECT_TRUE(lines[0].contains("log_dir"));
  EXPECT_FALSE(lines[1].contains("log_dir"));
  const std::string csv = read_file(logs / "metrics.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;  // header + 2 epochs
  // Only the chief's checkpoints stay: the other worker's workertemp_1/ is gone.
  EXPECT_EQ(lines[0].at("checkpoint"), (ckpt / "ckpt-2")) << lines[0];
  EXPECT_FALSE(lines[1].contains("checkpoint")) << lines[1];
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(ckpt.str())) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"checkpoint", "ckpt-1", "ckpt-2"}));
}

// --profile under two launched workers: every worker's JSON line carries the
// whole report (both workers, every phase); only the chief writes
// step_profile.json and the TensorBoard run "profile". Human output prints
// the table.
TEST_F(Train, ProfileReportsEveryWorkersPhasesAndTheChiefWritesThem) {
  TempDir logs;
  Result r = run("launch --nproc 2 -- " + std::string(STRATA_CLI_PATH) + " " +
                 quick("--strategy multi_worker --json --epochs 1 --limit-examples 256 --profile "
                       "--log-dir " +
                       logs.str()));
  ASSERT_EQ(r.status, 0) << r.output;
  for (int w = 0; w < 2; ++w) {
    const std::string prefix = "[worker:" + std::to_string(w) + "] {";
    const size_t at = r.output.find(prefix);
    ASSERT_NE(at, std::string::npos) << r.output;
    const size_t begin = at + prefix.size() - 1;
    const nlohmann::json line =
        nlohmann::json::parse(r.output.substr(begin, r.output.find('\n', begin) - begin));
    const nlohmann::json& p = line.at("step_profile");
    EXPECT_EQ(p.at("num_workers"), 2) << p;
    EXPECT_EQ(p.at("steps"), 8) << p;  // 256 examples, global batch 32
    ASSERT_EQ(p.at("replicas").size(), 2u) << p;
    for (const nlohmann::json& replica : p.at("replicas")) {
      for (const char* phase : {"input", "forward", "gradient", "apply", "collective_transfer"})
        EXPECT_GT(replica.at("seconds").at(phase).get<double>(), 0) << phase << " " << p;
    }
    EXPECT_EQ(line.contains("step_profile_json"), w == 0) << line;
  }
  const nlohmann::json written = nlohmann::json::parse(read_file(logs / "step_profile.json"));
  EXPECT_EQ(written.at("workers").size(), 2u) << written;
  bool event_file = false;
  for (const auto& e : fs::directory_iterator(logs / "profile"))
    event_file |= e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  EXPECT_TRUE(event_file);

  Result human = run(quick("--strategy mirrored --devices 2 --epochs 1 --profile --profile-json " +
                           (logs / "mirrored.json")));
  ASSERT_EQ(human.status, 0) << human.output;
  EXPECT_NE(human.output.find("Step profile: 16 steps"), std::string::npos) << human.output;
  EXPECT_NE(human.output.find("step profile: " + (logs / "mirrored.json")), std::string::npos)
      << human.output;
}

TEST_F(Train, ResumesFromTheCheckpointDir) {
  TempDir ckpt;
  nlohmann::json first = run_json("--epochs 1 --strategy default --checkpoint-dir " + ckpt.str());
  EXPECT_FALSE(first.contains("resumed_from_epoch")) << first;
  ASSERT_TRUE(fs::exists(first.at("checkpoint").get<std::string>())) << first;
  Result r = run(quick("--strategy default --checkpoint-dir " + ckpt.str() + " --epochs 3"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from the checkpoint after epoch 1"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("Epoch 1/3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Epoch 2/3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("trained 2 epochs"), std::string::npos) << r.output;
  // A finished run trains nothing more and reports the checkpoint's accuracy.
  nlohmann::json done =
      run_json("--strategy default --checkpoint-dir " + ckpt.str() + " --epochs 3");
  EXPECT_EQ(done.at("resumed_from_epoch"), 3);
  EXPECT_EQ(done.at("epochs_this_run"), 0);
  EXPECT_GE(done.at("test_accuracy").get<double>(), 0.9) << done;
}

TEST_F(Train, LogDirHoldsTensorBoardEventsAndMetricsCsv) {
  TempDir logs;
  Result r = run(quick("--strategy default --log-dir " + logs.str()));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string csv = read_file(logs / "metrics.csv");
  EXPECT_EQ(csv.rfind("epoch,", 0), 0u) << csv;
  EXPECT_NE(csv.find("val_accuracy"), std::string::npos) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;  // header + 2 epochs
  for (const char* run_name : {"train", "validation"}) {
    int events = 0;
    for (const auto& e : fs::directory_iterator(logs / run_name)) {
      if (e.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
      ++events;
      // A valid TFRecord file: the file_version Event, then one Event per
      // epoch with Keras's scalar tags.
      Result verify = run("tfrecord verify " + e.path().string());
      EXPECT_EQ(verify.status, 0) << verify.output;
      EXPECT_NE(verify.output.find(": 3 records"), std::string::npos) << verify.output;
      const std::string bytes = read_file(e.path().string());
      EXPECT_NE(bytes.find("epoch_loss"), std::string::npos) << run_name;
      EXPECT_NE(bytes.find("epoch_accuracy"), std::string::npos) << run_name;
    }
    EXPECT_EQ(events, 1) << run_name;
  }
}

// metrics.csv as columns: name -> one value per epoch.
std::map<std::string, std::vector<double>> read_csv_columns(const std::string& path) {
  // CSVLogger ends rows with "\r\n", as Python's csv module does.
  std::istringstream in(replace_all(read_file(path), "\r\n", "\n"));
  std::string line;
  std::getline(in, line);
  std::vector<std::string> names;
  std::istringstream header(line);
  for (std::string name; std::getline(header, name, ',');) names.push_back(name);
  std::map<std::string, std::vector<double>> columns;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string cell;
    for (size_t i = 0; i < names.size() && std::getline(row, cell, ','); ++i)
      columns[names[i]].push_back(std::stod(cell));
  }
  return columns;
}

// A mark PLplot's SVG driver draws at a data point: a "•" glyph (U+2022) in the
// series' colour, placed by its text transform.
struct Mark {
  std::string color;
  double x, y;
};

std::vector<Mark> svg_marks(const std::string& svg) {
  static const std::regex mark(
      "<text[^>]*fill=\"(#[0-9A-F]{6})\"[^>]*transform=\"matrix\\(1\\.0+ 0\\.0+ 0\\.0+ -1\\.0+ "
      "([-0-9.]+) ([-0-9.]+)\\)\"[^>]*>\\s*<tspan[^>]*>&#x2022;</tspan>");
  std::vector<Mark> marks;
  for (std::sregex_iterator it(svg.begin(), svg.end(), mark), end; it != end; ++it)
    marks.push_back({(*it)[1], std::stod((*it)[2]), std::stod((*it)[3])});
  return marks;
}

// The texts of the SVG (PLplot writes every character as an entity).
std::string svg_text(const std::string& svg) {
  static const std::regex entity("&#x([0-9a-f]+);");
  std::string text;
  for (std::sregex_iterator it(svg.begin(), svg.end(), entity), end; it != end; ++it)
    text += static_cast<char>(
        std::stoi((*it)[1], nullptr, 16) < 128 ? std::stoi((*it)[1], nullptr, 16) : '*');
  return text;
}

// The loss and accuracy panels of --plot's SVG hold, per series (train blue,
// validation orange), one mark per epoch at the value metrics.csv logged: all
// four series of a panel on one affine scale, x evenly spaced by epoch.
TEST_F(Train, PlotSvgDrawsEverySeriesWithTheLoggedValues) {
  TempDir out;
  const int epochs = 4;
  // A small learning rate so that every series still changes from epoch to epoch.
  nlohmann::json j = run_json(
      "--strategy default --epochs 4 --optimizer sgd --learning-rate 0.002 "
      "--plot " +
      (out / "curves.svg") + " --log-dir " + out.str());
  ASSERT_EQ(j.at("plot"), out / "curves.svg") << j;
  const auto csv = read_csv_columns(out / "metrics.csv");
  const std::string svg = read_file(out / "curves.svg");
  ASSERT_NE(svg.find("</svg>"), std::string::npos);
  const std::string text = svg_text(svg);
  for (const char* label : {"loss", "accuracy", "epoch", "train", "validation"})
    EXPECT_NE(text.find(label), std::string::npos) << label << " in " << text;
  std::vector<Mark> marks = svg_marks(svg);
  ASSERT_EQ(marks.size(), 4u * epochs) << svg.substr(0, 2000);
  // Drawing order: loss (train, validation), then accuracy (train, validation).
  const std::array<std::pair<const char*, const char*>, 4> series = {{{"loss", "#1F77B4"},
                                                                      {"val_loss", "#FF7F0E"},
                                                                      {"accuracy", "#1F77B4"},
                                                                      {"val_accuracy", "#FF7F0E"}}};
  for (int panel = 0; panel < 2; ++panel) {
    std::vector<double> values, ys;
    for (int k = 2 * panel; k < 2 * panel + 2; ++k) {
      const std::vector<double>& logged = csv.at(series[k].first);
      ASSERT_EQ(logged.size(), static_cast<size_t>(epochs)) << series[k].first;
      for (int e = 0; e < epochs; ++e) {
        const Mark& m = marks[k * epochs + e];
        EXPECT_EQ(m.color, series[k].second) << series[k].first << " epoch " << e;
        // One mark per epoch, at the same x in both series, evenly spaced.
        const Mark& first = marks[2 * panel * epochs];
        const double step = marks[2 * panel * epochs + 1].x - first.x;
        EXPECT_GT(step, 10.0);
        EXPECT_NEAR(m.x, first.x + e * step, 0.1) << series[k].first << " epoch " << e;
        values.push_back(logged[e]);
        ys.push_back(m.y);
      }
    }
    // y = a * value + b for every mark of the panel (least squares, then the residuals).
    const double n = static_cast<double>(values.size());
    double sv = 0, sy = 0, svv = 0, svy = 0;
    for (size_t i = 0; i < values.size(); ++i)
      sv += values[i], sy += ys[i], svv += values[i] * values[i], svy += values[i] * ys[i];
    const double spread = svv - sv * sv / n;
    ASSERT_GT(spread, 1e-4) << "the logged values hardly change; the check needs a spread";
    const double a = (svy - sv * sy / n) / spread, b = (sy - a * sv) / n;
    EXPECT_GT(a, 0) << "higher values must be drawn higher";
    // The panel's axes span the values (with a margin): the curves fill most of its 450 px.
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    EXPECT_GT(a * (*hi - *lo), 150.0) << "panel " << panel;
    // PLplot places points on its integer device grid (off by up to ~0.02 px here).
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_NEAR(ys[i], a * values[i] + b, 0.15) << "panel " << panel << " mark " << i;
  }
  // The last validation point is the final evaluation --json reports (the test set validates).
  EXPECT_NEAR(csv.at("val_accuracy").back(), j.at("test_accuracy").get<double>(), 1e-6);
  EXPECT_NEAR(csv.at("val_loss").back(), j.at("test_loss").get<double>(), 1e-5);
}

uint32_t big_endian(const std::string& bytes, size_t at) {
  return uint32_t{static_cast<uint8_t>(bytes[at])} << 24 |
         uint32_t{static_cast<uint8_t>(bytes[at + 1])} << 16 |
         uint32_t{static_cast<uint8_t>(bytes[at + 2])} << 8 | static_cast<uint8_t>(bytes[at + 3]);
}

// --plot's PNG: the signature, an IHDR of the page's 1100x450 pixels in 8-bit
// colour, image data, IEND last and nothing after it; the temporary file was renamed.
TEST_F(Train, PlotPngIsAWholeImageOfThePageSize) {
  TempDir out;
  Result r = run(quick("--strategy default --epochs 2 --plot " + (out / "curves.png")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("plot: " + (out / "curves.png")), std::string::npos) << r.output;
  const std::string p = read_file(out / "curves.png");
  ASSERT_GT(p.size(), 10000u);  // two panels of axes, labels, curves and legends
  ASSERT_EQ(p.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::vector<std::string> chunks;
  size_t at = 8, idat_bytes = 0;
  while (at + 12 <= p.size()) {
    const uint32_t length = big_endian(p, at);
    const std::string type = p.substr(at + 4, 4);
    chunks.push_back(type);
    if (type == "IHDR") {
      ASSERT_EQ(length, 13u);
      EXPECT_EQ(big_endian(p, at + 8), 1100u) << "width";
      EXPECT_EQ(big_endian(p, at + 12), 450u) << "height";
      EXPECT_EQ(static_cast<unsigned char>(p[at + 16]), 8) << "bit depth";
      const int color_type = static_cast<unsigned char>(p[at + 17]);
      EXPECT_TRUE(color_type == 2 || color_type == 6) << "colour type " << color_type;
    }
    if (type == "IDAT") idat_bytes += length;
    at += 12 + size_t{length};
  }
  EXPECT_EQ(at, p.size()) << "a chunk runs past the end, or bytes follow IEND";
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.front(), "IHDR");
  EXPECT_EQ(chunks.back(), "IEND");
  EXPECT_GT(idat_bytes, 5000u);
  EXPECT_EQ(std::distance(fs::directory_iterator(out.str()), fs::directory_iterator()), 1);
}

TEST_F(Train, TrainsFromTfrecordFilesWrittenByConvertIdx) {
  TempDir rec;
  ASSERT_EQ(run("tfrecord convert-idx " + (data_ / "train-images-idx3-ubyte.gz") + " " +
                (data_ / "train-labels-idx1-ubyte.gz") + " " + (rec / "train.tfrecord") +
                " --shards 2 --compression GZIP")
                .status,
            0);
  nlohmann::json j = run_json("--strategy default --tfrecord '" + (rec / "train.tfrecord-*") + "'");
  EXPECT_EQ(j.at("train_examples"), 1024);
  EXPECT_GE(j.at("test_accuracy").get<double>(), 0.9) << j;
  Result none = run(quick("--tfrecord " + (rec / "nothing-*")));
  EXPECT_EQ(none.status, 1) << none.output;
  EXPECT_NE(none.output.find("no files match"), std::string::npos) << none.output;
}

TEST_F(Train, CtrlCStopsAfterTheCurrentStepAndKeepsTheLastWholeEpoch) {
  TempDir ckpt, logs, plots;
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const std::string data_dir = data_.str(), ckpt_dir = ckpt.str(), log_dir = logs.str(),
                    plot = plots / "curves.svg";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    ::close(out[0]);
    ::execl(STRATA_CLI_PATH, STRATA_CLI_PATH, "train", "--strategy", "default", "--data-dir",
            data_dir.c_str(), "--epochs", "1000", "--batch-size", "8", "--checkpoint-dir",
            ckpt_dir.c_str(), "--log-dir", log_dir.c_str(), "--plot", plot.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  std::string output;
  char buf[512];
  // Interrupt during epoch 3: epochs 1 and 2 are complete.
  while (output.find("Epoch 3/1000") == std::string::npos) {
    const ssize_t n = ::read(out[0], buf, sizeof(buf));
    ASSERT_GT(n, 0) << output;
    output.append(buf, static_cast<size_t>(n));
  }
  ::kill(pid, SIGINT);
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof(buf))) > 0) output.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT) << output;
  EXPECT_NE(output.find("Ctrl-C: stopping after the current step"), std::string::npos) << output;
  // Usually epoch 3; a loaded machine may deliver the signal a little later.
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(output, m, std::regex("interrupted by Ctrl-C during epoch ([0-9]+)")))
      << output;
  const int epoch = std::stoi(m[1]);
  EXPECT_GE(epoch, 3) << output;
  // Nothing partial: metrics.csv has a row per whole epoch only, no plot was
  // drawn, and no temporary file is left beside the checkpoint.
  const auto rows = [&log_dir] {
    const std::string csv = read_file(log_dir + "/metrics.csv");
    return std::count(csv.begin(), csv.end(), '\n') - 1;  // less the header
  };
  EXPECT_EQ(rows(), epoch - 1) << read_file(log_dir + "/metrics.csv");
  EXPECT_FALSE(fs::exists(plot)) << output;
  EXPECT_TRUE(fs::is_empty(plots.str())) << output;
  for (const auto& e : fs::recursive_directory_iterator(ckpt_dir)) {
    EXPECT_EQ(e.path().filename().string().find("tmp"), std::string::npos) << e.path();
  }
  // The checkpoint holds the last whole epoch and is valid: the next run resumes there.
  const std::string total = std::to_string(epoch + 1);
  Result resumed = run("train --strategy default --data-dir " + data_dir + " --epochs " + total +
                       " --batch-size 8 --checkpoint-dir " + ckpt_dir + " --log-dir " + log_dir);
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(
      resumed.output.find("resumed from the checkpoint after epoch " + std::to_string(epoch - 1)),
      std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("Epoch " + std::to_string(epoch) + "/" + total), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("trained 2 epochs"), std::string::npos) << resumed.output;
  // The resumed run appends the redone epoch and the next one: one row per epoch.
  EXPECT_EQ(rows(), epoch + 1) << read_file(log_dir + "/metrics.csv");
}

// The epochs of metrics.csv's rows, in file order (the header left out).
std::vector<int> csv_epochs(const std::string& path) {
  std::vector<int> epochs;
  std::istringstream lines(read_file(path));
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    if (!line.empty()) epochs.push_back(std::stoi(line.substr(0, line.find(','))));
  }
  return epochs;
}

// A crash after an epoch's log row was written but before its backup: the
// resumed run redoes that epoch, and its row must replace the earlier one.
TEST_F(Train, AResumedRunLogsEveryEpochExactlyOnce) {
  TempDir ckpt, logs;
  const std::string common =
      "--strategy default --checkpoint-dir " + ckpt.str() + " --log-dir " + logs.str();
  ASSERT_EQ(run(quick(common + " --epochs 2")).status, 0);
  EXPECT_EQ(csv_epochs(logs / "metrics.csv"), (std::vector<int>{0, 1}));
  // The state such a crash leaves: a row for epoch 2 (0-based), the backup after epoch 2 of 3.
  {
    std::ofstream csv(logs / "metrics.csv", std::ios::app);
    csv << "2,0.5,0.5,0.5,0.5\r\n";
  }
  Result r = run(quick(common + " --epochs 3"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from the checkpoint after epoch 2"), std::string::npos)
      << r.output;
  EXPECT_EQ(csv_epochs(logs / "metrics.csv"), (std::vector<int>{0, 1, 2}))
      << read_file(logs / "metrics.csv");
  EXPECT_EQ(read_file(logs / "metrics.csv").find("2,0.5,0.5,0.5,0.5"), std::string::npos);
}

// Runs killed (SIGKILL) at seeded moments, then one run to the end: the
// backup and the logs stay in step, so metrics.csv ends with every epoch
// exactly once, and no temporary file of an interrupted write is left.
TEST_F(Train, RunsKilledAtAnyMomentAndResumedLogEveryEpochExactlyOnce) {
  TempDir ckpt, logs;
  constexpr int kEpochs = 40;  // about 20 ms each: no run finishes before its kill
  constexpr int kKills = 8;
  const std::string data_dir = data_.str(), ckpt_dir = ckpt.str(), log_dir = logs.str();
  const std::string epochs = std::to_string(kEpochs);
  uint32_t state = 12345;
  int killed = 0;
  for (int k = 0; k < kKills; ++k) {
    // A kill 60-300 ms in: start-up, or the middle of some epoch, or its end.
    state = state * 1664525u + 1013904223u;
    const std::vector<std::string> args = {"train",  "--strategy",       "default", "--data-dir",
                                           data_dir, "--epochs",         epochs,    "--batch-size",
                                           "32",     "--checkpoint-dir", ckpt_dir,  "--log-dir",
                                           log_dir};
    if (killed_after(args, std::chrono::milliseconds(60 + (state >> 16) % 240))) ++killed;
  }
  std::printf("%d of %d runs killed\n", killed, kKills);
  EXPECT_GE(killed, kKills / 2);
  Result last = run("train --strategy default --data-dir " + data_dir + " --epochs " + epochs +
                    " --batch-size 32 --checkpoint-dir " + ckpt_dir + " --log-dir " + log_dir);
  ASSERT_EQ(last.status, 0) << last.output;
  std::vector<int> all(kEpochs);
  for (int e = 0; e < kEpochs; ++e) all[e] = e;
  EXPECT_EQ(csv_epochs(logs / "metrics.csv"), all) << read_file(logs / "metrics.csv");
  for (const auto& e : fs::recursive_directory_iterator(log_dir)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
}

// Every tensor of the latest checkpoint in `dir`, by key, as its dtype, shape
// and raw bytes.
std::map<std::string, std::string> latest_checkpoint_values(const std::string& dir) {
  const std::optional<std::string> path = strata::train::latest_checkpoint(dir);
  if (!path) return {};
  const strata::train::CheckpointReader reader(*path);
  std::map<std::string, std::string> values;
  for (const auto& [key, shape] : reader.get_variable_to_shape_map()) {
    const strata::Tensor t = reader.get_tensor(key);
    values[key] = std::string(strata::dtype_name(t.dtype())) + shape.to_string() + ":" +
                  std::string(static_cast<const char*>(t.raw_data()), t.size_bytes());
  }
  return values;
}

// tf.train.CheckpointManager under `strata train --checkpoint-dir`: 20 runs,
// each SIGKILLed at a seeded moment of an uninterrupted run's duration (its
// start-up, a step, an epoch's checkpoint write), then resumed to the end,
// each end with a latest checkpoint equal, tensor for tensor and bit for bit,
// to the uninterrupted run's: weights, Adam's slots and iterations, the epoch
// and step counters and save_counter. --steps-per-epoch makes the epochs (and
// so the checkpoints) many and short.
TEST_F(Train, CheckpointDirRunsKilledAtRandomMomentsResumeToTheUninterruptedWeights) {
  const std::string data_dir = data_.str();
  const std::vector<std::string> flags = {
      "train", "--strategy",   "default", "--data-dir",        data_dir, "--epochs",
      "8",     "--batch-size", "16",      "--steps-per-epoch", "3",      "--limit-examples",
      "96",    "--json"};
  std::string common;
  for (size_t i = 0; i < flags.size(); ++i) common += (i > 0 ? " " : "") + flags[i];
  TempDir reference;
  const auto started = std::chrono::steady_clock::now();
  Result full = run(common + " --checkpoint-dir " + reference.str(), /*merge_stderr=*/false);
  const auto duration = std::chrono::steady_clock::now() - started;
  ASSERT_EQ(full.status, 0) << full.output;
  const std::map<std::string, std::string> expected = latest_checkpoint_values(reference.str());
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(expected.count("epoch/.ATTRIBUTES/VARIABLE_VALUE"), 1u);
  // Kills fall in the first three quarters of the reference run's time: a
  // run escapes its kill only when it is a third faster than the reference,
  // which a loaded machine's jitter alone does not make likely (kills over the
  // whole duration let 12 of 20 runs finish first under a load of 14).
  const int64_t kill_window_ms = std::max<int64_t>(
      20, std::chrono::duration_cast<std::chrono::milliseconds>(duration).count() * 3 / 4);

  constexpr int kTrials = 20;
  uint32_t state = 4242;
  int killed = 0, resumed_mid_run = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    TempDir ckpt;
    const std::string ckpt_dir = ckpt.str();
    std::vector<std::string> args = flags;
    args.push_back("--checkpoint-dir");
    args.push_back(ckpt_dir);
    state = state * 1664525u + 1013904223u;
    if (killed_after(args, std::chrono::milliseconds((state >> 8) % kill_window_ms))) ++killed;
    std::string resume_command = common;
    resume_command += " --checkpoint-dir ";
    resume_command += ckpt_dir;
    Result resumed = run(resume_command, /*merge_stderr=*/false);
    ASSERT_EQ(resumed.status, 0) << "trial " << trial << "\n" << resumed.output;
    const nlohmann::json j = nlohmann::json::parse(resumed.output);
    if (j.contains("resumed_from_epoch") && j.at("resumed_from_epoch").get<int>() > 0)
      ++resumed_mid_run;
    const std::map<std::string, std::string> got = latest_checkpoint_values(ckpt_dir);
    ASSERT_EQ(got.size(), expected.size()) << "trial " << trial;
    for (const auto& [key, value] : expected) {
      const auto it = got.find(key);
      ASSERT_NE(it, got.end()) << "trial " << trial << ": " << key;
      EXPECT_TRUE(it->second == value) << "trial " << trial << ": " << key << " differs";
    }
  }
  std::printf("%d of %d runs killed, %d resumed from a checkpoint of a later epoch than 0\n",
              killed, kTrials, resumed_mid_run);
  // The kills land inside the runs, and a good part of them after a checkpoint.
  EXPECT_GE(killed, kTrials / 2);
  EXPECT_GE(resumed_mid_run, kTrials / 4);
}

// A full disk at the end: --plot says so, naming ENOSPC, and the finished
// training still succeeds. The plot's folder is a 16 KiB tmpfs mounted in a
// private mount namespace (unshare), which needs user namespaces.
TEST_F(Train, AFullDiskUnderPlotIsReportedAndTheTrainingStillSucceeds) {
  if (run_shell("unshare -rm sh -c 'mount -t tmpfs -o size=16k tmpfs /tmp' 2>&1").status != 0)
    GTEST_SKIP() << "cannot mount a tmpfs in a user namespace here";
  TempDir small;
  const std::string plot = small / "curves.svg";
  Result r = run_shell("unshare -rm sh -c 'mount -t tmpfs -o size=16k tmpfs " + small.str() +
                           " && " + std::string(STRATA_CLI_PATH) + " " +
                           quick("--strategy default --json --plot " + plot) + "'",
                       /*merge_stderr=*/true);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("strata: warning: the plot was not written: RESOURCE_EXHAUSTED"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("No space left on device (ENOSPC)"), std::string::npos) << r.output;
  const size_t json_at = r.output.find("{\"");
  ASSERT_NE(json_at, std::string::npos) << r.output;
  const nlohmann::json j =
      nlohmann::json::parse(r.output.substr(json_at, r.output.find('\n', json_at) - json_at));
  EXPECT_GE(j.at("test_accuracy").get<double>(), 0.5) << j;
  EXPECT_FALSE(j.contains("plot")) << j;
  EXPECT_NE(j.at("plot_error").get<std::string>().find("ENOSPC"), std::string::npos) << j;
}

// --checkpoint-dir across a crash: a run killed with SIGKILL during epoch 3
// and started again ends with exactly the model of an uninterrupted run.
TEST_F(Train, AKilledRunResumedFromItsBackupEqualsAnUninterruptedRun) {
  const nlohmann::json uninterrupted = run_json("--strategy mirrored --devices 2 --epochs 4");
  TempDir ckpt;
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const std::string data_dir = data_.str(), ckpt_dir = ckpt.str();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    ::close(out[0]);
    ::execl(STRATA_CLI_PATH, STRATA_CLI_PATH, "train", "--data-dir", data_dir.c_str(),
            "--batch-size", "32", "--strategy", "mirrored", "--devices", "2", "--epochs", "4",
            "--checkpoint-dir", ckpt_dir.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  std::string output;
  char buf[512];
  while (output.find("Epoch 3/4") == std::string::npos) {
    const ssize_t n = ::read(out[0], buf, sizeof(buf));
    ASSERT_GT(n, 0) << output;
    output.append(buf, static_cast<size_t>(n));
  }
  ::kill(
      pid,
      SIGKILL);  // no chance to clean up: only the checkpoints written after epochs 1 and 2 survive
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof(buf))) > 0) output.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << output;
  const nlohmann::json resumed =
      run_json("--strategy mirrored --devices 2 --epochs 4 --checkpoint-dir " + ckpt_dir);
  EXPECT_GE(resumed.at("resumed_from_epoch").get<int>(), 2) << resumed;
  EXPECT_EQ(resumed.at("test_accuracy"), uninterrupted.at("test_accuracy"))
      << resumed << uninterrupted;
  EXPECT_EQ(resumed.at("test_loss"), uninterrupted.at("test_loss")) << resumed << uninterrupted;
}

TEST(TrainDebianData, DefaultDataLoadsWithLimitExamples) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/setup.sh installs it)";
  }
  Result r = run("train --limit-examples 256 --epochs 1 --devices 2", /*merge_stderr=*/true);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(
      r.output.find(
          "Fashion-MNIST (IDX) from /usr/share/datasets/fashion-mnist: 256 training, 256 test"),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("MirroredStrategy, 2 replicas"), std::string::npos) << r.output;
}

// Output with the timings (which vary from run to run) masked, as one sequence
// of lines per `[worker:i]` prefix: the workers' lines interleave differently
// from run to run.
std::map<std::string, std::string> stable_lines_per_worker(const std::string& output) {
  static const std::regex timings(
      "[0-9]+s [0-9]+(ms|us|s)/step|in [0-9.]+ s: [0-9]+ examples/s( \\([^)]*\\))?; wall time "
      "[0-9.]+ s");
  std::map<std::string, std::string> workers;
  std::istringstream lines(std::regex_replace(output, timings, "<time>"));
  for (std::string line; std::getline(lines, line);) {
    workers[line.substr(0, line.find(']') + 1)] += line + "\n";
  }
  return workers;
}

// The README's `strata launch ... strata train --strategy multi_worker` run on
// Debian's Fashion-MNIST: the program prints what the README quotes but the
// timings (same strategy, devices, model, per-epoch metrics, accuracy).
TEST(TrainDebianData, TheReadmesLaunchWalkthroughShowsTheProgramsOutput) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/setup.sh installs it)";
  }
  int checked = 0;
  for (const auto& session : readme_sessions(std::string(STRATA_SOURCE_DIR) + "/README.md",
                                             "strata launch --nproc 2 -- strata train")) {
    for (const QuotedCommand& c : session) {
      Result r = run_shell(with_this_binary(c.command), /*merge_stderr=*/false);
      EXPECT_EQ(r.status, 0) << c.command << "\n" << r.output;
      const auto quoted = stable_lines_per_worker(c.output);
      EXPECT_EQ(quoted.size(), 2u) << c.output;
      EXPECT_EQ(stable_lines_per_worker(r.output), quoted)
          << "README.md quotes `" << c.command << "` with output that differs from the program's:\n"
          << r.output;
      ++checked;
    }
  }
  EXPECT_GE(checked, 1) << "README.md has no `$ strata launch --nproc 2 -- strata train` run";
}

TEST(TrainUsage, HelpListsEveryFlagWithItsDefault) {
  Result r = run("train --help");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* flag :
       {"--model", "--strategy", "--devices", "--tpu-topology", "--computation-shape",
        "--num-replicas", "--epochs", "--batch-size", "--learning-rate", "--optimizer", "--seed",
        "--data-dir", "--tfrecord", "--checkpoint-dir", "--log-dir", "--plot", "--json"}) {
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
  }
  EXPECT_NE(r.output.find("=mlp"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("=mirrored"), std::string::npos) << r.output;
}

TEST(TrainUsage, BadFlagsAreOneLineUsageErrorsWithStatus2) {
  struct Case {
    const char* args;
    const char* named;  // the message names the bad value
  };
  for (const Case& c :
       {Case{"train --no-such-flag", "--no-such-flag"}, Case{"train --model resnet", "resnet"},
        Case{"train --strategy ps", "ps"}, Case{"train --devices 0", "--devices"},
        Case{"train --batch-size 0", "--batch-size"}, Case{"train --optimizer lamb", "lamb"},
        Case{"train --data-dir /no/such/dir", "/no/such/dir"}, Case{"train --plot c.txt", "c.txt"},
        Case{"train --strategy tpu --tpu-topology 2x2x", "2x2x"},
        Case{"train --computation-shape 1,1,1,2", "--computation-shape"},
        Case{"train --strategy default --devices 2", "--devices 2"},
        Case{"train --epochs 0", "--epochs"}, Case{"train --learning-rate -1", "--learning-rate"},
        Case{"train --seed x", "--seed"}, Case{"train --num-replicas 0", "--num-replicas"},
        Case{"train --limit-examples 0", "--limit-examples"},
        Case{"train --steps-per-epoch 0", "--steps-per-epoch"},
        Case{"train --tpu-topology 1x1x1x2", "--strategy mirrored"},
        Case{"train --num-replicas 2", "--num-replicas"},
        Case{"train --tfrecord-test 't-*'", "t-*"}, Case{"train extra", "extra"},
        Case{"train --checkpoint-dir ''", "--checkpoint-dir"},
        Case{"train --checkpoint-dir /dev/null/ckpt", "--checkpoint-dir"},
        // Values CLI11's own checks let through or crash on.
        Case{"train --strategy tpu --computation-shape 0,1,1,1", "'0'"},
        Case{"train --learning-rate nan", "'nan'"}, Case{"train --learning-rate inf", "'inf'"},
        Case{"train --seed -1", "'-1'"},
        Case{"train --seed 99999999999999999999", "[0, 9223372036854775807]"},
        Case{"train --devices 100000", "--devices"},
        Case{"train --strategy tpu --tpu-topology 64x64x1x2", "64x64x1x2"},
        Case{"train --collective-timeout 0", "--collective-timeout"},
        Case{"train --collective-timeout nan", "'nan'"},
        Case{"train --collective-timeout 1e9", "(0, 86400]"},
        Case{"STRATA_COLLECTIVE_TIMEOUT=-3 " STRATA_CLI_PATH " train", "'-3'"}}) {
    const std::string args = c.args;
    Result r = args.rfind("STRATA_", 0) == 0 ? run_shell(args) : run(args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.output;
    const std::string first_line = r.output.substr(0, r.output.find('\n'));
    EXPECT_EQ(first_line.rfind("strata: ", 0), 0u) << c.args << "\n" << r.output;
    EXPECT_NE(first_line.find(c.named), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find("Usage: strata"), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST(TrainUsage, TheCollectiveTimeoutComesFromTheFlagOrTheEnvironmentAndErrorsStateIt) {
  // A chief whose worker never comes: the start-up gives up after the
  // collective timeout, and says how long it waited.
  const std::vector<int> ports = strata::cluster::pick_free_ports(2);
  const std::string tf_config = R"({"cluster": {"chief": ["127.0.0.1:)" + std::to_string(ports[0]) +
                                R"("], "worker": ["127.0.0.1:)" + std::to_string(ports[1]) +
                                R"("]}, "task": {"type": "chief", "index": 0}})";
  const std::string train = std::string(STRATA_CLI_PATH) +
                            " train --strategy multi_worker --limit-examples 64 --epochs 1";
  struct Case {
    std::string env, flags, applied;
  };
  for (const Case& c :
       {Case{"", " --collective-timeout 1.5", "1500ms"},
        Case{"STRATA_COLLECTIVE_TIMEOUT=1 ", "", "1000ms"},
        // The flag wins over the environment.
        Case{"STRATA_COLLECTIVE_TIMEOUT=30 ", " --collective-timeout 0.5", "500ms"}}) {
    const auto start = std::chrono::steady_clock::now();
    std::string command = c.env;
    command += "TF_CONFIG='" + tf_config + "' ";
    command += train;
    command += c.flags;
    Result r = run_shell(command);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(r.status, 1) << c.env << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find("gave up after " + c.applied +
                            " waiting for the rendezvous: still "
                            "missing [/job:worker/task:0]"),
              std::string::npos)
        << c.env << c.flags << "\n"
        << r.output;
    EXPECT_LT(took, std::chrono::seconds(20)) << c.env << c.flags;
  }
}

TEST_F(Train, WorkersWithDifferentFlagsFailTogetherNamingTheDifference) {
  // Two processes of one job on loopback, the worker with another batch size
  // and seed: both fail at start-up, before any data is read.
  const std::vector<int> ports = strata::cluster::pick_free_ports(2);
  const auto tf_config = [&](const std::string& type) {
    return R"('{"cluster": {"chief": ["127.0.0.1:)" + std::to_string(ports[0]) +
           R"("], "worker": ["127.0.0.1:)" + std::to_string(ports[1]) +
           R"("]}, "task": {"type": ")" + type + R"(", "index": 0}}')";
  };
  TempDir out;
  const auto train = [&](const std::string& flags) {
    return std::string(STRATA_CLI_PATH) + " train --data-dir " + data_.str() +
           " --epochs 2 --strategy multi_worker --collective-timeout 20 " + flags;
  };
  const auto start = std::chrono::steady_clock::now();
  Result r = run_shell("TF_CONFIG=" + tf_config("chief") + " " + train("--batch-size 32") + " > " +
                       (out / "chief") + " 2>&1 & TF_CONFIG=" + tf_config("worker") + " " +
                       train("--batch-size 64 --seed 7") + " > " + (out / "worker") +
                       " 2>&1; w=$?; wait $!; c=$?; echo chief=$c worker=$w");
  const auto took = std::chrono::steady_clock::now() - start;
  const std::string chief = read_file(out / "chief"), worker = read_file(out / "worker");
  // The worker's error is a usage error (status 2), the chief's a failed start (1).
  EXPECT_NE(r.output.find("chief=1 worker=2"), std::string::npos) << r.output << chief << worker;
  EXPECT_NE(worker.find("task worker:0 runs with other flags than the chief"), std::string::npos)
      << worker;
  EXPECT_NE(worker.find("--batch-size: the chief has 32, this worker 64"), std::string::npos)
      << worker;
  EXPECT_NE(worker.find("--seed: the chief has 1, this worker 7"), std::string::npos) << worker;
  EXPECT_NE(chief.find("1 worker of 2 run with other flags than the chief"), std::string::npos)
      << chief;
  EXPECT_EQ(chief.find("Epoch 1/"), std::string::npos) << chief;
  EXPECT_LT(took, std::chrono::seconds(30));
}

TEST(TrainUsage, TpuRefusesAMultiHostPodFromTfConfig) {
  ::setenv(
      "TF_CONFIG",
      R"({"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}})",
      1);
  Result r = run("train --strategy tpu --limit-examples 64 --epochs 1");
  ::unsetenv("TF_CONFIG");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("strata: UNIMPLEMENTED: --strategy tpu"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("grpc://127.0.0.1:1"), std::string::npos) << r.output;
}

TEST(TrainUsage, ALabelOutsideTheTenClassesIsDataLossNamingTheFileAndIndex) {
  TempDir data;
  write_split(data.str(), "train", 64, 1);
  write_split(data.str(), "t10k", 16, 2);
  std::vector<uint8_t> labels(16, 3);
  labels[11] = 37;
  write_idx(data / "t10k-labels-idx1-ubyte.gz", {16}, labels);
  Result r = run("train --data-dir " + data.str() + " --epochs 1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("strata: DATA_LOSS"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(data / "t10k-labels-idx1-ubyte.gz" + ": label 37 at index 11"),
            std::string::npos)
      << r.output;
}

TEST(TrainUsage, MissingDataFilesAreARuntimeErrorSayingHowToInstall) {
  TempDir empty;
  Result r = run("train --data-dir " + empty.str());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("strata: NOT_FOUND"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(empty / "train-images-idx3-ubyte.gz"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("apt-get install dataset-fashion-mnist"), std::string::npos) << r.output;
}

}  // namespace
