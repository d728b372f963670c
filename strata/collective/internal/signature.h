#pragma once
// CallSignature: the cheap fingerprint of one collective call (what, with which
// op/root, over which dtypes and shapes) that ranks compare before any data
// moves, so that mismatched programs fail with InvalidArgumentError on every
// rank instead of exchanging garbage.
//
//   auto sig = CallSignature::of(CollectiveKind::all_reduce, ReduceOp::SUM, -1, tensors);
//   sig.to_string();                 // "all_reduce(SUM, [float32[2, 3], int64[]])"
//   sig.matches(other);              // all_gather ignores dimension 0
//   sig.validate("LocalCollectives", 4);   // dtype / shape / root rules, throws
//
// Immutable value type.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "strata/collective/collectives.h"
#include "strata/core/allocator.h"
#include "strata/core/tensor.h"

namespace strata::collective::internal {

enum class CollectiveKind : uint8_t { all_reduce, all_gather, reduce_scatter, broadcast, barrier };

const char* kind_name(CollectiveKind kind) noexcept;

struct TensorSignature {
  bool defined = false;
  DType dtype = DType::float32;
  PooledVector<int64_t> dims = {};
};

struct CallSignature {
  CollectiveKind kind = CollectiveKind::barrier;
  ReduceOp op = ReduceOp::SUM;  // all_reduce, reduce_scatter
  int root = -1;                // broadcast
  // In the buffer cache, as the dims: every collective call makes one.
  PooledVector<TensorSignature> tensors = {};

  static CallSignature of(CollectiveKind kind, ReduceOp op, int root,
                          std::span<const Tensor> tensors);

  // Equal in everything the ranks must agree on (all_gather: dim 0 may differ).
  bool matches(const CallSignature& other) const;
  // A 64-bit FNV-1a hash of what matches() compares (cross-process check).
  uint64_t hash() const;
  // "all_reduce(SUM, [float32[4]])", "broadcast(root 1, int32[2])", "barrier()".
  std::string to_string() const;
  // Throws InvalidArgumentError, prefixed by `who`, when the call is not valid
  // for a group of `size` ranks: undefined tensors, unsupported dtypes, a
  // scalar all_gather, reduce_scatter dim 0 not divisible by size, root out of
  // range.
  void validate(const char* who, int size) const;
};

// "LocalCollectives: mismatched collectives at call #3: rank 0 called X but rank 2 called Y".
std::string mismatch_message(const char* who, uint64_t call, int rank_a, const std::string& a,
                             int rank_b, const std::string& b);

}  // namespace strata::collective::internal
