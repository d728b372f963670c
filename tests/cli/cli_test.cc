// End-to-end tests of the `strata` program: they run the real binary.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace {

using namespace strata_cli_test;  // NOLINT: test helpers

TEST(Cli, HelpListsTheSubcommands) {
  Result r = run("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("launch"), std::string::npos);
}

TEST(Cli, UnknownFlagIsAUsageErrorWithStatus2) {
  Result r = run("--no-such-flag");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("no-such-flag"), std::string::npos) << r.output;
}

TEST(Tfrecord, ConvertIdxWritesExamplesThatInspectAndVerifyRead) {
  TempDir dir;
  // Three 2x2 images with labels 7, 8, 9.
  write_idx(dir / "images", {3, 2, 2}, {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  write_idx(dir / "labels", {3}, {7, 8, 9});
  Result convert = run("tfrecord convert-idx " + (dir / "images") + " " + (dir / "labels") + " " +
                       (dir / "out.tfrecord") + " --shards 2 --compression GZIP");
  ASSERT_EQ(convert.status, 0) << convert.output;
  EXPECT_NE(convert.output.find("wrote 3 examples (image: 4 bytes, label: int64) to 2 files"),
            std::string::npos)
      << convert.output;
  const std::string shard0 = dir / "out.tfrecord-00000-of-00002";
  Result inspect = run("tfrecord inspect " + shard0);
  ASSERT_EQ(inspect.status, 0) << inspect.output;
  // Shard 0 holds examples 0 and 2 (round robin).
  EXPECT_NE(inspect.output.find("label: int64[1] 7"), std::string::npos) << inspect.output;
  EXPECT_NE(inspect.output.find("label: int64[1] 9"), std::string::npos) << inspect.output;
  EXPECT_NE(inspect.output.find("image: string[1] <4 bytes>"), std::string::npos) << inspect.output;
  EXPECT_NE(inspect.output.find("2 records shown"), std::string::npos) << inspect.output;
  Result limited = run("tfrecord inspect " + shard0 + " --limit 1");
  EXPECT_NE(limited.output.find("1 record shown"), std::string::npos) << limited.output;
  Result verify = run("tfrecord verify " + shard0 + " " + (dir / "out.tfrecord-00001-of-00002"));
  EXPECT_EQ(verify.status, 0) << verify.output;
  EXPECT_NE(verify.output.find(": 1 records"), std::string::npos) << verify.output;
}

TEST(Tfrecord, VerifyReportsTheFirstCorruptOffsetAndFails) {
  TempDir dir;
  write_idx(dir / "images", {2, 1, 3}, {1, 2, 3, 4, 5, 6});
  write_idx(dir / "labels", {2}, {0, 1});
  ASSERT_EQ(
      run("tfrecord convert-idx " + (dir / "images") + " " + (dir / "labels") + " " + (dir / "a"))
          .status,
      0);
  std::string bytes = read_file(dir / "a");
  const size_t first_record = bytes.size() / 2;  // both records have the same size
  bytes[first_record + 14] ^= 0x55;              // inside record 1's payload
  std::ofstream(dir / "b", std::ios::binary) << bytes;
  Result verify = run("tfrecord verify " + (dir / "a") + " " + (dir / "b"));
  EXPECT_EQ(verify.status, 1) << verify.output;
  EXPECT_NE(verify.output.find("OK " + (dir / "a") + ": 2 records"), std::string::npos)
      << verify.output;
  EXPECT_NE(verify.output.find("CORRUPT " + (dir / "b") + ": DATA_LOSS"), std::string::npos)
      << verify.output;
  EXPECT_NE(verify.output.find("offset " + std::to_string(first_record)), std::string::npos)
      << verify.output;
  // Truncation is detected too.
  std::ofstream(dir / "c", std::ios::binary) << bytes.substr(0, bytes.size() - 3);
  EXPECT_EQ(run("tfrecord verify " + (dir / "c")).status, 1);
}

TEST(Tfrecord, BadInputsAreClearErrors) {
  TempDir dir;
  Result missing = run("tfrecord verify " + (dir / "nope"));
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("nope"), std::string::npos) << missing.output;
  write_idx(dir / "images", {2, 1, 1}, {1, 2});
  write_idx(dir / "labels", {3}, {0, 1, 2});
  Result mismatch =
      run("tfrecord convert-idx " + (dir / "images") + " " + (dir / "labels") + " " + (dir / "o"));
  EXPECT_EQ(mismatch.status, 2) << mismatch.output;
  EXPECT_NE(mismatch.output.find("labels [3]"), std::string::npos) << mismatch.output;
  EXPECT_EQ(run("tfrecord").status, 2);
  EXPECT_EQ(run("tfrecord convert-idx a b c --compression LZ4").status, 2);
}

TEST(Topology, PrintsTheMeshAndTheSeedsDeviceAssignment) {
  Result r = run("topology --tpu-topology 2x2x1x2 --computation-shape 1,1,1,2 --num-replicas 4");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("mesh [2, 2, 1, 2]: 4 replicas x 2 logical cores"), std::string::npos)
      << r.output;
  // Replica 0 holds both cores of chip (0, 0): logical core 0 on core 0, logical core 1 on core 1.
  EXPECT_NE(r.output.find("z=0 core=0\n     x=0    x=1\ny=0  r0:c0  r1:c0\ny=1  r3:c0  r2:c0"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("y=0  r0:c1  r1:c1"), std::string::npos) << r.output;
}

TEST(Topology, DefaultsToOneReplicaPerCoreOfTheLocalDevices) {
  Result r = run("topology --devices 2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("mesh [1, 1, 1, 2]: 2 replicas x 1 logical core"), std::string::npos)
      << r.output;
}

TEST(Topology, InvalidShapesAreUsageErrorsNamingTheValue) {
  Result bad = run("topology --tpu-topology 2x2x");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("2x2x"), std::string::npos) << bad.output;
  Result too_many =
      run("topology --tpu-topology 2x2x1x2 --computation-shape 1,1,1,2 --num-replicas 5");
  EXPECT_EQ(too_many.status, 2);
  EXPECT_NE(too_many.output.find("requested 5 replicas"), std::string::npos) << too_many.output;
  EXPECT_EQ(run("topology --computation-shape 1,2").status, 2);
  // A zero in a shape used to divide by zero (SIGFPE) before any check.
  for (const char* flag : {"--computation-shape 0,1,1,1", "--computation-stride 1,0,1,1"}) {
    Result zero = run(std::string("topology ") + flag);
    EXPECT_EQ(zero.status, 2) << flag << "\n" << zero.output;
    EXPECT_NE(zero.output.find("expected a whole number in [1, "), std::string::npos)
        << zero.output;
  }
}

const std::string kReadme = std::string(STRATA_SOURCE_DIR) + "/README.md";

// The README's walkthrough quotes real output: every `$ strata topology ...`
// line of its text blocks is followed by exactly what the program prints.
TEST(Topology, TheReadmeWalkthroughShowsTheProgramsOutput) {
  int checked = 0;
  for (const auto& session : readme_sessions(kReadme, "strata topology")) {
    for (const QuotedCommand& c : session) {
      Result r = run_shell(with_this_binary(c.command), /*merge_stderr=*/false);
      EXPECT_EQ(r.status, 0) << c.command;
      EXPECT_EQ(r.output, c.output)
          << "README.md quotes `" << c.command << "` with output that differs from the program's";
      ++checked;
    }
  }
  EXPECT_GE(checked, 1) << "README.md has no `$ strata topology` walkthrough";
}

// The README's tfrecord walkthrough on Debian's Fashion-MNIST test set: every
// command (run in order in a temporary folder standing for /tmp/fm) prints
// exactly the output quoted under it, including the corrupt files' reports.
TEST(Tfrecord, TheReadmeWalkthroughShowsTheProgramsOutput) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/setup.sh installs it)";
  }
  TempDir dir;
  int checked = 0;
  for (const auto& session : readme_sessions(kReadme, "mkdir -p /tmp/fm")) {
    for (const QuotedCommand& c : session) {
      const std::string command = replace_all(with_this_binary(c.command), "/tmp/fm", dir.str());
      Result r = run_shell(command);
      EXPECT_EQ(r.status, 0) << command << "\n" << r.output;
      EXPECT_EQ(r.output, replace_all(c.output, "/tmp/fm", dir.str()))
          << "README.md quotes `" << c.command << "` with output that differs from the program's";
      checked += c.command.find("strata tfrecord") != std::string::npos;
    }
  }
  EXPECT_GE(checked, 4) << "README.md has no `strata tfrecord` walkthrough";
}

