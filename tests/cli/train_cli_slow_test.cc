// The full-length run of `strata train` (label "slow"): the default command on
// Debian's Fashion-MNIST reaches 0.87 test accuracy.
//   ctest --test-dir build -L slow -R TrainDefaultRun
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace {

TEST(TrainDefaultRun, ReachesTheTestAccuracyTargetOnFashionMnist) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/setup.sh installs it)";
  }
  // No flags but --json: the default model, strategy, devices and epochs.
  const std::string cmd = std::string(STRATA_CLI_PATH) + " train --json 2>/dev/null </dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int raw = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j.at("strategy"), "mirrored");
  EXPECT_EQ(j.at("model"), "mlp");
  EXPECT_GE(j.at("test_accuracy").get<double>(), 0.87) << j;
  std::printf("default run: %s\n", out.c_str());
}

}  // namespace
