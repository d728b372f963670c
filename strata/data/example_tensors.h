#pragma once
// tf.io.parse_single_example / parse_example returning tensors: the bridge
// between the io layer's tf.Example parser (which knows no tensors) and tensors.
//
//   const strata::io::FeatureSpecs specs = {
//       {"image", strata::io::FixedLenFeature({784}, strata::float32)},
//       {"label", strata::io::FixedLenFeature({}, strata::int64)}};
//   std::map<std::string, Tensor> one = strata::data::parse_single_example(record, specs);
//   one["image"].shape();                              // (784,)
//   auto batch = strata::data::parse_example(records, specs);   // records: a [n] string tensor
//   batch["label"].shape();                            // (n,)
//
// Dense (FixedLenFeature) features become tensors of the spec's shape (with the
// batch dimension first for parse_example) and dtype float32, int64 or string.
// Sparse (VarLenFeature) features become three tensors, as a tf.SparseTensor's
// parts: "<name>/indices" (int64 [nnz, rank]), "<name>/values" and
// "<name>/dense_shape" (int64 [rank]). Errors are the parser's
// (InvalidArgumentError naming the feature); a serialized argument that is not a
// string tensor of the right rank is InvalidArgumentError. Pure functions.
// Call them qualified (data::parse_example): the io layer's functions of the
// same name, which return ParsedFeatures, are found by argument-dependent lookup.

#include <map>
#include <string>
#include <string_view>

#include "strata/core/dtype.h"
#include "strata/core/tensor.h"
#include "strata/io/example.h"

namespace strata {

// The io feature dtype of a tensor dtype (float32, int64, string); other
// dtypes are InvalidArgumentError, as tf.io's "Unsupported dtype".
io::FeatureDType to_feature_dtype(DType dtype);

namespace data {

std::map<std::string, Tensor> to_tensors(const io::ParsedFeatures& features);
// `serialized`: one serialized tf.Example (bytes, or a scalar string tensor).
std::map<std::string, Tensor> parse_single_example(std::string_view serialized,
                                                   const io::FeatureSpecs& specs);
std::map<std::string, Tensor> parse_single_example(const Tensor& serialized,
                                                   const io::FeatureSpecs& specs);
// `serialized`: a [batch] string tensor of serialized tf.Examples.
std::map<std::string, Tensor> parse_example(const Tensor& serialized,
                                            const io::FeatureSpecs& specs);

}  // namespace data
}  // namespace strata
