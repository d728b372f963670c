#include "strata/data/example_tensors.h"

#include <vector>

#include "strata/base/errors.h"

namespace strata {

io::FeatureDType to_feature_dtype(DType dtype) {
  switch (dtype) {
    case DType::float32: return io::FeatureDType::float32;
    case DType::int64: return io::FeatureDType::int64;
    case DType::string: return io::FeatureDType::string;
    default:
      throw InvalidArgumentError(
          str_cat("tf.Example features hold float32, int64 or string values; got dtype ",
                  dtype_name(dtype)));
  }
}

namespace io {
namespace {

Tensor values_tensor(const FeatureValues& v, const TensorShape& shape) {
  switch (v.dtype) {
    case FeatureDType::float32: return constant(v.float_values, shape);
    case FeatureDType::int64: return constant(v.int64_values, shape);
    case FeatureDType::string: return constant(v.string_values, shape);
  }
  STRATA_INTERNAL_CHECK(false, "unknown FeatureDType");
  return Tensor();
}

}  // namespace

std::map<std::string, Tensor> to_tensors(const ParsedFeatures& features) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, f] : features) {
    if (!f.sparse) {
      out.emplace(name, values_tensor(f.values, TensorShape(f.shape)));
      continue;
    }
    const auto nnz = static_cast<int64_t>(f.values.size());
    const auto rank = static_cast<int64_t>(f.shape.size());
    out.emplace(name + "/indices", constant(f.indices, TensorShape({nnz, rank})));
    out.emplace(name + "/values", values_tensor(f.values, TensorShape({nnz})));
    out.emplace(name + "/dense_shape", constant(f.shape, TensorShape({rank})));
  }
  return out;
}

std::map<std::string, Tensor> parse_single_example(std::string_view serialized,
                                                   const FeatureSpecs& specs) {
  return to_tensors(parse_single_example_features(serialized, specs));
}

std::map<std::string, Tensor> parse_single_example(const Tensor& serialized,
                                                   const FeatureSpecs& specs) {
  STRATA_CHECK_ARG(
      serialized.defined() && serialized.dtype() == DType::string && serialized.shape().rank() == 0,
      "parse_single_example: expected a scalar string tensor, got ",
      serialized.defined() ? serialized.to_string() : std::string("an empty tensor"));
  const std::string bytes = serialized.item<std::string>();
  return parse_single_example(std::string_view(bytes), specs);
}

std::map<std::string, Tensor> parse_example(const Tensor& serialized, const FeatureSpecs& specs) {
  STRATA_CHECK_ARG(
      serialized.defined() && serialized.dtype() == DType::string && serialized.shape().rank() == 1,
      "parse_example: expected a [batch] string tensor, got ",
      serialized.defined() ? serialized.to_string() : std::string("an empty tensor"));
  const std::vector<std::string> records = serialized.to_vector<std::string>();
  return to_tensors(parse_example_features(records, specs));
}

}  // namespace io
}  // namespace strata
