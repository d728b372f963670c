#include "strata/keras/layers/preprocessing.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/keras/layers/internal/common.h"
#include "strata/keras/layers/serialization.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"

namespace strata::keras::layers {
namespace {

constexpr double kEpsilon = 1e-7;  // keras.backend.epsilon()

}  // namespace

NormalizationLayer::NormalizationLayer(const NormalizationOptions& options)
    : Layer("Normalization", "normalization", internal::layer_args(options)), options_(options) {
  STRATA_CHECK_ARG(options.mean.has_value() == options.variance.has_value(),
                   internal::describe(*this),
                   ": expected both mean and variance or neither, got only the ",
                   options.mean ? "mean" : "variance");
  if (options.mean) {
    STRATA_CHECK_ARG(!options.mean->empty() && !options.variance->empty(),
                     internal::describe(*this), ": expected mean and variance values, got none");
  }
}

std::shared_ptr<NormalizationLayer> Normalization(const NormalizationOptions& options) {
  return std::make_shared<NormalizationLayer>(options);
}

std::vector<int> NormalizationLayer::kept_axes(int rank) const {
  std::vector<int> axes;
  if (!options_.axis) return axes;
  for (int64_t a : *options_.axis) {
    STRATA_CHECK_ARG(a >= -rank && a < rank, internal::describe(*this), ": axis ", a,
                     " is out of range for inputs of rank ", rank);
    axes.push_back(int(a < 0 ? a + rank : a));
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  STRATA_CHECK_ARG(axes.empty() || axes.front() > 0 || rank == 1, internal::describe(*this),
                   ": the batch axis 0 cannot be a kept axis");
  return axes;
}

void NormalizationLayer::build_weights(const TensorShape& input_shape) {
  rank_ = input_shape.rank();
  const std::vector<int> keep = kept_axes(rank_);
  feature_shape_.clear();
  broadcast_shape_.assign(size_t(rank_), 1);
  for (int a : keep) {
    const int64_t d = input_shape.dim(a);
    STRATA_CHECK_ARG(d > 0, internal::describe(*this), ": the kept axis ", a,
                     " must have a known size, got input shape ", input_shape);
    feature_shape_.push_back(d);
    broadcast_shape_[size_t(a)] = d;
  }
  const TensorShape features(feature_shape_);
  const int64_t n = features.num_elements();
  if (options_.mean) {
    for (const auto* values : {&*options_.mean, &*options_.variance}) {
      STRATA_CHECK_ARG(int64_t(values->size()) == 1 || int64_t(values->size()) == n,
                       internal::describe(*this), ": expected 1 or ", n,
                       " mean/variance values, got ", values->size());
    }
    return;
  }
  mean_ = add_weight("mean", features, {.initializer = initializers::zeros(), .trainable = false});
  variance_ =
      add_weight("variance", features, {.initializer = initializers::ones(), .trainable = false});
  count_ =
      add_weight("count", TensorShape{},
                 {.initializer = initializers::zeros(), .trainable = false, .dtype = DType::int64});
}

// Keras's Normalization.update_state: the batch's per-feature mean and
// (biased) variance, merged with the running ones weighted by their counts.
void NormalizationLayer::update_statistics(const Tensor& batch) {
  STRATA_CHECK_ARG(batch.rank() == rank_, internal::describe(*this), ": expected rank ", rank_,
                   " data to adapt to, got shape ", batch.shape());
  const std::vector<int> keep = kept_axes(rank_);
  for (size_t k = 0; k < keep.size(); ++k) {
    STRATA_CHECK_ARG(batch.shape().dim(keep[k]) == feature_shape_[k], internal::describe(*this),
                     ": expected dimension ", keep[k], " of size ", feature_shape_[k],
                     ", got shape ", batch.shape());
  }
  const int64_t features = TensorShape(feature_shape_).num_elements();
  const int64_t total = batch.num_elements();
  if (total == 0) return;
  const std::vector<double> values = strata::cast(batch, DType::float64).to_vector<double>();
  // Each element's feature index, from its coordinates on the kept axes.
  const std::vector<int64_t>& dims = batch.shape().dims();
  std::vector<int64_t> feature_of(size_t(total), 0);
  std::vector<int64_t> coord(dims.size(), 0);
  for (int64_t i = 0; i < total; ++i) {
    int64_t f = 0;
    for (size_t k = 0; k < keep.size(); ++k) f = f * feature_shape_[k] + coord[size_t(keep[k])];
    feature_of[size_t(i)] = f;
    for (int d = int(dims.size()) - 1; d >= 0; --d) {
      if (++coord[size_t(d)] < dims[size_t(d)]) break;
      coord[size_t(d)] = 0;
    }
  }
  const int64_t batch_count = total / features;
  std::vector<double> mean(size_t(features), 0.0), var(size_t(features), 0.0);
  for (int64_t i = 0; i < total; ++i) mean[size_t(feature_of[size_t(i)])] += values[size_t(i)];
  for (double& m : mean) m /= double(batch_count);
  for (int64_t i = 0; i < total; ++i) {
    const double d = values[size_t(i)] - mean[size_t(feature_of[size_t(i)])];
    var[size_t(feature_of[size_t(i)])] += d * d;
  }
  for (double& v : var) v /= double(batch_count);
  if (run_count_ == 0) {
    run_mean_ = mean;
    run_var_ = var;
    run_count_ = batch_count;
    return;
  }
  const double new_total = double(run_count_ + batch_count);
  const double batch_weight = double(batch_count) / new_total;
  const double existing_weight = 1.0 - batch_weight;
  for (int64_t f = 0; f < features; ++f) {
    const size_t j = size_t(f);
    const double m = run_mean_[j] * existing_weight + mean[j] * batch_weight;
    run_var_[j] = existing_weight * (run_var_[j] + (run_mean_[j] - m) * (run_mean_[j] - m)) +
                  batch_weight * (var[j] + (mean[j] - m) * (mean[j] - m));
    run_mean_[j] = m;
  }
  run_count_ += batch_count;
}

void NormalizationLayer::finalize_statistics() {
  STRATA_CHECK_ARG(run_count_ > 0, internal::describe(*this), ": adapt got no data");
  const TensorShape features(feature_shape_);
  mean_.assign(strata::cast(strata::constant(run_mean_, features), mean_.dtype()));
  variance_.assign(strata::cast(strata::constant(run_var_, features), variance_.dtype()));
  count_.assign(strata::constant(run_count_));
}

void NormalizationLayer::adapt(const Tensor& data) {
  STRATA_CHECK(FAILED_PRECONDITION, !options_.mean, internal::describe(*this),
               ": adapt() is for a layer without a given mean and variance");
  STRATA_CHECK_ARG(data.defined() && data.rank() >= 1, internal::describe(*this),
                   ": expected data with a batch axis to adapt to");
  if (!built()) build(data.shape().with_dim(0, -1));
  run_mean_.clear();
  run_var_.clear();
  run_count_ = 0;
  update_statistics(data);
  finalize_statistics();
}

void NormalizationLayer::adapt(const data::Dataset& dataset) {
  STRATA_CHECK(FAILED_PRECONDITION, !options_.mean, internal::describe(*this),
               ": adapt() is for a layer without a given mean and variance");
  run_mean_.clear();
  run_var_.clear();
  run_count_ = 0;
  for (const data::Element& e : dataset) {
    STRATA_CHECK_ARG(!e.empty() && e[0].rank() >= 1, internal::describe(*this),
                     ": expected dataset elements whose first component is a batch");
    if (!built()) build(e[0].shape().with_dim(0, -1));
    update_statistics(e[0]);
  }
  finalize_statistics();
}

Tensor NormalizationLayer::call(const Tensor& inputs, bool) {
  STRATA_CHECK_ARG(inputs.rank() == rank_, internal::describe(*this), ": expected rank ", rank_,
                   " inputs, got shape ", inputs.shape());
  const Tensor x = strata::cast(inputs, dtype());
  Tensor mean, variance;
  if (options_.mean) {
    const int64_t n = TensorShape(feature_shape_).num_elements();
    auto widen = [n](const std::vector<double>& v) {
      return v.size() == 1 ? std::vector<double>(size_t(n), v[0]) : v;
    };
    mean =
        strata::cast(strata::constant(widen(*options_.mean), TensorShape(feature_shape_)), dtype());
    variance = strata::cast(
        strata::constant(widen(*options_.variance), TensorShape(feature_shape_)), dtype());
  } else {
    mean = mean_.value();
    variance = variance_.value();
  }
  mean = strata::reshape(mean, broadcast_shape_);
  variance = strata::reshape(variance, broadcast_shape_);
  const Tensor scale =
      strata::maximum(strata::sqrt(variance), strata::cast(strata::constant(kEpsilon), dtype()));
  if (options_.invert) return strata::add(mean, strata::multiply(x, scale));
  return strata::divide(strata::subtract(x, mean), scale);
}

nlohmann::json NormalizationLayer::get_config() const {
  nlohmann::json config = base_config();
  config["axis"] = options_.axis ? nlohmann::json(*options_.axis) : nlohmann::json(nullptr);
  config["mean"] = options_.mean ? nlohmann::json(*options_.mean) : nlohmann::json(nullptr);
  config["variance"] =
      options_.variance ? nlohmann::json(*options_.variance) : nlohmann::json(nullptr);
  config["invert"] = options_.invert;
  return config;
}

StringLookupLayer::StringLookupLayer(const StringLookupOptions& options)
    : Layer("StringLookup", "string_lookup", internal::layer_args(options)), options_(options) {
  STRATA_CHECK(UNIMPLEMENTED, options.num_oov_indices == 1, internal::describe(*this),
               ": only num_oov_indices=1 is supported, got ", options.num_oov_indices);
  STRATA_CHECK_ARG(!options.max_tokens || *options.max_tokens >= 2, internal::describe(*this),
                   ": max_tokens must be >= 2 (the OOV index and a token), got ",
                   options.max_tokens.value_or(0));
  if (options.vocabulary) set_vocabulary(*options.vocabulary);
}

std::shared_ptr<StringLookupLayer> StringLookup(const StringLookupOptions& options) {
  return std::make_shared<StringLookupLayer>(options);
}

void StringLookupLayer::set_vocabulary(std::vector<std::string> vocabulary) {
  std::unordered_map<std::string, int64_t> index;
  for (size_t i = 0; i < vocabulary.size(); ++i) {
    STRATA_CHECK_ARG(vocabulary[i] != options_.oov_token, internal::describe(*this),
                     ": the vocabulary contains the OOV token '", options_.oov_token, "'");
    STRATA_CHECK_ARG(index.emplace(vocabulary[i], int64_t(i) + 1).second, internal::describe(*this),
                     ": the vocabulary repeats '", vocabulary[i], "'");
  }
  vocabulary_ = std::move(vocabulary);
  index_ = std::move(index);
}

void StringLookupLayer::learn(const std::vector<std::pair<std::string, int64_t>>& counts) {
  std::vector<std::pair<std::string, int64_t>> sorted = counts;
  // Decreasing count, ties by decreasing token.
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first > b.first;
  });
  std::vector<std::string> vocabulary;
  for (const auto& [token, count] : sorted) {
    if (token == options_.oov_token) continue;
    if (options_.max_tokens && int64_t(vocabulary.size()) + 1 >= *options_.max_tokens) break;
    vocabulary.push_back(token);
  }
  set_vocabulary(std::move(vocabulary));
}

