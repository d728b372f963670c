#pragma once
// keras.regularizers: penalties on weights and activations added to the loss.
//
//   auto dense = keras::layers::Dense(64, {.kernel_regularizer = keras::regularizers::L2(1e-4)});
//   Tensor y = (*dense)(x);
//   std::vector<Tensor> penalties = dense->losses();   // {1e-4 * sum(kernel^2)}
//   keras::regularizers::L1L2({.l1 = 0.01, .l2 = 0.01});
//
// L1(l1) is l1 * sum(|x|), L2(l2) is l2 * sum(x^2), L1L2 the sum of both,
// each computed in x's dtype, as Keras's. The factor is kept as a float32
// (Keras's cast_to_floatx), so get_config() writes 0.009999999776482582 for
// 0.01, as Keras does. Factors must be finite and >= 0 (InvalidArgumentError).
// Immutable; thread-safe.

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "strata/core/tensor.h"

namespace strata::keras::regularizers {

class Regularizer {
 public:
  virtual ~Regularizer() = default;
  // The penalty for `x`: a scalar of x's dtype.
  virtual Tensor operator()(const Tensor& x) const = 0;
  // "L1", "L2" or "L1L2".
  virtual std::string class_name() const = 0;
  // {"l1": ..., "l2": ...} with Keras's keys.
  virtual nlohmann::json get_config() const = 0;
};

using RegularizerPtr = std::shared_ptr<const Regularizer>;

struct L1L2Options {
  double l1 = 0.0;  // Keras default
  double l2 = 0.0;  // Keras default
};

RegularizerPtr L1(double l1 = 0.01);  // Keras default 0.01
RegularizerPtr L2(double l2 = 0.01);  // Keras default 0.01
RegularizerPtr L1L2(const L1L2Options& options = {});
// Keras's lower-case aliases.
inline RegularizerPtr l1(double v = 0.01) { return L1(v); }
inline RegularizerPtr l2(double v = 0.01) { return L2(v); }
inline RegularizerPtr l1_l2(double l1 = 0.01, double l2 = 0.01) {  // keras.regularizers.l1_l2
  return L1L2({.l1 = l1, .l2 = l2});
}

// keras.regularizers.serialize / deserialize ({"class_name": "L2", "config": {"l2": ...}}).
nlohmann::json serialize(const Regularizer& regularizer);
RegularizerPtr deserialize(const nlohmann::json& config);

}  // namespace strata::keras::regularizers
