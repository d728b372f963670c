#pragma once
// tf.io.parse_single_example / tf.io.parse_example returning tensors: the
// bridge between the io layer's tf.Example parser (which knows no tensors,
// io::parse_single_example_features) and tensors. The functions are in
// namespace strata::io, as TensorFlow's are in tf.io, but live in the data
// layer, the first layer that knows both tf.Example and tensors (the io layer
// depends on base only).
//
//   const strata::io::FeatureSpecs specs = {
//       {"image", strata::io::FixedLenFeature({784}, strata::float32)},
//       {"label", strata::io::FixedLenFeature({}, strata::int64)}};
//   std::map<std::string, Tensor> one = strata::io::parse_single_example(record, specs);
//   one["image"].shape();                              // (784,)
//   auto batch = strata::io::parse_example(records, specs);   // records: a [n] string tensor
//   batch["label"].shape();                            // (n,)
//   ds.map([&](const Tensor& r) { return strata::io::parse_single_example(r, specs); });
//
// Dense (FixedLenFeature) features become tensors of the spec's shape (with the
// batch dimension first for parse_example) and dtype float32, int64 or string.
// Sparse (VarLenFeature) features become three tensors, as a tf.SparseTensor's
// parts: "<name>/indices" (int64 [nnz, rank]), "<name>/values" and
// "<name>/dense_shape" (int64 [rank]). Errors are the parser's
// (InvalidArgumentError naming the feature); a serialized argument that is not a
// string tensor of the right rank is InvalidArgumentError. Pure functions.

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

namespace io {

// The tensors of parsed features (the layout above).
std::map<std::string, Tensor> to_tensors(const ParsedFeatures& features);
// `serialized`: one serialized tf.Example (bytes, or a scalar string tensor).
std::map<std::string, Tensor> parse_single_example(std::string_view serialized,
                                                   const FeatureSpecs& specs);
std::map<std::string, Tensor> parse_single_example(const Tensor& serialized,
                                                   const FeatureSpecs& specs);
// `serialized`: a [batch] string tensor of serialized tf.Examples.
std::map<std::string, Tensor> parse_example(const Tensor& serialized, const FeatureSpecs& specs);

}  // namespace io
}  // namespace strata
