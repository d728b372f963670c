#pragma once
// tf.train.Example: building, serialising and parsing, with TensorFlow's
// protobuf wire format (docs/formats/example.md), and the parser beneath
// tf.io.parse_single_example / parse_example with FixedLenFeature and
// VarLenFeature specs.
//
// Results are typed but tensor-free (this layer knows bytes, not tensors): each
// ParsedFeature carries a dtype tag, one filled value vector and the shape.
// io::parse_single_example / io::parse_example, which return tensors as tf.io
// does, are declared in strata/data/example_tensors.h: the data layer is the
// first that knows both tf.Example and tensors.
//
//   using namespace strata::io;
//   Example ex;
//   ex.set_bytes_list("image", {raw_784_bytes}).set_int64_list("label", {7});
//   std::string bytes = ex.serialize();
//   ParsedFeatures f = parse_single_example_features(bytes, {
//       {"image", FixedLenFeature({}, FeatureDType::string)},
//       {"label", FixedLenFeature({}, FeatureDType::int64)},
//       {"tags", VarLenFeature(FeatureDType::string)}});
//   int64_t label = f.at("label").int64_values[0];

#include <concepts>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace strata::io {

// The value types a tf.train.Feature can hold (TF's DT_FLOAT, DT_INT64, DT_STRING).
enum class FeatureDType { float32, int64, string };

// "float", "int64", "string" as TensorFlow prints them in errors.
std::string_view feature_dtype_name(FeatureDType dtype) noexcept;

// One list of values of one dtype: exactly the vector matching `dtype` is used.
struct FeatureValues {
  FeatureDType dtype = FeatureDType::float32;
  std::vector<float> float_values;
  std::vector<int64_t> int64_values;
  std::vector<std::string> string_values;

  static FeatureValues of(std::vector<float> v);
  static FeatureValues of(std::vector<int64_t> v);
  static FeatureValues of(std::vector<std::string> v);
  // Number of values in the vector that `dtype` selects.
  size_t size() const noexcept;
  bool operator==(const FeatureValues&) const = default;
};

// A tf.train.Feature: one of BytesList / FloatList / Int64List, or none set
// (`kind` empty), which parsing treats as a missing feature.
struct Feature {
  std::optional<FeatureValues> kind;
  bool operator==(const Feature&) const = default;
};

// A tf.train.Example (its Features map). Value type; not thread-safe to mutate.
class Example {
 public:
  Example() = default;

  // Set (replace) the feature `name`. Return *this for chaining.
  Example& set_bytes_list(std::string name, std::vector<std::string> values);
  Example& set_float_list(std::string name, std::vector<float> values);
  Example& set_int64_list(std::string name, std::vector<int64_t> values);
  Example& set_feature(std::string name, Feature feature);

  // Features by name (sorted).
  const std::map<std::string, Feature>& features() const noexcept { return features_; }

  // Wire bytes of the Example; map entries are written in sorted key order, so
  // the bytes are deterministic.
  std::string serialize() const;
  // Parses wire bytes. DataLossError if they are not a valid tf.train.Example.
  static Example parse(std::string_view bytes);

  bool operator==(const Example&) const = default;

 private:
  std::map<std::string, Feature> features_;
};

// tf.io.FixedLenFeature(shape, dtype, default_value): the feature must hold
// exactly product(shape) values (row-major) unless missing, when default_value
// (which must hold product(shape) values of `dtype`) is used; without a default a
// missing feature is an error. All dims must be >= 0.
struct FixedLenFeature {
  std::vector<int64_t> shape;
  FeatureDType dtype = FeatureDType::float32;
  std::optional<FeatureValues> default_value;

  FixedLenFeature(std::vector<int64_t> feature_shape, FeatureDType feature_dtype,
                  std::optional<FeatureValues> feature_default = std::nullopt)
      : shape(std::move(feature_shape)),
        dtype(feature_dtype),
        default_value(std::move(feature_default)) {}
  // A tensor dtype, as TensorFlow's FixedLenFeature([784], tf.float32): any
  // type with a to_feature_dtype() found by argument-dependent lookup —
  // strata::DType gets one from strata/data/example_tensors.h (io itself does
  // not know tensors).
  template <typename D>
  requires requires(D d) {
    { to_feature_dtype(d) } -> std::same_as<FeatureDType>;
  }
  FixedLenFeature(std::vector<int64_t> feature_shape, D feature_dtype,
                  std::optional<FeatureValues> feature_default = std::nullopt)
      : FixedLenFeature(std::move(feature_shape), to_feature_dtype(feature_dtype),
                        std::move(feature_default)) {}
};

// tf.io.VarLenFeature(dtype): any number of values, returned as a sparse result.
struct VarLenFeature {
  FeatureDType dtype = FeatureDType::float32;
  explicit VarLenFeature(FeatureDType feature_dtype) : dtype(feature_dtype) {}
  template <typename D>
  requires requires(D d) {
    { to_feature_dtype(d) } -> std::same_as<FeatureDType>;
  }
  explicit VarLenFeature(D d) : dtype(to_feature_dtype(d)) {}
};

using FeatureSpec = std::variant<FixedLenFeature, VarLenFeature>;
using FeatureSpecs = std::map<std::string, FeatureSpec>;

// The parsed value of one feature.
//
// Dense (FixedLenFeature): `values` holds product(shape) values row-major;
// `shape` is the spec's shape, with the batch size prepended by
// parse_example_features.
//
// Sparse (VarLenFeature), as a tf.SparseTensor: `values` holds the nnz values,
// `indices` the nnz × rank coordinates row-major, and `shape` the dense shape.
// parse_single_example_features gives rank 1 (indices [i], shape [n]);
// parse_example_features gives rank 2 (indices [example, i], shape [batch, max n]).
struct ParsedFeature {
  bool sparse = false;
  std::vector<int64_t> shape;
  FeatureValues values;
  std::vector<int64_t> indices;  // sparse only
};

using ParsedFeatures = std::map<std::string, ParsedFeature>;

// The byte-level tf.io.parse_single_example. Throws InvalidArgumentError naming the feature when
// a required feature is missing, has the wrong type or the wrong number of
// values, when the spec is invalid (negative dim, default of the wrong size or
// dtype), or when `serialized` is not a valid Example. Features not in `specs`
// are ignored.
ParsedFeatures parse_single_example_features(std::string_view serialized,
                                             const FeatureSpecs& specs);

// The byte-level tf.io.parse_example over a batch: dense features get shape [batch] + shape,
// sparse ones rank-2 indices. Errors as parse_single_example_features, also naming the
// example's index in the batch.
ParsedFeatures parse_example_features(std::span<const std::string> serialized,
                                      const FeatureSpecs& specs);

}  // namespace strata::io
