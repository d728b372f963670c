#pragma once
// tf.distribute.ReduceOp: how values are combined across replicas.
//
//   strategy.reduce(sd::ReduceOp::SUM, per_replica, std::nullopt);
//   sd::reduce_op_from_string("mean");   // ReduceOp::MEAN (case-insensitive, as TF)
//
// One enum per layer boundary: this is the user's (TF's SUM and MEAN);
// collective::ReduceOp is what the collectives compute (also MAX and MIN), and
// to_collective() is the one place where the first becomes the second.

#include <ostream>
#include <string_view>

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

}  // namespace strata::distribute