namespace {

void count_strings(const Tensor& t, const std::string& who,
                   std::unordered_map<std::string, int64_t>& counts) {
  STRATA_CHECK_ARG(t.dtype() == DType::string, who, ": adapt expects string data, got ",
                   dtype_name(t.dtype()));
  for (const std::string& s : t.to_vector<std::string>()) ++counts[s];
}

std::vector<std::pair<std::string, int64_t>> as_pairs(
    const std::unordered_map<std::string, int64_t>& counts) {
  return {counts.begin(), counts.end()};
}

}  // namespace

void StringLookupLayer::adapt(const Tensor& data) {
  std::unordered_map<std::string, int64_t> counts;
  count_strings(data, internal::describe(*this), counts);
  learn(as_pairs(counts));
}

void StringLookupLayer::adapt(const data::Dataset& dataset) {
  std::unordered_map<std::string, int64_t> counts;
  for (const data::Element& e : dataset) {
    STRATA_CHECK_ARG(!e.empty(), internal::describe(*this), ": empty dataset element");
    count_strings(e[0], internal::describe(*this), counts);
  }
  learn(as_pairs(counts));
}

nlohmann::json StringLookupLayer::get_config() const {
  nlohmann::json config = base_config();
  config["invert"] = options_.invert;
  config["max_tokens"] =
      options_.max_tokens ? nlohmann::json(*options_.max_tokens) : nlohmann::json(nullptr);
  config["num_oov_indices"] = options_.num_oov_indices;
  config["oov_token"] = options_.oov_token;
  config["mask_token"] = nullptr;
  config["output_mode"] = "int";
  config["sparse"] = false;
  config["pad_to_max_tokens"] = false;
  config["vocabulary_dtype"] = "string";
  config["idf_weights"] = nullptr;
  const bool has_vocabulary = options_.vocabulary.has_value() || !vocabulary_.empty();
  config["vocabulary"] = has_vocabulary ? nlohmann::json(vocabulary_) : nlohmann::json(nullptr);
  config["vocabulary_size"] = vocabulary_size();
  config["encoding"] = "utf-8";
  return config;
}

