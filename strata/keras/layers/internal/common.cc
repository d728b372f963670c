#include "strata/keras/layers/internal/common.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/ops/math_ops.h"

namespace strata::keras::layers::internal {

std::string describe(const Layer& layer) {
  return str_cat(layer.class_name(), " '", layer.name(), "'");
}

std::string normalize_padding(const std::string& padding, const std::string& who,
                              bool allow_causal) {
  std::string lower = padding;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  STRATA_CHECK_ARG(lower == "valid" || lower == "same" || (allow_causal && lower == "causal"), who,
                   ": expected padding \"valid\"",
                   allow_causal ? ", \"same\" or \"causal\"" : " or \"same\"", ", got \"", padding,
                   "\"");
  return lower;
}

void check_channels_last(const std::string& data_format, const std::string& who) {
  if (data_format.empty() || data_format == "channels_last") return;
  if (data_format == "channels_first") {
    throw UnimplementedError(
        str_cat(who,
                ": data_format \"channels_first\" is not supported (the kernels are NHWC "
                "only); use \"channels_last\""));
  }
  throw InvalidArgumentError(
      str_cat(who, ": expected data_format \"channels_last\" or \"channels_first\", got \"",
              data_format, "\""));
}

std::pair<int64_t, int64_t> normalize_pair(const std::vector<int64_t>& values,
                                           const std::string& who, const char* field) {
  STRATA_CHECK_ARG(values.size() == 1 || values.size() == 2, who, ": expected ", field,
                   " to have 1 or 2 values, got ", values);
  const std::pair<int64_t, int64_t> p{values[0], values.size() == 2 ? values[1] : values[0]};
  STRATA_CHECK_ARG(p.first > 0 && p.second > 0, who, ": expected ", field, " values > 0, got ",
                   values);
  return p;
}

int64_t conv_output_length(int64_t input_length, int64_t filter_size, const std::string& padding,
                           int64_t stride, int64_t dilation) {
  if (input_length < 0) return -1;
  const int64_t dilated = (filter_size - 1) * dilation + 1;
  const int64_t length = padding == "same" ? input_length : input_length - dilated + 1;
  // Ceiling division; a negative length (input smaller than the window) stays <= 0.
  return length <= 0 ? 0 : (length + stride - 1) / stride;
}

void check_rank(const Layer& layer, const TensorShape& shape, int rank, bool at_least) {
  STRATA_CHECK_ARG(
      shape.has_known_rank() && (at_least ? shape.rank() >= rank : shape.rank() == rank),
      describe(layer), ": expected input of rank ", at_least ? ">= " : "", rank, ", got shape ",
      shape);
}

void check_dim(const Layer& layer, const TensorShape& shape, int axis, int64_t expected,
               const char* what) {
  const int64_t actual = shape.dim(axis);
  STRATA_CHECK_ARG(actual == expected, describe(layer), ": expected ", what, " (axis ", axis,
                   ") of size ", expected, ", got shape ", shape);
}

void add_regularizer_config(nlohmann::json& config, const regularizers::RegularizerPtr& kernel,
                            const regularizers::RegularizerPtr& bias,
                            const regularizers::RegularizerPtr& activity) {
  auto one = [](const regularizers::RegularizerPtr& r) {
    return r ? regularizers::serialize(*r) : nlohmann::json(nullptr);
  };
  config["kernel_regularizer"] = one(kernel);
  config["bias_regularizer"] = one(bias);
  config["activity_regularizer"] = one(activity);
}

std::string activation_config(const Layer& layer, const ActivationSpec& spec) {
  STRATA_CHECK(UNIMPLEMENTED, spec.function() == nullptr, describe(layer),
               ": get_config cannot write an activation given as a function; give it by name");
  return spec.name().empty() ? "linear" : spec.name();
}

ActivationFunction activation_for(const Layer& layer, const ActivationSpec& spec) {
  try {
    return activations::resolve(spec);
  } catch (const InvalidArgumentError& e) {
    throw InvalidArgumentError(str_cat(describe(layer), ": ", e.what()));
  }
}

Tensor cast_to(const Tensor& x, DType dtype) {
  return x.dtype() == dtype ? x : strata::cast(x, dtype);
}

}  // namespace strata::keras::layers::internal
