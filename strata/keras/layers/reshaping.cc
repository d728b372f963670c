#include "strata/keras/layers/reshaping.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/keras/layers/internal/common.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"

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

// {n}, {h, w} or {top, bottom, left, right}, as in ZeroPadding2D / Cropping2D.
std::vector<int64_t> four_sides(const std::vector<int64_t>& v, const std::string& who,
                                const char* field) {
  std::vector<int64_t> sides;
  if (v.size() == 1) sides = {v[0], v[0], v[0], v[0]};
  if (v.size() == 2) sides = {v[0], v[0], v[1], v[1]};
  if (v.size() == 4) sides = v;
  STRATA_CHECK_ARG(!sides.empty(), who, ": expected ", field,
                   " as {n}, {rows, cols} or {top, bottom, left, right}, got ", v);
  for (int64_t d : sides) {
    STRATA_CHECK_ARG(d >= 0, who, ": expected ", field, " entries >= 0, got ", v);
  }
  return sides;
}

// d + delta, keeping an unknown (-1) dimension unknown.
int64_t grow(int64_t d, int64_t delta) { return d < 0 ? -1 : d + delta; }

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

nlohmann::json FlattenLayer::get_config() const {
  nlohmann::json config = base_config();
  config["data_format"] = "channels_last";
  return config;
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

nlohmann::json ReshapeLayer::get_config() const {
  nlohmann::json config = base_config();
  config["target_shape"] = target_shape_;
  return config;
}

std::shared_ptr<ReshapeLayer> Reshape(std::vector<int64_t> target_shape, const LayerArgs& args) {
  return std::make_shared<ReshapeLayer>(std::move(target_shape), args);
}

ZeroPadding2DLayer::ZeroPadding2DLayer(const std::vector<int64_t>& padding,
                                       const Image2DOptions& options)
    : Layer("ZeroPadding2D", "zero_padding2d", internal::layer_args(options)) {
  const std::string who = internal::describe(*this);
  internal::check_channels_last(options.data_format, who);
  const std::vector<int64_t> sides = four_sides(padding, who, "padding");
  top_ = sides[0], bottom_ = sides[1], left_ = sides[2], right_ = sides[3];
}

TensorShape ZeroPadding2DLayer::compute_output_shape(const TensorShape& input_shape) const {
  internal::check_rank(*this, input_shape, 4);
  return TensorShape{input_shape.dim(0), grow(input_shape.dim(1), top_ + bottom_),
                     grow(input_shape.dim(2), left_ + right_), input_shape.dim(3)};
}

Tensor ZeroPadding2DLayer::call(const Tensor& inputs, bool /*training*/) {
  compute_output_shape(inputs.shape());
  return strata::pad(inputs, {{0, 0}, {top_, bottom_}, {left_, right_}, {0, 0}});
}

std::shared_ptr<ZeroPadding2DLayer> ZeroPadding2D(const std::vector<int64_t>& padding,
                                                  const Image2DOptions& options) {
  return std::make_shared<ZeroPadding2DLayer>(padding, options);
}

Cropping2DLayer::Cropping2DLayer(const std::vector<int64_t>& cropping,
                                 const Image2DOptions& options)
    : Layer("Cropping2D", "cropping2d", internal::layer_args(options)) {
  const std::string who = internal::describe(*this);
  internal::check_channels_last(options.data_format, who);
  const std::vector<int64_t> sides = four_sides(cropping, who, "cropping");
  top_ = sides[0], bottom_ = sides[1], left_ = sides[2], right_ = sides[3];
}

TensorShape Cropping2DLayer::compute_output_shape(const TensorShape& input_shape) const {
  internal::check_rank(*this, input_shape, 4);
  const int64_t h = grow(input_shape.dim(1), -(top_ + bottom_));
  const int64_t w = grow(input_shape.dim(2), -(left_ + right_));
  STRATA_CHECK_ARG((input_shape.dim(1) < 0 || h > 0) && (input_shape.dim(2) < 0 || w > 0),
                   internal::describe(*this), ": expected an input larger than the cropping [",
                   top_, ", ", bottom_, ", ", left_, ", ", right_, "], got shape ", input_shape);
  return TensorShape{input_shape.dim(0), h, w, input_shape.dim(3)};
}

Tensor Cropping2DLayer::call(const Tensor& inputs, bool /*training*/) {
  const TensorShape out = compute_output_shape(inputs.shape());
  return strata::slice(inputs, {0, top_, left_, 0}, {-1, out.dim(1), out.dim(2), -1});
}

std::shared_ptr<Cropping2DLayer> Cropping2D(const std::vector<int64_t>& cropping,
                                            const Image2DOptions& options) {
  return std::make_shared<Cropping2DLayer>(cropping, options);
}

UpSampling2DLayer::UpSampling2DLayer(const std::vector<int64_t>& size,
                                     const UpSampling2DOptions& options)
    : Layer("UpSampling2D", "up_sampling2d", internal::layer_args(options)) {
  const std::string who = internal::describe(*this);
  internal::check_channels_last(options.data_format, who);
  std::tie(rows_, cols_) = internal::normalize_pair(size, who, "size");
  if (options.interpolation == "bilinear") {
    throw UnimplementedError(
        str_cat(who, ": interpolation \"bilinear\" is not supported; use \"nearest\""));
  }
  STRATA_CHECK_ARG(options.interpolation == "nearest", who,
                   ": expected interpolation \"nearest\" or \"bilinear\", got \"",
                   options.interpolation, "\"");
}

TensorShape UpSampling2DLayer::compute_output_shape(const TensorShape& input_shape) const {
  internal::check_rank(*this, input_shape, 4);
  auto scale = [](int64_t d, int64_t k) { return d < 0 ? -1 : d * k; };
  return TensorShape{input_shape.dim(0), scale(input_shape.dim(1), rows_),
                     scale(input_shape.dim(2), cols_), input_shape.dim(3)};
}

Tensor UpSampling2DLayer::call(const Tensor& inputs, bool /*training*/) {
  const TensorShape out = compute_output_shape(inputs.shape());
  const TensorShape& s = inputs.shape();
  // [b, h, w, c] -> [b, h, 1, w, 1, c] -> broadcast [b, h, rows, w, cols, c] -> merge.
  const Tensor spread = strata::reshape(inputs, {s.dim(0), s.dim(1), 1, s.dim(2), 1, s.dim(3)});
  const Tensor tiled = strata::broadcast_to(
      spread, TensorShape{s.dim(0), s.dim(1), rows_, s.dim(2), cols_, s.dim(3)});
  return strata::reshape(tiled, out.dims());
}

std::shared_ptr<UpSampling2DLayer> UpSampling2D(const std::vector<int64_t>& size,
                                                const UpSampling2DOptions& options) {
  return std::make_shared<UpSampling2DLayer>(size, options);
}

PermuteLayer::PermuteLayer(std::vector<int64_t> dims, const LayerArgs& args)
    : Layer("Permute", "permute", args), dims_(std::move(dims)) {
  std::vector<int64_t> sorted = dims_;
  std::sort(sorted.begin(), sorted.end());
  bool ok = !sorted.empty();
  for (size_t i = 0; i < sorted.size(); ++i) ok = ok && sorted[i] == static_cast<int64_t>(i) + 1;
  STRATA_CHECK_ARG(ok, internal::describe(*this),
                   ": expected dims to be a permutation of 1 .. n (the batch axis excluded), got ",
                   dims_);
}

TensorShape PermuteLayer::compute_output_shape(const TensorShape& input_shape) const {
  internal::check_rank(*this, input_shape, static_cast<int>(dims_.size()) + 1);
  std::vector<int64_t> out{input_shape.dim(0)};
  for (int64_t d : dims_) out.push_back(input_shape.dim(static_cast<int>(d)));
  return TensorShape(out);
}

Tensor PermuteLayer::call(const Tensor& inputs, bool /*training*/) {
  compute_output_shape(inputs.shape());
  std::vector<int64_t> perm{0};
  perm.insert(perm.end(), dims_.begin(), dims_.end());
  return strata::transpose(inputs, perm);
}

std::shared_ptr<PermuteLayer> Permute(std::vector<int64_t> dims, const LayerArgs& args) {
  return std::make_shared<PermuteLayer>(std::move(dims), args);
}

RepeatVectorLayer::RepeatVectorLayer(int64_t n, const LayerArgs& args)
    : Layer("RepeatVector", "repeat_vector", args), n_(n) {
  STRATA_CHECK_ARG(n > 0, internal::describe(*this), ": expected n > 0, got ", n);
}

TensorShape RepeatVectorLayer::compute_output_shape(const TensorShape& input_shape) const {
  internal::check_rank(*this, input_shape, 2);
  return TensorShape{input_shape.dim(0), n_, input_shape.dim(1)};
}

Tensor RepeatVectorLayer::call(const Tensor& inputs, bool /*training*/) {
  const TensorShape out = compute_output_shape(inputs.shape());
  return strata::broadcast_to(strata::expand_dims(inputs, 1), out);
}

std::shared_ptr<RepeatVectorLayer> RepeatVector(int64_t n, const LayerArgs& args) {
  return std::make_shared<RepeatVectorLayer>(n, args);
}

}  // namespace strata::keras::layers
