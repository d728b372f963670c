#pragma once
// keras.layers.Embedding: looks up rows of a trainable [input_dim, output_dim]
// matrix by integer index.
//
//   auto embed = keras::layers::Embedding(1000, 64);
//   Tensor ids = strata::constant<int64_t>({4, 20, 7, 0}, {2, 2});
//   Tensor v = (*embed)(ids);                  // [2, 2, 64]
//   embed->embeddings().shape();               // [1000, 64]
//
// The lookup is strata::gather, so the gradient reaches the embedding rows
// that were used (summed over repeats). Indices of a non-integer dtype are
// cast to int32 first, as Keras; an index outside [0, input_dim) raises
// InvalidArgumentError (TF's CPU behaviour). Thread-safety: as Layer.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/keras/initializers.h"
#include "strata/keras/layer.h"

namespace strata::keras::layers {

// tf.keras.layers.Embedding's arguments after `input_dim, output_dim`, in
// Keras's order (regularizers and constraints are not supported).
struct EmbeddingOptions {
  // Keras's "uniform": RandomUniform(-0.05, 0.05).
  Initializer embeddings_initializer = initializers::random_uniform();
  // Masking is not supported (no layer consumes masks): true is UnimplementedError.
  bool mask_zero = false;
  // The sequence length, when constant; also the default input_shape, as Keras.
  std::optional<int64_t> input_length = std::nullopt;
  // LayerArgs
  OptionalShape input_shape = std::nullopt;
  std::string name = "";
  DType dtype = DType::float32;
  bool trainable = true;
};

class EmbeddingLayer : public Layer {
 public:
  // InvalidArgumentError unless input_dim > 0, output_dim > 0 and input_length > 0 when given.
  EmbeddingLayer(int64_t input_dim, int64_t output_dim, const EmbeddingOptions& options = {});

  int64_t input_dim() const noexcept { return input_dim_; }
  int64_t output_dim() const noexcept { return output_dim_; }
  const Variable& embeddings() const { return embeddings_; }

  // input_shape + [output_dim].
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

 protected:
  void build_weights(const TensorShape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;

 private:
  void check_input(const TensorShape& shape) const;

  int64_t input_dim_;
  int64_t output_dim_;
  EmbeddingOptions options_;
  Variable embeddings_;
};

std::shared_ptr<EmbeddingLayer> Embedding(int64_t input_dim, int64_t output_dim,
                                          const EmbeddingOptions& options = {});

}  // namespace strata::keras::layers
