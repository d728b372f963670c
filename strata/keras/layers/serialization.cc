#include "strata/keras/layers/serialization.h"

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/keras/functional.h"
#include "strata/keras/layers/conv.h"
#include "strata/keras/layers/core.h"
#include "strata/keras/layers/dense.h"
#include "strata/keras/layers/input_layer.h"
#include "strata/keras/layers/merging.h"
#include "strata/keras/layers/normalization.h"
#include "strata/keras/layers/pooling.h"
#include "strata/keras/layers/preprocessing.h"
#include "strata/keras/layers/reshaping.h"
#include "strata/keras/sequential.h"

namespace strata::keras::layers {
namespace {

// Reads the keys of one layer's config, naming the class in every error.
class ConfigReader {
 public:
  ConfigReader(const std::string& class_name, const nlohmann::json& config)
      : class_name_(class_name), config_(config) {
    STRATA_CHECK_ARG(config.is_object(), "deserialize ", class_name,
                     ": expected a config object, got ", config.dump());
  }
  bool has(const char* key) const { return config_.contains(key) && !config_[key].is_null(); }
  template <typename T>
  T get(const char* key) const {
    STRATA_CHECK_ARG(config_.contains(key), "deserialize ", class_name_, ": the config has no \"",
                     key, "\"");
    try {
      return config_[key].get<T>();
    } catch (const nlohmann::json::exception&) {
      STRATA_CHECK_ARG(false, "deserialize ", class_name_, ": \"", key,
                       "\" has the wrong type: ", config_[key].dump());
      throw;
    }
  }
  template <typename T>
  T get_or(const char* key, T fallback) const {
    return has(key) ? get<T>(key) : fallback;
  }
  // A shape list whose nulls are -1.
  std::vector<int64_t> shape(const char* key) const {
    std::vector<int64_t> out;
    const nlohmann::json& v = config_[key];
    STRATA_CHECK_ARG(v.is_array(), "deserialize ", class_name_, ": \"", key,
                     "\" must be a list, got ", v.dump());
    for (const nlohmann::json& d : v) out.push_back(d.is_null() ? -1 : d.get<int64_t>());
    return out;
  }
  // The common kwargs: name, trainable, dtype and input_shape from batch_input_shape.
  template <typename Options>
  void fill_layer_args(Options& o) const {
    o.name = get_or<std::string>("name", "");
    o.trainable = get_or<bool>("trainable", true);
    if (has("dtype")) o.dtype = dtype_from_name(get<std::string>("dtype"));
    if (has("batch_input_shape")) {
      std::vector<int64_t> s = shape("batch_input_shape");
      STRATA_CHECK_ARG(!s.empty(), "deserialize ", class_name_,
                       ": batch_input_shape must include the batch dimension");
      o.input_shape = std::vector<int64_t>(s.begin() + 1, s.end());
    }
  }
  LayerArgs layer_args() const {
    LayerArgs args;
    fill_layer_args(args);
    return args;
  }

