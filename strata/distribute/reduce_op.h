#pragma once
// tf.distribute.ReduceOp: how values are combined across replicas.
//
//   strategy.reduce(sd::ReduceOp::SUM, per_replica, std::nullopt);
//   sd::reduce_op_from_string("mean");   // ReduceOp::MEAN (case-insensitive, as TF)

#include <ostream>
#include <string_view>

namespace strata::distribute {

enum class ReduceOp { SUM, MEAN };

std::string_view reduce_op_name(ReduceOp op) noexcept;  // "SUM", "MEAN"
// InvalidArgumentError for anything but sum/mean in any case.
ReduceOp reduce_op_from_string(std::string_view name);
std::ostream& operator<<(std::ostream& os, ReduceOp op);

}  // namespace strata::distribute
