#pragma once
// keras.layers.Normalization: standardises features with a mean and variance
// learnt by adapt() (or given).
//
//   auto norm = keras::layers::Normalization();          // axis -1: one mean per feature
//   norm->adapt(x_train);                                // or a dataset of batches
//   Tensor y = (*norm)(x);                               // (x - mean) / max(sqrt(var), 1e-7)
//   keras::layers::Normalization({.mean = {{2.0}}, .variance = {{4.0}}});
//
// As Keras 2: the statistics are per index of the kept axes (`axis`, the
// feature axes; std::nullopt = None, a single mean over everything) and over
// every other axis; the variance is the population (biased) one; adapt over a
// dataset combines its batches exactly (Keras's running update of count, mean
// and variance), and a second adapt() starts afresh. Weights (non-trainable,
// Keras's names): "mean", "variance" (the feature shape) and "count"
// (int64 scalar), absent when mean and variance are given. Inputs are cast to
// the layer's dtype. invert = true maps standardised values back.
// Thread-safety: as Layer; adapt writes the weights.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strata/data/dataset.h"
#include "strata/keras/layer.h"

namespace strata::keras::layers {

// tf.keras.layers.Normalization's arguments, in Keras's order, then LayerArgs.
struct NormalizationOptions {
  // The axes that keep their own statistics ({-1}: the last). std::nullopt is
  // Keras's None: one mean and variance for all values.
  OptionalShape axis = std::vector<int64_t>{-1};
  // Given statistics (both or neither), broadcast to the kept axes' shape: one
  // value, or one per feature. Without them, adapt() learns them.
  std::optional<std::vector<double>> mean = std::nullopt;
  std::optional<std::vector<double>> variance = std::nullopt;
  bool invert = false;
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

class NormalizationLayer : public Layer {
 public:
  // InvalidArgumentError when only one of mean and variance is given.
  explicit NormalizationLayer(const NormalizationOptions& options = {});

  // Learns the mean and variance of `data` (Keras's adapt): a tensor whose
  // first axis is the batch, or a dataset of such batches (its elements'
  // first component). Builds the layer from the data's shape when needed.
  // InvalidArgumentError for empty data or a shape the layer does not suit.
  void adapt(const Tensor& data);
  void adapt(const data::Dataset& dataset);

  TensorShape compute_output_shape(const TensorShape& input_shape) const override {
    return input_shape;
  }
  // Base keys, "axis" (a list, or null), "mean", "variance" (given values or
  // null), "invert".
  nlohmann::json get_config() const override;

 protected:
  void build_weights(const TensorShape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  // The kept axes of an input of `rank`, normalised and sorted.
  std::vector<int> kept_axes(int rank) const;
  void update_statistics(const Tensor& batch);
  void finalize_statistics();

  NormalizationOptions options_;
  int rank_ = -1;
  std::vector<int64_t> feature_shape_;    // the kept axes' dimensions
  std::vector<int64_t> broadcast_shape_;  // 1 on the reduced axes
  Variable mean_, variance_, count_;
  // adapt's running statistics, per feature.
  std::vector<double> run_mean_, run_var_;
  int64_t run_count_ = 0;
};

std::shared_ptr<NormalizationLayer> Normalization(const NormalizationOptions& options = {});

// keras.layers.StringLookup: maps strings to integer indices from a vocabulary,
// given or learnt by adapt().
//
//   auto lookup = keras::layers::StringLookup();
//   lookup->adapt(data);          // vocabulary sorted by frequency
//   Tensor ids = (*lookup)(data); // int64; out-of-vocabulary -> 0
//
// As Keras (output_mode "int", mask_token None): index 0 is the OOV token
// "[UNK]", the vocabulary follows from 1. adapt() orders tokens by decreasing
// count, ties by decreasing token (Keras's reversed lexsort); max_tokens keeps
// that many indices including the OOV one. invert = true maps indices back to
// strings (an unknown index gives the OOV token).
// Thread-safety: as Layer; adapt writes the vocabulary.
struct StringLookupOptions {
  std::optional<int64_t> max_tokens = std::nullopt;
  // Only 1 is supported (more OOV indices hash tokens; UnimplementedError).
  int64_t num_oov_indices = 1;
  std::string oov_token = "[UNK]";
  std::optional<std::vector<std::string>> vocabulary = std::nullopt;
  bool invert = false;
  // LayerArgs (dtype: the index dtype, as Keras's default int64)
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::int64;
  bool trainable = true;
};

class StringLookupLayer : public Layer {
 public:
  // InvalidArgumentError for max_tokens < 2 or a vocabulary with duplicates
  // or the OOV token; UnimplementedError for num_oov_indices != 1.
  explicit StringLookupLayer(const StringLookupOptions& options = {});

  // Learns the vocabulary from every string of `data` (any shape), or of the
  // first component of a dataset's elements; replaces an earlier one.
  void adapt(const Tensor& data);
  void adapt(const data::Dataset& dataset);

  // The OOV token, then the vocabulary in index order.
  std::vector<std::string> get_vocabulary() const;
  int64_t vocabulary_size() const { return int64_t(vocabulary_.size()) + 1; }

  TensorShape compute_output_shape(const TensorShape& input_shape) const override {
    return input_shape;
  }

  // Keras's StringLookup.get_config(): the base keys, then invert, max_tokens,
  // num_oov_indices, oov_token, mask_token (null), output_mode ("int"),
  // sparse, pad_to_max_tokens, vocabulary_dtype ("string"), idf_weights
  // (null), vocabulary, vocabulary_size and encoding ("utf-8"), as Keras
  // writes them. "vocabulary" is the layer's current vocabulary (given or
  // adapted; null when it has none): Keras writes only a given one and keeps
  // an adapted one in the SavedModel's assets, which Strata's saved models
  // do not have.
  nlohmann::json get_config() const override;
  // Keras's StringLookup.from_config: a layer with the config's arguments and
  // vocabulary. UnimplementedError for the arguments Strata does not support
  // (an output_mode other than "int", a mask_token, sparse,
  // pad_to_max_tokens, an encoding other than UTF-8); InvalidArgumentError
  // naming a missing or mistyped key.
  static std::shared_ptr<StringLookupLayer> from_config(const nlohmann::json& config);

 protected:
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  void set_vocabulary(std::vector<std::string> vocabulary);
  void learn(const std::vector<std::pair<std::string, int64_t>>& counts);

  StringLookupOptions options_;
  std::vector<std::string> vocabulary_;             // index i + 1
  std::unordered_map<std::string, int64_t> index_;  // token -> index
};

std::shared_ptr<StringLookupLayer> StringLookup(const StringLookupOptions& options = {});

}  // namespace strata::keras::layers