TEST(Launch, GivesEachWorkerItsTaskAndPrefixesItsOutput) {
  Result r = run("launch --nproc 3 -- sh -c 'echo \"$TF_CONFIG\"'");
  ASSERT_EQ(r.status, 0) << r.output;
  for (int i = 0; i < 3; ++i) {
    const std::string prefix =
        "[worker:" + std::to_string(i) + "] {\"cluster\":{\"worker\":[\"127.0.0.1:";
    EXPECT_NE(r.output.find(prefix), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("\"task\":{\"index\":" + std::to_string(i) + ",\"type\":\"worker\"}"),
              std::string::npos)
        << r.output;
  }
}

TEST(Launch, GivesEveryWorkerTheSameClusterTokenFreshOrTheOperators) {
  // A fresh random token per launch, the same for every worker of it.
  auto tokens = [](const Result& r) {
    std::vector<std::string> out;
    std::istringstream in(r.output);
    std::string line;
    while (std::getline(in, line)) {
      const size_t at = line.find("token=");
      if (at != std::string::npos) out.push_back(line.substr(at + 6));
    }
    return out;
  };
  const std::string show = "-- sh -c 'echo \"token=$STRATA_CLUSTER_TOKEN\"'";
  Result first = run_shell("env -u STRATA_CLUSTER_TOKEN " + std::string(STRATA_CLI_PATH) +
                           " launch --nproc 2 " + show);
  Result second = run_shell("env -u STRATA_CLUSTER_TOKEN " + std::string(STRATA_CLI_PATH) +
                            " launch --nproc 2 " + show);
  ASSERT_EQ(first.status, 0) << first.output;
  const std::vector<std::string> a = tokens(first), b = tokens(second);
  ASSERT_EQ(a.size(), 2u) << first.output;
  ASSERT_EQ(b.size(), 2u) << second.output;
  EXPECT_EQ(a[0], a[1]);
  EXPECT_EQ(a[0].size(), 64u) << a[0];
  EXPECT_NE(a[0], b[0]);
  // The operator's token is kept.
  Result given = run_shell("STRATA_CLUSTER_TOKEN=operators-token " + std::string(STRATA_CLI_PATH) +
                           " launch --nproc 2 " + show);
  EXPECT_EQ(tokens(given), (std::vector<std::string>{"operators-token", "operators-token"}))
      << given.output;
  // A malformed one is refused before anything starts.
  Result bad = run_shell("STRATA_CLUSTER_TOKEN='two words' " + std::string(STRATA_CLI_PATH) +
                         " launch --nproc 2 " + show);
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_NE(bad.output.find("STRATA_CLUSTER_TOKEN"), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("token="), std::string::npos) << bad.output;
}

