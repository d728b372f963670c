// keras::tfjs::save_keras_model checked against TensorFlow.js itself: Strata
// trains a model, exports it, and TensorFlow.js (npm @tensorflow/tfjs, CPU
// backend, under Node.js) loads it with tf.loadLayersModel and predicts; the
// predictions agree within 1e-5.
//
// Python/JavaScript equivalent:
//   model.fit(x, y)                                   # tf.keras
//   tfjs.converters.save_keras_model(model, dir)      # tensorflowjs
//   const m = await tf.loadLayersModel(handler);      # TensorFlow.js
//   m.predict(x)
//
// Needs node and TensorFlow.js: the test looks for the package in
// $STRATA_TFJS_DIR, else ${XDG_CACHE_HOME:-~/.cache}/strata/tfjs-4.22.0
// (scripts/install_tfjs.sh puts it there), and skips, saying so, when node or
// the package is missing.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/base/file.h"
#include "strata/core/random.h"
#include "strata/keras/keras.h"
#include "strata/ops/random_ops.h"
#include "strata/testing/files.h"

namespace strata::keras {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> find_node() {
  if (const char* n = std::getenv("STRATA_NODE"); n != nullptr && *n) return std::string(n);
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / "node";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return std::nullopt;
}

// The directory whose node_modules holds @tensorflow/tfjs.
std::optional<std::string> find_tfjs() {
  std::vector<fs::path> candidates;
  if (const char* d = std::getenv("STRATA_TFJS_DIR"); d != nullptr && *d)
    candidates.emplace_back(d);
  if (const char* c = std::getenv("XDG_CACHE_HOME"); c != nullptr && *c)
    candidates.push_back(fs::path(c) / "strata" / "tfjs-4.22.0");
  if (const char* h = std::getenv("HOME"); h != nullptr && *h)
    candidates.push_back(fs::path(h) / ".cache" / "strata" / "tfjs-4.22.0");
  for (const fs::path& c : candidates) {
    if (fs::exists(c / "node_modules" / "@tensorflow" / "tfjs" / "package.json")) return c.string();
  }
  return std::nullopt;
}

class TensorFlowJsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reset_uids_for_testing();
    node_ = find_node();
    tfjs_ = find_tfjs();
    if (!node_) GTEST_SKIP() << "node (Node.js) not found in PATH or $STRATA_NODE";
    if (!tfjs_) {
      GTEST_SKIP() << "TensorFlow.js (npm @tensorflow/tfjs) not found in $STRATA_TFJS_DIR or "
                      "~/.cache/strata/tfjs-4.22.0; run scripts/install_tfjs.sh";
    }
  }

  // Runs predict.js on the exported model; returns its output.json.
  nlohmann::json predict_in_tfjs(const std::string& model_dir, const Tensor& x) {
    const std::string in = dir_.file("input.json"), out = dir_.file("output.json"),
                      err = dir_.file("stderr.txt");
    write_file_atomically(
        in, nlohmann::json{{"shape", x.shape().dims()}, {"values", x.to_vector<float>()}}.dump());
    const std::string script = std::string(STRATA_SOURCE_DIR) + "/tests/tfjs/predict.js";
    const std::string node_path = "NODE_PATH=" + (fs::path(*tfjs_) / "node_modules").string();
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) ::dup2(fd, 2);
      const char* argv[] = {node_->c_str(), script.c_str(), model_dir.c_str(),
                            in.c_str(),     out.c_str(),    nullptr};
      const char* envp[] = {node_path.c_str(), nullptr};
      ::execve(node_->c_str(), const_cast<char* const*>(argv), const_cast<char* const*>(envp));
      ::_exit(127);
    }
    EXPECT_GT(pid, 0);
    // TensorFlow.js loads in about a second; give it two minutes.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "node predict.js did not finish within 120 s";
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ADD_FAILURE() << "node predict.js failed (status " << status << "):\n" << read_file(err);
      return nullptr;
    }
    return nlohmann::json::parse(read_file(out));
  }

  // Exports `model`, predicts `x` in TensorFlow.js and compares with Strata.
  void expect_tfjs_predicts_the_same(const Model& model, const Tensor& x,
                                     const std::vector<std::string>& tfjs_layers) {
    const std::string dir = dir_.file("model_" + model.name());
    tfjs::save_keras_model(model, dir);
    const nlohmann::json got = predict_in_tfjs(dir, x);
    ASSERT_FALSE(got.is_null());
    EXPECT_EQ(got["backend"], "cpu");
    EXPECT_EQ(got["layers"], nlohmann::json(tfjs_layers));
    const Tensor want = const_cast<Model&>(model).predict(x);
    EXPECT_EQ(got["shape"], nlohmann::json(want.shape().dims()));
    const std::vector<float> w = want.to_vector<float>();
    for (const auto& v : got["values"]) {
      // JSON.stringify writes NaN and infinities as null.
      ASSERT_TRUE(v.is_number()) << "TensorFlow.js predicted a non-finite value: " << got.dump()
                                 << "\nStrata: " << want;
    }
    const std::vector<double> g = got["values"].get<std::vector<double>>();
    ASSERT_EQ(g.size(), w.size());
    double worst = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      const double diff = std::abs(g[i] - double(w[i]));
      worst = std::max(worst, diff);
      EXPECT_LE(diff, 1e-5 * std::max(1.0, std::abs(double(w[i])))) << "output " << i;
    }
    std::cout << model.name() << ": " << w.size() << " outputs, TensorFlow.js "
              << got["version"].get<std::string>() << ", largest difference " << worst << "\n";
  }

  std::optional<std::string> node_, tfjs_;
  strata::testing::TempDir dir_{"strata_tfjs_node"};
};

