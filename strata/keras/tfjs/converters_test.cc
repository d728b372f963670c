// keras::tfjs::save_keras_model: the files TensorFlow.js's converter writes
// (tests/tfjs/ loads them in TensorFlow.js itself).
#include "strata/keras/tfjs/converters.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "strata/base/coding.h"
#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/keras/layers/layers.h"
#include "strata/keras/sequential.h"
#include "strata/testing/files.h"

namespace strata::keras {
namespace {

namespace fs = std::filesystem;

class TfjsConverterTest : public ::testing::Test {
 protected:
  void SetUp() override { reset_uids_for_testing(); }
  strata::testing::TempDir dir_{"strata_tfjs"};
};

std::vector<float> read_floats(const std::string& bytes) {
  std::vector<float> out;
  for (size_t i = 0; i + 4 <= bytes.size(); i += 4)
    out.push_back(std::bit_cast<float>(coding::decode_fixed32(bytes.data() + i)));
  return out;
}

TEST_F(TfjsConverterTest, WritesModelJsonAndOneShardAsTheConverterDoes) {
  // tfjs.converters.save_keras_model(model, dir)
  auto model = Sequential({layers::Dense(3, {.activation = "relu", .input_shape = {4}}),
                           layers::BatchNormalization(), layers::Dense(2)});
  model->compile({.optimizer = "adam", .loss = "mse"});
  const std::string dir = dir_.file("web");
  tfjs::save_keras_model(*model, dir);

  const nlohmann::json j = nlohmann::json::parse(strata::read_file(dir + "/model.json"));
  EXPECT_EQ(j["format"], "layers-model");
  EXPECT_TRUE(j["generatedBy"].is_string());
  EXPECT_TRUE(j["convertedBy"].is_string());
  EXPECT_EQ(j["modelTopology"]["model_config"]["class_name"], "Sequential");
  EXPECT_EQ(j["modelTopology"]["model_config"]["config"], model->get_config());
  EXPECT_EQ(j["modelTopology"]["backend"], "tensorflow");
  EXPECT_EQ(j["modelTopology"]["training_config"]["loss"], "mse");
  EXPECT_EQ(j["modelTopology"]["training_config"]["optimizer_config"]["class_name"], "Adam");
  ASSERT_EQ(j["weightsManifest"].size(), 1u);
  const nlohmann::json& group = j["weightsManifest"][0];
  EXPECT_EQ(group["paths"], nlohmann::json::parse(R"(["group1-shard1of1.bin"])"));
  const std::vector<Variable> weights = model->weights();
  ASSERT_EQ(group["weights"].size(), weights.size());
  std::vector<float> expected;
  for (size_t i = 0; i < weights.size(); ++i) {
    EXPECT_EQ(group["weights"][i]["name"], weights[i].name());
    EXPECT_EQ(group["weights"][i]["shape"], nlohmann::json(weights[i].shape().dims()));
    EXPECT_EQ(group["weights"][i]["dtype"], "float32");
    for (float f : weights[i].value().to_vector<float>()) expected.push_back(f);
  }
  // Trainable weights first, then BatchNormalization's moving statistics.
  EXPECT_EQ(group["weights"][0]["name"], "dense/kernel");
  EXPECT_EQ(group["weights"][6]["name"], "batch_normalization/moving_mean");
  EXPECT_EQ(read_floats(strata::read_file(dir + "/group1-shard1of1.bin")), expected);
  // Nothing else in the directory (no temporary files).
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2);
}

TEST_F(TfjsConverterTest, CutsTheWeightBytesIntoShardsOfTheGivenSize) {
  // 4*50 + 50 = 250 floats = 1000 bytes -> shards of 384, 384, 232 bytes.
  auto model = Sequential({layers::Dense(50, {.input_shape = {4}})});
  const std::string dir = dir_.file("sharded");
  tfjs::save_keras_model(*model, dir, {.weight_shard_size_bytes = 384});
  const nlohmann::json j = nlohmann::json::parse(strata::read_file(dir + "/model.json"));
  EXPECT_EQ(j["weightsManifest"][0]["paths"],
            nlohmann::json::parse(
                R"(["group1-shard1of3.bin", "group1-shard2of3.bin", "group1-shard3of3.bin"])"));
  std::string all;
  for (int i = 1; i <= 3; ++i) {
    const std::string shard =
        strata::read_file(dir + "/group1-shard" + std::to_string(i) + "of3.bin");
    EXPECT_EQ(shard.size(), i < 3 ? 384u : 232u);
    all += shard;
  }
  std::vector<float> expected = model->weights()[0].value().to_vector<float>();
  for (float f : model->weights()[1].value().to_vector<float>()) expected.push_back(f);
  EXPECT_EQ(read_floats(all), expected);
}

TEST_F(TfjsConverterTest, Float64WeightsAreWrittenAsFloat32) {
  auto model = Sequential({layers::Dense(2, {.input_shape = {3}, .dtype = DType::float64})});
  const std::string dir = dir_.file("f64");
  tfjs::save_keras_model(*model, dir);
  const nlohmann::json j = nlohmann::json::parse(strata::read_file(dir + "/model.json"));
  EXPECT_EQ(j["weightsManifest"][0]["weights"][0]["dtype"], "float32");
  std::vector<float> expected;
  for (double d : model->weights()[0].value().to_vector<double>()) expected.push_back(float(d));
  const std::vector<float> got = read_floats(strata::read_file(dir + "/group1-shard1of1.bin"));
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 6), expected);
}

TEST_F(TfjsConverterTest, RefusesAFileAsTheDirectoryAndABadShardSize) {
  auto model = Sequential({layers::Dense(2, {.input_shape = {3}})});
  strata::write_file_atomically(dir_.file("plain"), "x");
  EXPECT_THROW(tfjs::save_keras_model(*model, dir_.file("plain")), InvalidArgumentError);
  EXPECT_THROW(tfjs::save_keras_model(*model, dir_.file("d"), {.weight_shard_size_bytes = 0}),
               InvalidArgumentError);
}

}  // namespace
}  // namespace strata::keras
