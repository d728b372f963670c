#pragma once
// tf.distribute.ReduceOp: how values are combined across replicas.
//
//   strategy.reduce(sd::ReduceOp::SUM, per_replica, std::nullopt);
//   sd::reduce_op_from_string("mean");   // ReduceOp::MEAN (case-insensitive, as TF)
//   strategy.reduce("SUM", per_replica, {0, 1});   // TF's string op and tuple of axes
//
// One enum per layer boundary: this is the user's (TF's SUM and MEAN);
// collective::ReduceOp is what the collectives compute (also MAX and MIN), and
// to_collective() is the one place where the first becomes the second.

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::collective {
enum class ReduceOp;
}  // namespace strata::collective

namespace strata::distribute {

enum class ReduceOp { SUM, MEAN };

std::string_view reduce_op_name(ReduceOp op) noexcept;  // "SUM", "MEAN"
// InvalidArgumentError for anything but sum/mean in any case.
ReduceOp reduce_op_from_string(std::string_view name);
std::ostream& operator<<(std::ostream& os, ReduceOp op);

// The collective op that combines values as `op` does.
collective::ReduceOp to_collective(ReduceOp op) noexcept;

// The sum of `values` (equal shapes and dtypes) in one fixed pairwise tree:
// sum[lo, hi) = sum[lo, mid) + sum[mid, hi) with mid = lo + (hi - lo) / 2.
// Floating-point addition is not associative; a fixed tree makes the bits of
// the result depend only on the values and their order. With a power-of-two
// count, the tree over n values splits into the trees of any aligned
// power-of-two blocks, so summing blocks first and then the block sums gives
// the same bits (what CommunicationOptions.deterministic_reduction relies
// on). Undefined tensors are skipped only when every value is undefined (the
// result is then undefined); InvalidArgumentError for an empty list or a mix.
Tensor pairwise_sum(std::span<const Tensor> values);

// What Strategy::reduce and ReplicaContext::all_reduce take as `reduce_op`:
// a ReduceOp, or TF's string spelling ("SUM", "mean"; InvalidArgumentError
// for any other). Implicit, as TF accepts both.
struct ReduceOpArg {
  ReduceOpArg(ReduceOp reduce_op) : op(reduce_op) {}  // NOLINT(google-explicit-constructor)
  ReduceOpArg(std::string_view name)                  // NOLINT(google-explicit-constructor)
      : op(reduce_op_from_string(name)) {}
  ReduceOpArg(const char* name) : ReduceOpArg(std::string_view(name)) {}  // NOLINT
  ReduceOpArg(const std::string& name)                                    // NOLINT
      : ReduceOpArg(std::string_view(name)) {}
  ReduceOp op;
};

// Strategy::reduce's `axis`: None (std::nullopt: across replicas only), one
// axis, or TF's tuple/list of axes ({0, 1}). Implicit, as TF accepts each.
class ReduceAxis {
 public:
  ReduceAxis(std::nullopt_t) {}              // NOLINT(google-explicit-constructor)
  ReduceAxis(std::optional<int64_t> axis) {  // NOLINT(google-explicit-constructor)
    if (axis) axes_ = std::vector<int64_t>{*axis};
  }
  template <std::integral I>
  ReduceAxis(I axis) : axes_(std::vector<int64_t>{static_cast<int64_t>(axis)}) {}  // NOLINT
  ReduceAxis(std::initializer_list<int64_t> axes)  // NOLINT(google-explicit-constructor)
      : axes_(std::vector<int64_t>(axes)) {}
  ReduceAxis(std::vector<int64_t> axes) : axes_(std::move(axes)) {}  // NOLINT
  // nullopt for None; else the axes (possibly empty: no reduction in a replica).
  const std::optional<std::vector<int64_t>>& axes() const noexcept { return axes_; }

 private:
  std::optional<std::vector<int64_t>> axes_;
};

}  // namespace strata::distribute