TEST(Launch, AFailingWorkerStopsTheOthersAndSetsTheStatus) {
  // Worker 1 fails at once; worker 0 would otherwise run for a minute.
  Result r =
      run("launch --nproc 2 --grace-seconds 1 -- sh -c "
          "'case \"$TF_CONFIG\" in *\\\"index\\\":1*) echo dying; exit 7;; esac; exec sleep 60'");
  EXPECT_EQ(r.status, 7) << r.output;
  EXPECT_NE(r.output.find("[launch] worker:1 failed with status 7"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[worker:1] dying"), std::string::npos) << r.output;
}

// After a failure launch reports how every worker ended and the error each
// printed, in one place. Worker 0 ignores SIGTERM, so launch kills it after
// the grace period; worker 1 fails a second in, after worker 0 printed.
TEST(Launch, AFailedJobEndsWithAReportOfEveryWorker) {
  Result r =
      run("launch --nproc 2 --grace-seconds 1 -- sh -c "
          "'case \"$TF_CONFIG\" in *\\\"index\\\":1*) sleep 1; echo \"strata: UNAVAILABLE: lost "
          "rank 0\" >&2; "
          "exit 3;; esac; trap \"\" TERM; echo \"error (X): never mind\"; exec sleep 60'");
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_NE(r.output.find("[launch] report of every worker:\n"
                          "[launch]   worker:0: killed by signal 9 (Killed) after the grace "
                          "period: error (X): never mind\n"
                          "[launch]   worker:1: exit status 3: strata: UNAVAILABLE: lost rank 0\n"),
            std::string::npos)
      << r.output;
}

TEST(Launch, DevicesPerWorkerSetsTheLogicalDeviceCount) {
  Result r =
      run("launch --nproc 1 --devices-per-worker 3 -- " + std::string(STRATA_CLI_PATH) + " demo");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[worker:0] device: /job:localhost/replica:0/task:0/device:CPU:2"),
            std::string::npos)
      << r.output;
}

TEST(Launch, ForwardsCtrlCToEveryWorker) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    ::close(out[0]);
    ::execl(STRATA_CLI_PATH, STRATA_CLI_PATH, "launch", "--nproc", "2", "--", "sh", "-c",
            "trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.05; done", nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  std::string output;
  char buf[512];
  // Wait until both workers are up, then deliver Ctrl-C to launch only.
  while (output.find("[worker:0] ready") == std::string::npos ||
         output.find("[worker:1] ready") == std::string::npos) {
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
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT) << output;
  EXPECT_NE(output.find("[worker:0] got-int"), std::string::npos) << output;
  EXPECT_NE(output.find("[worker:1] got-int"), std::string::npos) << output;
}

TEST(Launch, BadArgumentsAreUsageErrors) {
  EXPECT_EQ(run("launch --nproc 0 -- true").status, 2);
  EXPECT_EQ(run("launch --nproc 2").status, 2);
  for (const char* grace : {"nan", "inf", "-1", "1e300"}) {
    Result r = run(std::string("launch --grace-seconds ") + grace + " -- true");
    EXPECT_EQ(r.status, 2) << grace << "\n" << r.output;
    EXPECT_NE(r.output.find("--grace-seconds: expected a finite number in [0, 3600], got '" +
                            std::string(grace) + "'"),
              std::string::npos)
        << r.output;
  }
  Result devices = run("launch --devices-per-worker 100000 -- true");
  EXPECT_EQ(devices.status, 2) << devices.output;
  EXPECT_NE(devices.output.find("--devices-per-worker"), std::string::npos) << devices.output;
  Result threads = run_shell("STRATA_NUM_THREADS=100000 " + std::string(STRATA_CLI_PATH) + " demo");
  EXPECT_EQ(threads.status, 2) << threads.output;
  EXPECT_NE(threads.output.find("STRATA_NUM_THREADS: expected a whole number in [1, "),
            std::string::npos)
      << threads.output;
  Result missing = run("launch --nproc 1 -- /no/such/program");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("/no/such/program"), std::string::npos) << missing.output;
}

