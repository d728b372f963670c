#include "strata/distribute/weight_update_sharding.h"

#include "strata/base/errors.h"
#include "strata/distribute/replicated_strategy.h"
#include "strata/distribute/strategy.h"

namespace strata::distribute {

bool shards_weight_update(const ReplicaContext& ctx) {
  const auto* strategy = dynamic_cast<const ReplicatedStrategy*>(&ctx.strategy());
  if (strategy == nullptr || strategy->num_replicas_in_sync() == 1) return false;
  const CommunicationOptions& options = strategy->communication_options();
  return options.shard_weight_update && options.check_divergence_every_n_steps == 0;
}

Tensor all_gather_rows(ReplicaContext& ctx, const Tensor& row) {
  if (auto* strategy = dynamic_cast<ReplicatedStrategy*>(&ctx.strategy())) {
    return strategy->all_gather_rows_in_replica(ctx, row);
  }
  STRATA_CHECK_ARG(row.rank() == 2 && row.shape().dim(0) == 1,
                   "all_gather_rows: expected one row of shape [1, columns], got ", row.shape());
  return ctx.all_gather(row, 0);
}

}  // namespace strata::distribute