std::shared_ptr<StringLookupLayer> StringLookupLayer::from_config(const nlohmann::json& config) {
  return std::static_pointer_cast<StringLookupLayer>(
      deserialize({{"class_name", "StringLookup"}, {"config", config}}));
}

std::vector<std::string> StringLookupLayer::get_vocabulary() const {
  std::vector<std::string> v{options_.oov_token};
  v.insert(v.end(), vocabulary_.begin(), vocabulary_.end());
  return v;
}

Tensor StringLookupLayer::call(const Tensor& inputs, bool) {
  if (options_.invert) {
    STRATA_CHECK_ARG(inputs.dtype() == DType::int64 || inputs.dtype() == DType::int32,
                     internal::describe(*this), ": invert expects integer indices, got ",
                     dtype_name(inputs.dtype()));
    const Tensor ids = inputs.dtype() == DType::int64 ? inputs : strata::cast(inputs, DType::int64);
    std::vector<std::string> out;
    for (int64_t id : ids.to_vector<int64_t>()) {
      out.push_back(id >= 1 && id <= int64_t(vocabulary_.size()) ? vocabulary_[id - 1]
                                                                 : options_.oov_token);
    }
    return strata::constant(out, inputs.shape());
  }
  STRATA_CHECK_ARG(inputs.dtype() == DType::string, internal::describe(*this),
                   ": expects string inputs, got ", dtype_name(inputs.dtype()));
  std::vector<int64_t> out;
  for (const std::string& s : inputs.to_vector<std::string>()) {
    const auto it = index_.find(s);
    out.push_back(it == index_.end() ? 0 : it->second);
  }
  return strata::constant(out, inputs.shape());
}

}  // namespace strata::keras::layers