// --- bench -----------------------------------------------------------------------

void write_executable(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), 0755);
}

// A stand-in benchmark program: writes `json` to the --benchmark_out file, as
// Google Benchmark does, and records its arguments beside itself.
void write_fake_bench(const std::string& path, const std::string& json) {
  write_executable(path,
                   "#!/bin/sh\necho \"$@\" > \"$0.args\"\nfor a; do case $a in "
                   "--benchmark_out=*) out=${a#--benchmark_out=};; esac; done\n"
                   "cat > \"$out\" <<'EOF'\n" +
                       json + "\nEOF\n");
}

// Google Benchmark's JSON with repetitions: iterations plus aggregates (the
// median is used; a "cv" of a counter that is always 0 is a bare NaN), a
// counter, bytes_per_second, and an in-program peer.
const char* const kIoJson = R"({"context": {}, "benchmarks": [
 {"name": "BM_PlainRead/real_time", "run_name": "BM_PlainRead/real_time", "run_type": "aggregate",
  "aggregate_name": "median", "real_time": 40, "time_unit": "ms", "bytes_per_second": 6.0e9},
 {"name": "BM_PlainRead/real_time", "run_name": "BM_PlainRead/real_time", "run_type": "aggregate",
  "aggregate_name": "mean", "real_time": 99, "time_unit": "ms", "bytes_per_second": 1.0e9},
 {"name": "BM_PlainRead/real_time", "run_name": "BM_PlainRead/real_time", "run_type": "aggregate",
  "aggregate_name": "cv", "real_time": 0.01, "time_unit": "ms", "faults_per_it": NaN,
  "bytes_per_second": -inf},
 {"name": "BM_TFRecordReadVerified/real_time", "run_name": "BM_TFRecordReadVerified/real_time",
  "run_type": "aggregate", "aggregate_name": "median", "real_time": 80, "time_unit": "ms",
  "bytes_per_second": 3.0e9, "records": 65281},
 {"name": "BM_StrataMatMul/m:8/threads:1/real_time", "run_type": "iteration", "real_time": 1.0,
  "time_unit": "us"},
 {"name": "BM_StrataMatMul/m:8/threads:1/real_time", "run_type": "iteration", "real_time": 4.0,
  "time_unit": "us"},
 {"name": "BM_StrataMatMul/m:8/threads:1/real_time", "run_type": "iteration", "real_time": 2.0,
  "time_unit": "us"},
 {"name": "BM_CblasSgemm/m:8/threads:1/real_time", "run_type": "iteration", "real_time": 1.0,
  "time_unit": "us"},
 {"name": "BM_TrainMLP/threads:1/real_time", "run_type": "iteration", "real_time": 8, "time_unit": "ms",
  "examples_per_second": 16000},
 {"name": "BM_PipelineUint8/real_time", "run_type": "iteration", "real_time": 30, "time_unit": "ms",
  "examples/s": 2.0e6}]})";

