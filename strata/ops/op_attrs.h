#pragma once
// OpAttrs: the non-tensor arguments of a primitive op, as recorded for the
// backward pass. Each op documents (in ops.def) which fields it uses; the rest
// keep their defaults. Plain aggregate, copied into the tape's records.

#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/allocator.h"
#include "strata/core/dtype.h"
#include "strata/core/tensor_shape.h"

namespace strata {

struct OpAttrs {
  // Reductions (empty = all axes); in the buffer cache, as a training step
  // records a reduction's attrs on every step.
  PooledVector<int64_t> axes;
  bool keepdims = false;
  int64_t axis = 0;                // concat, gather, argmax, one_hot, split
  std::vector<int64_t> perm;       // transpose
  TensorShape shape;               // reshape / broadcast_to target; input or filter shape for grads
  std::vector<int64_t> begin;      // slice / strided slice
  std::vector<int64_t> size;       // slice
  std::vector<int64_t> end;        // strided slice
  std::vector<int64_t> strides;    // strided slice; conv/pool strides [h, w]
  std::vector<int64_t> paddings;   // pad: rank x 2 (before, after), flattened
  std::vector<int64_t> multiples;  // tile
  std::vector<int64_t> ksize;      // pool window [h, w]
  std::vector<int64_t> dilations;  // conv [h, w]
  std::string padding;             // "SAME" or "VALID"
  bool transpose_a = false;
  bool transpose_b = false;
  DType dtype = DType::float32;  // cast target, one_hot dtype
  int64_t depth = 0;             // one_hot
  int64_t num_segments = 0;      // unsorted_segment_sum
  double alpha = 0.0;            // leaky_relu slope, elu alpha
  double on_value = 1.0;         // one_hot
  double off_value = 0.0;
  double constant_value = 0.0;  // pad
  bool mean = false;            // collective reduce: MEAN instead of SUM
};

}  // namespace strata
