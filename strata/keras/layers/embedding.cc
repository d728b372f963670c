#include "strata/keras/layers/embedding.h"

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/keras/layers/internal/common.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"

namespace strata::keras::layers {
namespace {

LayerArgs embedding_args(const EmbeddingOptions& o) {
  LayerArgs args = internal::layer_args(o);
  // Keras: input_length stands in for input_shape when none is given.
  if (!args.input_shape && o.input_length) args.input_shape = std::vector<int64_t>{*o.input_length};
  return args;
}

}  // namespace

EmbeddingLayer::EmbeddingLayer(int64_t input_dim, int64_t output_dim,
                               const EmbeddingOptions& options)
    : Layer("Embedding", "embedding", embedding_args(options)),
      input_dim_(input_dim),
      output_dim_(output_dim),
      options_(options) {
  const std::string who = internal::describe(*this);
  STRATA_CHECK_ARG(input_dim > 0 && output_dim > 0, who,
                   ": expected input_dim > 0 and output_dim > 0, got input_dim = ", input_dim,
                   ", output_dim = ", output_dim);
  STRATA_CHECK_ARG(!options.input_length || *options.input_length > 0, who,
                   ": expected input_length > 0, got ", options.input_length.value_or(0));
  if (options.mask_zero) {
    throw UnimplementedError(
        str_cat(who, ": mask_zero = true is not supported (no layer consumes masks)"));
  }
}

void EmbeddingLayer::check_input(const TensorShape& shape) const {
  STRATA_CHECK_ARG(shape.has_known_rank(), internal::describe(*this),
                   ": expected an input of known rank");
  if (options_.input_length && shape.rank() >= 2 && shape.dim(1) >= 0) {
    internal::check_dim(*this, shape, 1, *options_.input_length,
                        "the sequence dimension (input_length)");
  }
}

TensorShape EmbeddingLayer::compute_output_shape(const TensorShape& input_shape) const {
  check_input(input_shape);
  return input_shape.concatenate(TensorShape{output_dim_});
}

void EmbeddingLayer::build_weights(const TensorShape& input_shape) {
  check_input(input_shape);
  embeddings_ = add_weight("embeddings", TensorShape{input_dim_, output_dim_},
                           {.initializer = options_.embeddings_initializer});
}

Tensor EmbeddingLayer::call(const Tensor& inputs, bool /*training*/) {
  check_input(inputs.shape());
  const DType t = inputs.dtype();
  const Tensor ids =
      t == DType::int32 || t == DType::int64 ? inputs : strata::cast(inputs, DType::int32);
  try {
    return strata::gather(embeddings_.value(), ids, /*axis=*/0);
  } catch (const InvalidArgumentError& e) {
    // Name the layer; gather's message carries the offending index.
    throw InvalidArgumentError(str_cat(internal::describe(*this), ": expected indices in [0, ",
                                       input_dim_, "), ", e.what()));
  }
}

std::shared_ptr<EmbeddingLayer> Embedding(int64_t input_dim, int64_t output_dim,
                                          const EmbeddingOptions& options) {
  return std::make_shared<EmbeddingLayer>(input_dim, output_dim, options);
}

}  // namespace strata::keras::layers
