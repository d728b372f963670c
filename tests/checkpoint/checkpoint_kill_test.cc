// A writer killed (SIGKILL) at arbitrary moments while saving checkpoints
// leaves the latest recorded checkpoint whole and consistent: the temporary
// files, fsyncs and the rename of the state file after the checkpoint keep
// every crash point safe.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>

#include "strata/keras/keras.h"
#include "strata/strata.h"

namespace strata {
namespace {

namespace keras = strata::keras;
namespace train = strata::train;

TEST(CheckpointKillTest, AWriterKilledAtAnyMomentLeavesTheLatestCheckpointWhole) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    TempDir dir("ckpt_kill");
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::execl(STRATA_KILL_WRITER_PATH, STRATA_KILL_WRITER_PATH, dir.path().c_str(), nullptr);
      ::_exit(127);
    }
    ::close(out[1]);
    // Let it complete 1 to 4 saves, then kill it somewhere inside the next ones.
    const int saves = std::uniform_int_distribution<int>(1, 4)(rng);
    std::string output;
    int seen = 0;
    char buf[256];
    while (seen < saves) {
      const ssize_t n = ::read(out[0], buf, sizeof buf);
      ASSERT_GT(n, 0) << "the writer stopped: " << output;
      output.append(buf, static_cast<size_t>(n));
      seen = 0;
      for (size_t p = output.find("saved "); p != std::string::npos;
           p = output.find("saved ", p + 1)) {
        ++seen;
      }
    }
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 20000)(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(out[0]);
    ASSERT_TRUE(WIFSIGNALED(status)) << output;

    const auto latest = train::latest_checkpoint(dir.path());
    ASSERT_TRUE(latest.has_value()) << output;
    auto model = keras::Sequential({keras::layers::Dense(256, {.input_shape = {256}})});
    Variable step(constant(int64_t{-1}));
    train::Checkpoint ckpt({{"model", model}, {"step", step}});
    ckpt.restore(*latest).assert_consumed();
    const int64_t n = step.value().item<int64_t>();
    EXPECT_GE(n, saves);
    EXPECT_EQ(*latest, dir.file("ckpt-" + std::to_string(n)));
    EXPECT_EQ(ckpt.save_counter().value().item<int64_t>(), n);
    for (const Tensor& w : model->get_weights()) {
      for (float v : w.to_vector<float>()) ASSERT_EQ(v, static_cast<float>(n));
    }
  }
}

}  // namespace
}  // namespace strata
