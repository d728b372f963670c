#include "strata/keras/tfjs/converters.h"

#include <bit>
#include <filesystem>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/base/coding.h"
#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/str_cat.h"
#include "strata/keras/model.h"
#include "strata/ops/math_ops.h"

namespace strata::keras::tfjs {
namespace {

// The Keras whose config format model.get_config() follows (tf.keras 2's
// functional "inbound_nodes" lists, Sequential's "layers").
constexpr const char* kKerasConfigVersion = "2.15.0";

// One weight's manifest dtype and its bytes, converted as the TensorFlow.js
// converter converts (float64 -> float32, int64 -> int32).
struct EncodedWeight {
  const char* dtype;
  std::string bytes;
};

EncodedWeight encode(const Variable& v) {
  const Tensor value = v.value();
  EncodedWeight out{"float32", {}};
  switch (value.dtype()) {
    case DType::float32:
    case DType::float64: {
      const std::vector<float> values =
          value.dtype() == DType::float32 ? value.to_vector<float>()
                                          : strata::cast(value, DType::float32).to_vector<float>();
      out.bytes.reserve(values.size() * 4);
      for (float f : values) coding::put_fixed32(out.bytes, std::bit_cast<uint32_t>(f));
      return out;
    }
    case DType::int32:
    case DType::int64: {
      out.dtype = "int32";
      const std::vector<int64_t> values = strata::cast(value, DType::int64).to_vector<int64_t>();
      out.bytes.reserve(values.size() * 4);
      for (int64_t x : values) {
        STRATA_CHECK_ARG(
            x >= std::numeric_limits<int32_t>::min() && x <= std::numeric_limits<int32_t>::max(),
            "save_keras_model: weight '", v.name(), "' holds ", x,
            ", which TensorFlow.js's int32 cannot hold");
        coding::put_fixed32(out.bytes, static_cast<uint32_t>(static_cast<int32_t>(x)));
      }
      return out;
    }
    case DType::bool_: {
      out.dtype = "bool";
      for (bool b : value.to_vector<bool>()) out.bytes.push_back(b ? '\1' : '\0');
      return out;
    }
    default: break;
  }
  STRATA_CHECK(UNIMPLEMENTED, false, "save_keras_model: weight '", v.name(), "' has dtype ",
               dtype_name(value.dtype()),
               "; TensorFlow.js weights are float32, int32 or bool (float64 and int64 are "
               "converted)");
  return out;
}

// Keras 2's training_config (what tfjs's converter copies from the HDF5 file).
nlohmann::json training_config(const Model& model) {
  if (!model.compiled()) return nullptr;
  nlohmann::json c;
  try {
    c = model.get_compile_config();
  } catch (const UnimplementedError&) {
    return nullptr;  // a compile state without a config: the topology alone
  }
  nlohmann::json optimizer_config = nullptr;
  if (c["optimizer"].is_object()) {
    optimizer_config = {{"class_name", c["optimizer"]["class_name"]},
                        {"config", c["optimizer"]["config"]}};
  }
  return {{"loss", c["loss"]},
          {"metrics", c["metrics"]},
          {"weighted_metrics", c["weighted_metrics"]},
          {"loss_weights", c["loss_weights"]},
          {"optimizer_config", optimizer_config}};
}

// A Sequential built by a call records its input shape only as
// "build_input_shape"; TensorFlow.js's Sequential builds from its first
// layer's "batch_input_shape", so that layer gets it (tf.keras 2 wrote it
// there too).
nlohmann::json model_config(const Model& model) {
  nlohmann::json config = model.get_config();
  if (model.class_name() == "Sequential" && config.contains("build_input_shape") &&
      config["layers"].is_array() && !config["layers"].empty()) {
    nlohmann::json& first = config["layers"][0];
    if (first["class_name"] != "InputLayer" && !first["config"].contains("batch_input_shape"))
      first["config"]["batch_input_shape"] = config["build_input_shape"];
  }
  return {{"class_name", model.class_name()}, {"config", config}};
}

}  // namespace

void save_keras_model(const Model& model, const std::string& artifacts_dir,
                      const SaveKerasModelOptions& options) {
  STRATA_CHECK_ARG(options.weight_shard_size_bytes > 0,
                   "save_keras_model: weight_shard_size_bytes must be > 0, got ",
                   options.weight_shard_size_bytes);
  STRATA_CHECK_ARG(
      !std::filesystem::exists(artifacts_dir) || std::filesystem::is_directory(artifacts_dir),
      "save_keras_model: path '", artifacts_dir, "' already exists as a file (not a directory)");
  nlohmann::json topology = {{"keras_version", kKerasConfigVersion},
                             {"backend", "tensorflow"},
                             {"model_config", model_config(model)}};
  nlohmann::json training = training_config(model);
  if (!training.is_null()) topology["training_config"] = training;

  std::string group;
  nlohmann::json entries = nlohmann::json::array();
  for (const Variable& v : model.weights()) {
    EncodedWeight w = encode(v);
    entries.push_back({{"name", v.name()}, {"shape", v.shape().dims()}, {"dtype", w.dtype}});
    group += w.bytes;
  }
  const uint64_t shard = uint64_t(options.weight_shard_size_bytes);
  const uint64_t num_shards = (group.size() + shard - 1) / shard;
  strata::make_dirs(artifacts_dir);
  nlohmann::json paths = nlohmann::json::array();
  for (uint64_t i = 0; i < num_shards; ++i) {
    const std::string name = str_cat("group1-shard", i + 1, "of", num_shards, ".bin");
    strata::write_file_atomically((std::filesystem::path(artifacts_dir) / name).string(),
                                  std::string_view(group).substr(i * shard, shard));
    paths.push_back(name);
  }
  nlohmann::json model_json = {
      {"format", "layers-model"},
      {"generatedBy", "Strata"},
      {"convertedBy", "Strata keras::tfjs::save_keras_model"},
      {"modelTopology", topology},
      {"weightsManifest", nlohmann::json::array({{{"paths", paths}, {"weights", entries}}})}};
  strata::write_file_atomically((std::filesystem::path(artifacts_dir) / "model.json").string(),
                                model_json.dump());
}

}  // namespace strata::keras::tfjs
