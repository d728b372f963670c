// End-to-end tests of the `strata` program: they run the real binary.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct Result {
  int status;
  std::string output;  // stdout and stderr together
};

Result run(const std::string& args) {
  const std::string cmd = std::string(STRATA_CLI_PATH) + " " + args + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int raw = ::pclose(pipe);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), out};
}

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

TEST(Topology, PrintsTheMeshAndTheSeedsDeviceAssignment) {
  Result r = run("topology --tpu-topology 2x2x1x2 --computation-shape 1,1,1,2 --num-replicas 4");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("mesh [2, 2, 1, 2]: 4 replicas x 2 logical cores"), std::string::npos) << r.output;
  // Replica 0 holds both cores of chip (0, 0): logical core 0 on core 0, logical core 1 on core 1.
  EXPECT_NE(r.output.find("z=0 core=0\n     x=0    x=1\ny=0  r0:c0  r1:c0\ny=1  r3:c0  r2:c0"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("y=0  r0:c1  r1:c1"), std::string::npos) << r.output;
}

TEST(Topology, DefaultsToOneReplicaPerCoreOfTheLocalDevices) {
  Result r = run("topology --devices 2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("mesh [1, 1, 1, 2]: 2 replicas x 1 logical core"), std::string::npos) << r.output;
}

TEST(Topology, InvalidShapesAreUsageErrorsNamingTheValue) {
  Result bad = run("topology --tpu-topology 2x2x");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("2x2x"), std::string::npos) << bad.output;
  Result too_many = run("topology --tpu-topology 2x2x1x2 --computation-shape 1,1,1,2 --num-replicas 5");
  EXPECT_EQ(too_many.status, 2);
  EXPECT_NE(too_many.output.find("requested 5 replicas"), std::string::npos) << too_many.output;
  EXPECT_EQ(run("topology --computation-shape 1,2").status, 2);
}

TEST(Launch, GivesEachWorkerItsTaskAndPrefixesItsOutput) {
  Result r = run("launch --nproc 3 -- sh -c 'echo \"$TF_CONFIG\"'");
  ASSERT_EQ(r.status, 0) << r.output;
  for (int i = 0; i < 3; ++i) {
    const std::string prefix = "[worker:" + std::to_string(i) + "] {\"cluster\":{\"worker\":[\"127.0.0.1:";
    EXPECT_NE(r.output.find(prefix), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("\"task\":{\"index\":" + std::to_string(i) + ",\"type\":\"worker\"}"),
              std::string::npos)
        << r.output;
  }
}

TEST(Launch, AFailingWorkerStopsTheOthersAndSetsTheStatus) {
  // Worker 1 fails at once; worker 0 would otherwise run for a minute.
  Result r = run(
      "launch --nproc 2 --grace-seconds 1 -- sh -c "
      "'case \"$TF_CONFIG\" in *\\\"index\\\":1*) echo dying; exit 7;; esac; exec sleep 60'");
  EXPECT_EQ(r.status, 7) << r.output;
  EXPECT_NE(r.output.find("[launch] worker:1 failed with status 7"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[worker:1] dying"), std::string::npos) << r.output;
}

TEST(Launch, DevicesPerWorkerSetsTheLogicalDeviceCount) {
  Result r = run("launch --nproc 1 --devices-per-worker 3 -- " + std::string(STRATA_CLI_PATH) + " demo");
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
  Result missing = run("launch --nproc 1 -- /no/such/program");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("/no/such/program"), std::string::npos) << missing.output;
}

}  // namespace
