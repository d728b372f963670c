#include "strata/keras/layers/reshaping.h"

#include <utility>

#include "strata/base/errors.h"
#include "strata/keras/layers/internal/common.h"
#include "strata/ops/array_ops.h"

namespace strata::keras::layers {
namespace {

// Product of dims[1:], or -1 when one of them is unknown.
int64_t per_example_elements(const TensorShape& shape) {
  int64_t n = 1;
  for (int i = 1; i < shape.rank(); ++i) {
    if (shape.dim(i) < 0) return -1;
    n *= shape.dim(i);
  }
  return n;
}

}  // namespace

FlattenLayer::FlattenLayer(const FlattenOptions& options)
    : Layer("Flatten", "flatten", internal::layer_args(options)) {
  internal::check_channels_last(options.data_format, internal::describe(*this));
}

TensorShape FlattenLayer::compute_output_shape(const TensorShape& input_shape) const {
  internal::check_rank(*this, input_shape, 1, /*at_least=*/true);
  return TensorShape{input_shape.dim(0), per_example_elements(input_shape)};
}

Tensor FlattenLayer::call(const Tensor& inputs, bool /*training*/) {
  const TensorShape out = compute_output_shape(inputs.shape());
  return strata::reshape(inputs, out.dims());
}

std::shared_ptr<FlattenLayer> Flatten(const FlattenOptions& options) {
  return std::make_shared<FlattenLayer>(options);
}

ReshapeLayer::ReshapeLayer(std::vector<int64_t> target_shape, const LayerArgs& args)
    : Layer("Reshape", "reshape", args), target_shape_(std::move(target_shape)) {
  int unknown = 0;
  for (int64_t d : target_shape_) {
    STRATA_CHECK_ARG(d > 0 || d == -1, internal::describe(*this),
                     ": expected target_shape entries > 0 or a single -1, got ", target_shape_);
    unknown += d == -1;
  }
  STRATA_CHECK_ARG(unknown <= 1, internal::describe(*this),
                   ": expected at most one -1 in target_shape, got ", target_shape_);
}

TensorShape ReshapeLayer::compute_output_shape(const TensorShape& input_shape) const {
  internal::check_rank(*this, input_shape, 1, /*at_least=*/true);
  std::vector<int64_t> out{input_shape.dim(0)};
  out.insert(out.end(), target_shape_.begin(), target_shape_.end());
  const int64_t n = per_example_elements(input_shape);
  if (n < 0) return TensorShape(out);  // unknown until called; a -1 stays -1
  int64_t known = 1;
  int unknown_at = -1;
  for (size_t i = 0; i < target_shape_.size(); ++i) {
    if (target_shape_[i] == -1) {
      unknown_at = static_cast<int>(i) + 1;
    } else {
      known *= target_shape_[i];
    }
  }
  const bool fits = unknown_at < 0 ? known == n : n % known == 0;
  STRATA_CHECK_ARG(fits, internal::describe(*this), ": expected an input whose ", n,
                   " elements per example fit target_shape ", target_shape_, ", got shape ",
                   input_shape);
  if (unknown_at >= 0) out[unknown_at] = n / known;
  return TensorShape(out);
}

Tensor ReshapeLayer::call(const Tensor& inputs, bool /*training*/) {
  return strata::reshape(inputs, compute_output_shape(inputs.shape()).dims());
}

std::shared_ptr<ReshapeLayer> Reshape(std::vector<int64_t> target_shape, const LayerArgs& args) {
  return std::make_shared<ReshapeLayer>(std::move(target_shape), args);
}

}  // namespace strata::keras::layers
