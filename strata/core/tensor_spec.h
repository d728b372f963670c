#pragma once
// TensorSpec: the shape (with -1 for unknown dims) and dtype of a tensor, as
// tf.TensorSpec. Used by Dataset::element_spec() and DistributedDataset.
//
//   strata::TensorSpec spec({-1, 784}, strata::float32);
//   spec.is_compatible_with(batch);   // shape and dtype match
//   spec.to_string();   // "TensorSpec(shape=(None, 784), dtype=tf.float32, name=None)"

#include <optional>
#include <ostream>
#include <string>

#include "strata/core/dtype.h"
#include "strata/core/tensor_shape.h"

namespace strata {

class Tensor;

struct TensorSpec {
  TensorShape shape;
  DType dtype = DType::float32;
  std::string name;

  TensorSpec() = default;
  TensorSpec(TensorShape s, DType d, std::string n = {})
      : shape(std::move(s)), dtype(d), name(std::move(n)) {}

  bool is_compatible_with(const TensorSpec& other) const noexcept {
    return dtype == other.dtype && shape.is_compatible_with(other.shape);
  }
  bool is_compatible_with(const Tensor& t) const;
  std::string to_string() const;
  bool operator==(const TensorSpec& o) const noexcept {
    return shape == o.shape && dtype == o.dtype && name == o.name;
  }
};

std::ostream& operator<<(std::ostream& os, const TensorSpec& s);

}  // namespace strata