// Splits the console table's line for `figure` into its columns.
std::vector<std::string> table_line(const std::string& output, const std::string& figure) {
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with(figure + "  ")) continue;
    std::vector<std::string> cells;
    size_t i = 0;
    while (i < line.size()) {
      const size_t next = line.find("  ", i);
      cells.push_back(line.substr(i, next - i));
      if (next == std::string::npos) break;
      i = line.find_first_not_of(' ', next);
    }
    return cells;
  }
  return {};
}

TEST(Bench, ParsesBenchmarkJsonPairsPeersAndChecksTargets) {
  TempDir bench, out;
  write_fake_bench(bench / "fake_bench", kIoJson);
  write_executable(bench / "broken_bench", "#!/bin/sh\necho 'gloo: cannot connect' >&2\nexit 3\n");
  // Not a Google Benchmark program (bench/peers/allreduce_2proc.py drives it): listed, not run.
  write_executable(bench / "multiworker_allreduce_bench", "#!/bin/sh\nexit 9\n");
  Result r = run("bench --bench-dir " + bench.str() + " --python /no/such/python --out " +
                 (out / "b.json"));
  EXPECT_EQ(r.status, 1) << r.output;  // broken_bench failed, the rest is reported
  EXPECT_NE(r.output.find("multiworker_allreduce_bench: not run here (one rank of a 2-process"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("broken_bench: FAILED (exit status 3: gloo: cannot connect)"),
            std::string::npos)
      << r.output;
  // The median aggregate, not the mean; bytes/s against the plain read() peer.
  EXPECT_EQ(
      table_line(r.output, "TFRecord read + CRC, 256 MiB page-cached, 4 KiB records, 1 thread"),
      (std::vector<std::string>{"TFRecord read + CRC, 256 MiB page-cached, 4 KiB records, 1 thread",
                                "3 GB/s", "plain read() of the same file", "6 GB/s", "0.50×",
                                "≥ 1 GB/s", "pass"}))
      << r.output;
  // Median of three iteration runs (2 µs) against OpenBLAS's 1 µs: a miss.
  EXPECT_EQ(table_line(r.output, "matmul m:8/threads:1"),
            (std::vector<std::string>{"matmul m:8/threads:1", "2 µs", "OpenBLAS cblas_sgemm",
                                      "1 µs", "0.50×", "≥ 0.9", "miss"}))
      << r.output;
  EXPECT_EQ(table_line(r.output, "shuffle(10000).batch(128).prefetch, uint8 Fashion-MNIST"),
            (std::vector<std::string>{"shuffle(10000).batch(128).prefetch, uint8 Fashion-MNIST",
                                      "2M ex/s", "MLP training, 1 thread (BM_TrainMLP)", "16k ex/s",
                                      "125.00×", "≥ 10× MLP rate", "pass"}))
      << r.output;
  // The PyTorch peer cannot run: skipped with the reason, no ratio, no verdict.
  const std::string skipped =
      "skipped (python '/no/such/python' not found; pass --python or set STRATA_BENCH_PYTHON)";
  EXPECT_EQ(
      table_line(r.output, "MLP training, 1 thread(s)"),
      (std::vector<std::string>{"MLP training, 1 thread(s)", "16k ex/s", "PyTorch (torch_train.py)",
                                skipped, "-", "≥ 2×", "skipped (no peer)"}))
      << r.output;
  const std::string args = read_file(bench / "fake_bench.args");
  EXPECT_NE(args.find("--benchmark_out_format=json"), std::string::npos) << args;
  EXPECT_NE(args.find("--benchmark_repetitions=3"), std::string::npos) << args;

  const nlohmann::json j = nlohmann::json::parse(read_file(out / "b.json"));
  EXPECT_EQ(j.at("figures").size(), 6u);
  EXPECT_EQ(j.at("python"), "/no/such/python");
  bool seen_tfrecord = false;
  for (const nlohmann::json& row : j.at("rows")) {
    if (row.at("benchmark") != "BM_TFRecordReadVerified") continue;
    seen_tfrecord = true;
    EXPECT_DOUBLE_EQ(row.at("strata").get<double>(), 3.0e9);
    EXPECT_DOUBLE_EQ(row.at("peer_value").get<double>(), 6.0e9);
    EXPECT_DOUBLE_EQ(row.at("ratio").get<double>(), 0.5);
    EXPECT_EQ(row.at("result"), "pass");
  }
  EXPECT_TRUE(seen_tfrecord) << j.dump(2);
  ASSERT_EQ(j.at("peers").size(), 1u);
  EXPECT_EQ(j.at("peers").at(0).at("script"), "torch_train.py");
  EXPECT_EQ(j.at("peers").at(0).at("status").get<std::string>().rfind("skipped (python", 0), 0u);
}

TEST(Bench, RunsPythonPeersAndReportsMissingModulesAsSkipped) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir bench, peers;
  write_fake_bench(bench / "fake_bench", R"({"context": {}, "benchmarks": [
 {"name": "BM_TrainMLP/threads:1/real_time", "run_type": "iteration", "real_time": 8, "time_unit": "ms",
  "examples_per_second": 1500},
 {"name": "BM_MirroredTrainMLP/devices:2/threads:1/real_time", "run_type": "iteration",
  "real_time": 8, "time_unit": "ms", "examples_per_second": 3000}]})");
  // A stand-in torch_train.py speaking the JSON-lines protocol (no torch needed);
  // torch_ddp.py needs a module that is not installed.
  std::ofstream(peers / "torch_train.py")
      << "import sys\n"
         "t = sys.argv[sys.argv.index('--threads') + 1]\n"
         "print('torch 0 (stand-in)')\n"
         "print('{\"peer\": \"torch_train\", \"figure\": \"BM_TrainMLP/threads:' + t + "
         "'\", \"examples_per_second\": 1000}')\n";
  std::ofstream(peers / "torch_ddp.py") << "import strata_no_such_module\n";
  Result r = run("bench --quick --bench-dir " + bench.str() + " --peers-dir " + peers.str() +
                 " --python /usr/bin/python3");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(
      table_line(r.output, "MLP training, 1 thread(s)"),
      (std::vector<std::string>{"MLP training, 1 thread(s)", "1.5k ex/s",
                                "PyTorch (torch_train.py)", "1k ex/s", "1.50×", "≥ 2×", "miss"}))
      << r.output;
  EXPECT_NE(r.output.find("torch_ddp.py --processes 2 --threads 1: skipped (not installed for "
                          "/usr/bin/python3: strata_no_such_module)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("PyTorch DDP 2 × 1 (torch_ddp.py)  skipped (not installed"),
            std::string::npos)
      << r.output;
  const std::string args = read_file(bench / "fake_bench.args");
  EXPECT_NE(args.find("--benchmark_min_time=0.05"), std::string::npos) << args;
  EXPECT_NE(args.find("--benchmark_repetitions=1"), std::string::npos) << args;
}

TEST(Bench, WriteDocsReplacesOnlyTheMarkedSection) {
  TempDir bench, docs;
  write_fake_bench(bench / "fake_bench", kIoJson);
  const std::string head = "# Performance\n\nHand-written analysis | stays.\n\n";
  const std::string tail = "\n## Later section\n\nAlso stays.\n";
  std::ofstream(docs / "PERF.md") << head
                                  << "<!-- BEGIN strata bench generated: old -->\nold table\n"
                                     "<!-- END strata bench generated -->"
                                  << tail;
  Result r = run("bench --bench-dir " + bench.str() + " --python /no/such/python --write-docs " +
                 (docs / "PERF.md"));
  EXPECT_EQ(r.status, 0) << r.output;
  const std::string text = read_file(docs / "PERF.md");
  EXPECT_TRUE(text.starts_with(head)) << text;
  EXPECT_TRUE(text.ends_with("<!-- END strata bench generated -->" + tail)) << text;
  EXPECT_EQ(text.find("old table"), std::string::npos) << text;
  EXPECT_NE(
      text.find("| TFRecord read + CRC, 256 MiB page-cached, 4 KiB records, 1 thread | 3 GB/s "
                "| plain read() of the same file | 6 GB/s | 0.50× | ≥ 1 GB/s | pass |"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("Generated by `strata bench`"), std::string::npos) << text;

  // A file without markers gets a new section at its end; one marker alone is
  // an error that leaves the file untouched.
  std::ofstream(docs / "plain.md") << head;
  EXPECT_EQ(run("bench --bench-dir " + bench.str() + " --python /no/such/python --write-docs " +
                (docs / "plain.md"))
                .status,
            0);
  const std::string appended = read_file(docs / "plain.md");
  EXPECT_TRUE(appended.starts_with(head + "\n## Generated figures")) << appended;
  EXPECT_TRUE(appended.ends_with("<!-- END strata bench generated -->\n")) << appended;
  const std::string broken = head + "<!-- END strata bench generated -->\n";
  std::ofstream(docs / "broken.md") << broken;
  std::filesystem::remove(bench / "fake_bench.args");
  Result bad = run("bench --bench-dir " + bench.str() + " --write-docs " + (docs / "broken.md"));
  EXPECT_EQ(bad.status, 1) << bad.output;
  EXPECT_NE(bad.output.find("has only one of the markers"), std::string::npos) << bad.output;
  EXPECT_EQ(read_file(docs / "broken.md"), broken);
  EXPECT_FALSE(std::filesystem::exists(bench / "fake_bench.args"));  // checked before running
}

TEST(Bench, UsageErrorsExitWith2) {
  TempDir bench;
  EXPECT_EQ(run("bench --no-such-flag").status, 2);
  EXPECT_EQ(run("bench --bench-dir /no/such/dir").status, 2);
  EXPECT_EQ(run("bench --bench-dir " + bench.str() + " --write-docs /no/such/file.md").status, 2);
  EXPECT_EQ(run("bench --bench-dir " + bench.str() + " --repetitions 0").status, 2);
  EXPECT_EQ(run("bench --bench-dir " + bench.str() + " --repetitions x").status, 2);
  EXPECT_EQ(run("bench --bench-dir " + bench.str() + " extra").status, 2);
  Result r = run("bench --quick --out");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--out"), std::string::npos) << r.output;
}

// A --filter that matches none of a program's benchmarks: Google Benchmark
// says so, exits 0 and leaves its output file empty; the program ran nothing
// and did not fail.
TEST(Bench, AProgramWithNoBenchmarkMatchingTheFilterIsNotAFailure) {
  TempDir bench;
  write_fake_bench(bench / "fake_bench", kIoJson);
  write_executable(
      bench / "other_bench",
      "#!/bin/sh\nfor a; do case $a in --benchmark_out=*) : > \"${a#--benchmark_out=}\";; "
      "esac; done\necho 'Failed to match any benchmarks against regex: BM_PlainRead'\n");
  Result r = run("bench --bench-dir " + bench.str() +
                 " --filter BM_PlainRead --python /no/such/python --repetitions 1");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("other_bench: ran no benchmark (none matches the filter)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("FAILED"), std::string::npos) << r.output;
}

TEST(Bench, AFolderWithoutProgramsIsAClearError) {
  TempDir empty;
  Result r = run("bench --bench-dir " + empty.str());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("no *_bench programs in " + empty.str()), std::string::npos) << r.output;
  EXPECT_EQ(run("bench --bench-dir /no/such/dir").status, 2);
}

}  // namespace
