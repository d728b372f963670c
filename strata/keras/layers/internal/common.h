#pragma once
// Internal helpers shared by the layer implementations (not part of the
// public API, not installed): argument normalisation and the input checks Keras's InputSpec
// performs, with messages naming the layer and the shape.
//
//   LayerArgs args = layers::internal::layer_args(options);          // the trailing kwargs
//   std::string p = layers::internal::normalize_padding("SAME", who);  // "same"
//   auto [h, w] = layers::internal::normalize_pair(kernel_size, who, "kernel_size");

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "strata/core/tensor.h"
#include "strata/keras/activations.h"
#include "strata/keras/layer.h"

namespace strata::keras::layers::internal {

// The LayerArgs fields (input_shape, name, dtype, trainable) of an options struct.
template <typename Options>
LayerArgs layer_args(const Options& o) {
  return LayerArgs{
      .input_shape = o.input_shape, .name = o.name, .dtype = o.dtype, .trainable = o.trainable};
}

// "<Class> '<name>'", the prefix of every message about a layer.
std::string describe(const Layer& layer);

// Keras's conv_utils.normalize_padding: case-insensitive "valid" or "same"
// (or "causal" where allowed, i.e. Conv1D).
std::string normalize_padding(const std::string& padding, const std::string& who,
                              bool allow_causal = false);
// Keras's normalize_data_format: "" (the default image_data_format) or
// "channels_last"; "channels_first" is UnimplementedError (the kernels are NHWC only).
void check_channels_last(const std::string& data_format, const std::string& who);
// A 2-tuple argument: {n} means {n, n} (Keras's int form); every value must be > 0.
std::pair<int64_t, int64_t> normalize_pair(const std::vector<int64_t>& values,
                                           const std::string& who, const char* field);

// Keras's conv_utils.conv_output_length for one spatial dimension; -1 stays -1.
int64_t conv_output_length(int64_t input_length, int64_t filter_size, const std::string& padding,
                           int64_t stride, int64_t dilation = 1);

// InvalidArgumentError unless shape has rank == `rank` (rank >= min_rank when `at_least`).
void check_rank(const Layer& layer, const TensorShape& shape, int rank, bool at_least = false);
// InvalidArgumentError unless dimension `axis` of `shape` equals `expected`.
void check_dim(const Layer& layer, const TensorShape& shape, int axis, int64_t expected,
               const char* what);

// activations::resolve(spec), with the layer named in the error for an unknown name.
ActivationFunction activation_for(const Layer& layer, const ActivationSpec& spec);

// The "activation" value of a layer's config: the name ("linear" for none).
// UnimplementedError when the spec holds a function (it has no name to write).
std::string activation_config(const Layer& layer, const ActivationSpec& spec);

// Sets "kernel_regularizer", "bias_regularizer" and "activity_regularizer"
// (null or {"class_name", "config"}) in a layer's config.
void add_regularizer_config(nlohmann::json& config, const regularizers::RegularizerPtr& kernel,
                            const regularizers::RegularizerPtr& bias,
                            const regularizers::RegularizerPtr& activity);

// Floating inputs are cast to the layer's dtype (Keras's autocasting); other
// dtypes too for layers that, like Dense and Conv, compute in the layer's dtype.
Tensor cast_to(const Tensor& x, DType dtype);

}  // namespace strata::keras::layers::internal