 private:
  std::string class_name_;
  const nlohmann::json& config_;
};

ActivationSpec activation_of(const ConfigReader& r) {
  return ActivationSpec(r.get_or<std::string>("activation", "linear"));
}

regularizers::RegularizerPtr regularizer_of(const nlohmann::json& c, const char* key) {
  if (!c.contains(key) || c[key].is_null()) return nullptr;
  return regularizers::deserialize(c[key]);
}

template <typename Options>
void fill_regularizers(Options& o, const nlohmann::json& c) {
  o.kernel_regularizer = regularizer_of(c, "kernel_regularizer");
  o.bias_regularizer = regularizer_of(c, "bias_regularizer");
  o.activity_regularizer = regularizer_of(c, "activity_regularizer");
}

// The classes the chain below makes.
bool is_builtin(const std::string& cls) {
  static const char* const kClasses[] = {
      "Functional",    "Model",        "Sequential",       "InputLayer",
      "Dense",         "Conv2D",       "Flatten",          "Dropout",
      "Activation",    "MaxPooling2D", "AveragePooling2D", "BatchNormalization",
      "Normalization", "Add",          "Subtract",         "Multiply",
      "Average",       "Maximum",      "Minimum",          "Concatenate",
      "Reshape"};
  for (const char* c : kClasses) {
    if (cls == c) return true;
  }
  return false;
}

}  // namespace

nlohmann::json serialize(const Layer& layer) {
  nlohmann::json out = {{"class_name", layer.class_name()}, {"config", layer.get_config()}};
  const std::string registered = saving::get_registered_name(layer.class_name());
  if (registered != layer.class_name()) out["registered_name"] = registered;
  return out;
}

LayerPtr deserialize(const nlohmann::json& config, const saving::CustomObjects& custom_objects) {
  STRATA_CHECK_ARG(config.is_object() && config.contains("class_name") &&
                       config["class_name"].is_string() && config.contains("config"),
                   "deserialize: expected {\"class_name\": ..., \"config\": ...}, got ",
                   config.dump());
  const std::string cls = config["class_name"].get<std::string>();
  const nlohmann::json& c = config["config"];
  const std::string registered_name =
      config.contains("registered_name") && config["registered_name"].is_string()
          ? config["registered_name"].get<std::string>()
          : std::string();
  if (auto factory = saving::internal::find_layer_factory(cls, registered_name, custom_objects,
                                                          is_builtin(cls))) {
    LayerPtr layer = (*factory)(c);
    STRATA_CHECK_ARG(layer != nullptr, "deserialize: the from_config registered for \"",
                     registered_name.empty() ? cls : registered_name, "\" returned nullptr");
    return layer;
  }
  const ConfigReader r(cls, c);
  if (cls == "Functional" || cls == "Model") return Model::from_config(c, custom_objects);
  if (cls == "Sequential") return SequentialModel::from_config(c, custom_objects);
  if (cls == "InputLayer") {
    std::vector<int64_t> s = r.shape("batch_input_shape");
    STRATA_CHECK_ARG(!s.empty(),
                     "deserialize InputLayer: batch_input_shape must include the "
                     "batch dimension");
    InputLayerOptions o;
    o.input_shape = std::vector<int64_t>(s.begin() + 1, s.end());
    if (s[0] > 0) o.batch_size = s[0];
    if (r.has("dtype")) o.dtype = dtype_from_name(r.get<std::string>("dtype"));
    o.name = r.get_or<std::string>("name", "");
    return InputLayer(o);
  }
  if (cls == "Dense") {
    DenseOptions o;
    o.activation = activation_of(r);
    o.use_bias = r.get_or<bool>("use_bias", true);
    fill_regularizers(o, c);
    r.fill_layer_args(o);
    return Dense(r.get<int64_t>("units"), o);
  }
  if (cls == "Conv2D") {
    Conv2DOptions o;
    o.strides = r.get_or<std::vector<int64_t>>("strides", {1, 1});
    o.padding = r.get_or<std::string>("padding", "valid");
    o.data_format = r.get_or<std::string>("data_format", "");
    o.dilation_rate = r.get_or<std::vector<int64_t>>("dilation_rate", {1, 1});
    o.groups = r.get_or<int64_t>("groups", 1);
    o.activation = activation_of(r);
    o.use_bias = r.get_or<bool>("use_bias", true);
    fill_regularizers(o, c);
    r.fill_layer_args(o);
    return Conv2D(r.get<int64_t>("filters"), r.get<std::vector<int64_t>>("kernel_size"), o);
  }
  if (cls == "Flatten") {
    FlattenOptions o;
    o.data_format = r.get_or<std::string>("data_format", "");
    r.fill_layer_args(o);
    return Flatten(o);
  }
  if (cls == "Reshape") {
    return Reshape(r.get<std::vector<int64_t>>("target_shape"), r.layer_args());
  }
  if (cls == "Dropout") {
    DropoutOptions o;
    if (r.has("noise_shape")) o.noise_shape = r.shape("noise_shape");
    if (r.has("seed")) o.seed = r.get<uint64_t>("seed");
    r.fill_layer_args(o);
    return Dropout(r.get<double>("rate"), o);
  }
  if (cls == "Activation") return Activation(activation_of(r), r.layer_args());
  if (cls == "MaxPooling2D" || cls == "AveragePooling2D") {
    Pooling2DOptions o;
    o.strides = r.get_or<std::vector<int64_t>>("strides", {});
    o.padding = r.get_or<std::string>("padding", "valid");
    o.data_format = r.get_or<std::string>("data_format", "");
    r.fill_layer_args(o);
    const auto pool = r.get_or<std::vector<int64_t>>("pool_size", {2, 2});
    return cls == "MaxPooling2D" ? MaxPooling2D(pool, o) : AveragePooling2D(pool, o);
  }
  if (cls == "Normalization") {
    NormalizationOptions o;
    if (c.contains("axis")) {
      if (c["axis"].is_null()) {
        o.axis = std::nullopt;
      } else if (c["axis"].is_number_integer()) {
        o.axis = std::vector<int64_t>{c["axis"].get<int64_t>()};
      } else {
        o.axis = r.get<std::vector<int64_t>>("axis");
      }
    }
    if (r.has("mean")) o.mean = r.get<std::vector<double>>("mean");
    if (r.has("variance")) o.variance = r.get<std::vector<double>>("variance");
    o.invert = r.get_or<bool>("invert", false);
    r.fill_layer_args(o);
    return Normalization(o);
  }
  if (cls == "BatchNormalization") {
    BatchNormalizationOptions o;
    if (r.has("axis")) {
      // tf.keras writes the axis as a list once the layer is built.
      if (c["axis"].is_array()) {
        const auto axes = r.get<std::vector<int64_t>>("axis");
        STRATA_CHECK(UNIMPLEMENTED, axes.size() == 1, "deserialize BatchNormalization: axis ",
                     c["axis"].dump(), " normalises over several axes; one axis is supported");
        o.axis = axes[0];
      } else {
        o.axis = r.get<int64_t>("axis");
      }
    }
    o.momentum = r.get_or<double>("momentum", 0.99);
    o.epsilon = r.get_or<double>("epsilon", 1e-3);
    o.center = r.get_or<bool>("center", true);
    o.scale = r.get_or<bool>("scale", true);
    o.synchronized = r.get_or<bool>("synchronized", false);
    r.fill_layer_args(o);
    return BatchNormalization(o);
  }
  if (cls == "StringLookup") {
    // Keras's arguments Strata does not support must have their defaults.
    auto only = [&](const char* key, const nlohmann::json& supported) {
      const bool fine =
          !c.contains(key) || c[key] == supported || (supported.is_null() && c[key].is_null());
      STRATA_CHECK(UNIMPLEMENTED, fine, "deserialize StringLookup: \"", key,
                   "\" = ", c.contains(key) ? c[key].dump() : std::string(),
                   " is not supported (only ", supported.dump(), ")");
    };
    only("output_mode", "int");
    only("mask_token", nullptr);
    only("sparse", false);
    only("pad_to_max_tokens", false);
    only("encoding", "utf-8");
    StringLookupOptions o;
    if (r.has("max_tokens")) o.max_tokens = r.get<int64_t>("max_tokens");
    o.num_oov_indices = r.get_or<int64_t>("num_oov_indices", 1);
    o.oov_token = r.get_or<std::string>("oov_token", "[UNK]");
    if (r.has("vocabulary")) o.vocabulary = r.get<std::vector<std::string>>("vocabulary");
    o.invert = r.get_or<bool>("invert", false);
    r.fill_layer_args(o);
    return StringLookup(o);
  }
  if (cls == "Add") return Add(r.layer_args());
  if (cls == "Subtract") return Subtract(r.layer_args());
  if (cls == "Multiply") return Multiply(r.layer_args());
  if (cls == "Average") return Average(r.layer_args());
  if (cls == "Maximum") return Maximum(r.layer_args());
  if (cls == "Minimum") return Minimum(r.layer_args());
  if (cls == "Concatenate") {
    ConcatenateOptions o;
    o.axis = r.get_or<int>("axis", -1);
    r.fill_layer_args(o);
    return Concatenate(o);
  }
  STRATA_CHECK(
      UNIMPLEMENTED, false, "deserialize: unknown layer class \"", cls, "\"",
      registered_name.empty() ? std::string() : " (registered name \"" + registered_name + "\")",
      ": Strata cannot make it from a config; register it with "
      "keras::saving::register_keras_serializable or pass it in custom_objects");
  return nullptr;
}

nlohmann::json config_shape(std::span<const int64_t> dims, bool with_batch) {
  nlohmann::json shape = nlohmann::json::array();
  if (with_batch) shape.push_back(nullptr);
  for (int64_t d : dims) {
    if (d < 0) {
      shape.push_back(nullptr);
    } else {
      shape.push_back(d);
    }
  }
  return shape;
}

}  // namespace strata::keras::layers
