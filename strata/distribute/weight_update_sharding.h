#pragma once
// What the sharded weight update (CommunicationOptions.shard_weight_update;
// the Keras optimizers' apply_gradients, keras/optimizer.h) needs from the
// strategy of a replica, through the abstract API.
//
//   sd::ReplicaContext& ctx = *sd::get_replica_context();
//   if (sd::shards_weight_update(ctx)) {
//     // ... update this replica's block of every variable, then:
//     Tensor all = sd::all_gather_rows(ctx, my_row);   // [num_replicas_in_sync, columns]
//   }
//
// Thread-safety: called on a replica thread with that replica's context.

#include "strata/core/tensor.h"

namespace strata::distribute {

class ReplicaContext;

// Whether `ctx`'s strategy asks for sharded weight updates: a strategy with
// CommunicationOptions (MirroredStrategy, MultiWorkerMirroredStrategy) whose
// shard_weight_update is set and whose check_divergence_every_n_steps is 0
// (the check compares whole copies of every mirrored variable, slots
// included). False for every other strategy and for one replica.
bool shards_weight_update(const ReplicaContext& ctx);

// Each replica's `row` (rank 2, one row; the same columns and dtype on every
// replica) gathered across every replica of every worker in global replica
// order: [num_replicas_in_sync, columns], through the strategy's collectives.
// Every replica must call it. InvalidArgumentError for a value that is not
// one row.
Tensor all_gather_rows(ReplicaContext& ctx, const Tensor& row);

}  // namespace strata::distribute