TEST_F(TensorFlowJsTest, TrainedSequentialCnnPredictsTheSameInTensorFlowJs) {
  // model = tf.keras.Sequential([Conv2D(6, 3, activation="relu", input_shape=(8, 8, 2)),
  //     BatchNormalization(), MaxPooling2D(2), Dropout(0.25), Flatten(), Dense(16),
  //     Activation("tanh"), Dense(3), Activation("softmax")])
  auto model =
      Sequential({layers::Conv2D(6, {3, 3}, {.activation = "relu", .input_shape = {8, 8, 2}}),
                  layers::BatchNormalization(), layers::MaxPooling2D({2, 2}), layers::Dropout(0.25),
                  layers::Flatten(), layers::Dense(16), layers::Activation("tanh"),
                  layers::Dense(3), layers::Activation("softmax")});
  model->compile({.optimizer = optimizers::Adam({.learning_rate = 0.01}),
                  .loss = "sparse_categorical_crossentropy",
                  .metrics = {"accuracy"}});
  const Tensor x = strata::random::uniform({32, 8, 8, 2}, {.seed = 21});
  const Tensor y = strata::random::uniform_int({32}, 0, 3, {.seed = 22});
  // Training moves the BatchNormalization statistics away from 0 and 1.
  model->fit(x, y, {.batch_size = 8, .epochs = 3, .verbose = 0});
  expect_tfjs_predicts_the_same(
      *model, strata::random::uniform({10, 8, 8, 2}, {.seed = 23}),
      {"InputLayer", "Conv2D", "BatchNormalization", "MaxPooling2D", "Dropout", "Flatten", "Dense",
       "Activation", "Dense", "Activation"});
}

TEST_F(TensorFlowJsTest, TrainedFunctionalModelPredictsTheSameInTensorFlowJs) {
  // inputs = tf.keras.Input((6, 6, 1))
  // c = Conv2D(4, 3, padding="same", activation="relu")(inputs)
  // p = MaxPooling2D(2)(BatchNormalization()(c)); f = Flatten()(Dropout(0.5)(p))
  // out = Dense(2)(Activation("relu")(Dense(8)(f)))
  // tf.random.set_seed(5): the initial weights are the same every run (with
  // some unseeded draws, SGD with momentum on this tiny model diverges).
  strata::random::set_seed(5);
  KerasTensor inputs = Input({6, 6, 1});
  KerasTensor c = (*layers::Conv2D(4, {3, 3}, {.padding = "same", .activation = "relu"}))(inputs);
  KerasTensor p = (*layers::MaxPooling2D({2, 2}))((*layers::BatchNormalization())(c));
  KerasTensor f = (*layers::Flatten())((*layers::Dropout(0.5))(p));
  KerasTensor h = (*layers::Activation("relu"))((*layers::Dense(8))(f));
  auto model = models::Model(inputs, (*layers::Dense(2))(h));
  model->compile(
      {.optimizer = optimizers::SGD({.learning_rate = 0.02, .momentum = 0.9}), .loss = "mse"});
  const Tensor x = strata::random::uniform({24, 6, 6, 1}, {.seed = 31});
  const Tensor y = strata::random::uniform({24, 2}, {.seed = 32});
  model->fit(x, y, {.batch_size = 6, .epochs = 3, .verbose = 0});
  expect_tfjs_predicts_the_same(*model, strata::random::uniform({7, 6, 6, 1}, {.seed = 33}),
                                {"InputLayer", "Conv2D", "BatchNormalization", "MaxPooling2D",
                                 "Dropout", "Flatten", "Dense", "Activation", "Dense"});
}

TEST_F(TensorFlowJsTest, SequentialBuiltByItsFirstBatchLoadsInTensorFlowJs) {
  // model = tf.keras.Sequential([Dense(5, activation="relu"), Dropout(0.1), Dense(1)])
  // model.fit(x, y)   # built by the first batch: no input_shape anywhere
  auto model = Sequential(
      {layers::Dense(5, {.activation = "relu"}), layers::Dropout(0.1), layers::Dense(1)});
  model->compile({.optimizer = "adam", .loss = "mse"});
  const Tensor x = strata::random::uniform({16, 3}, {.seed = 41});
  const Tensor y = strata::random::uniform({16, 1}, {.seed = 42});
  model->fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0});
  ASSERT_TRUE(model->get_config().contains("build_input_shape"));
  expect_tfjs_predicts_the_same(*model, strata::random::uniform({6, 3}, {.seed = 43}),
                                {"Dense", "Dropout", "Dense"});
}

}  // namespace
}  // namespace strata::keras
