#pragma once
// What the sharded weight update (CommunicationOptions.shard_weight_update;
// the Keras optimizers' apply_gradients, keras/optimizer.h) needs from the
// distribute layer, through the abstract API: whether a strategy shards, the
// partition of a variable into per-replica blocks, the reduce-scatter and
// all-gather of packed rows, and slot variables whose copies hold only their
// replica's block.
//
//   sd::ReplicaContext& ctx = *sd::get_replica_context();
//   if (sd::shards_weight_update(ctx)) {
//     const sd::UpdateBlock b = sd::update_block(n, ctx.num_replicas_in_sync(), r);
//     Tensor mine = sd::reduce_scatter_rows(ctx, rows);   // [1, columns]: row r, summed
//     // ... update this replica's block of every variable, then:
//     Tensor all = sd::all_gather_rows(ctx, my_row);      // [num_replicas_in_sync, columns]
//   }
//   // a slot made in the strategy's cross-replica context (scope, merge_call):
//   Variable m = sd::make_sharded_slot_variable(strategy, {zeros, {.name = "Adam/w/m"}});
//   sd::sharded_slot_block(sd::distributed_components(m)[local]);  // its block, [end - begin]
//
// Sharded slot variables: a MirroredVariable of the strategy (so checkpoints,
// distributed_components() and cross-replica assignments treat it as any
// mirrored variable) whose copy on global replica r is in one of two states:
//   * block: it stores only elements [begin, end) of block r of the flattened
//     value (update_block), 1/R of the value; this is the state it is made in.
//     Reading the copy (value(), or update_in_place) is then
//     FailedPreconditionError: its other elements live on other replicas, and
//     only a collective (the optimizer's gather) brings them back. assign,
//     assign_add and assign_sub of a whole value keep its block r (a restore
//     scatters the saved value);
//   * whole: it stores the whole value, as a plain copy (after
//     make_sharded_slot_whole: the optimizer gathers the blocks for a
//     checkpoint, or for an update that cannot shard).
// sharded_slot_block() returns the block as a variable of its own (shape
// [end - begin]; an empty block for a replica past the last element), first
// dropping every other element of a whole copy. The copies' buffers are
// their own: held bytes are what the state stores.
//
// Thread-safety: the functions on a ReplicaContext are called on that
// replica's thread. A sharded slot copy is thread-safe; its state changes
// under its own lock.

#include <cstdint>
#include <memory>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/core/variable.h"

namespace strata::distribute {

class ReplicaContext;
class Strategy;

// Whether `strategy` asks for sharded weight updates: a strategy with
// CommunicationOptions (MirroredStrategy, MultiWorkerMirroredStrategy) of more
// than one replica whose shard_weight_update is set and whose
// check_divergence_every_n_steps is 0 (the check compares whole copies of
// every mirrored variable, slots included). False for every other strategy.
bool shards_weight_update(const Strategy& strategy);
// The same for the strategy of `ctx`.
bool shards_weight_update(const ReplicaContext& ctx);

// The partition of a flattened variable of `num_elements` among
// `num_replicas` replicas: blocks of `width` = ceil(num_elements /
// num_replicas) rounded up to a multiple of kUpdateBlockAlign elements, block
// `replica` covering [begin, end) (the last ones shorter or empty; a variable
// of at most 16 elements belongs to replica 0). The rounding puts every block
// on a 64-byte boundary of float32: vectorised kernels (Eigen's) run a packet
// path on whole packets from an aligned start and a scalar path on the rest
// (rsqrt is an approximation refined by a Newton step in packets, 1 / sqrt in
// scalars), so an element must sit at the same packet position in its block
// as in the whole variable for the update to be bit-identical. 16 elements is
// a multiple of every packet width.
inline constexpr int64_t kUpdateBlockAlign = 16;
struct UpdateBlock {
  int64_t begin;
  int64_t end;
  int64_t width;
};
UpdateBlock update_block(int64_t num_elements, int num_replicas, int replica);

// Each replica's `row` (rank 2, one row; the same columns and dtype on every
// replica) gathered across every replica of every worker in global replica
// order: [num_replicas_in_sync, columns], through the strategy's collectives.
// Every replica must call it. InvalidArgumentError for a value that is not
// one row.
Tensor all_gather_rows(ReplicaContext& ctx, const Tensor& row);

// Each replica's `rows` ([num_replicas_in_sync, columns]; the same shape and
// dtype on every replica) summed across every replica; replica r receives
// row r of the sum, [1, columns]: the strategy's reduce-scatter
// (ReplicatedStrategy::reduce_scatter_rows_in_replica), else an all-reduce
// of which each replica keeps its row. Every replica must call it.
// InvalidArgumentError for another shape.
Tensor reduce_scatter_rows(ReplicaContext& ctx, const Tensor& rows);

// Whether the replicas of `ctx`'s strategy are all threads of this process
// with the collectives' own sums (ReplicatedStrategy::replicas_share_process):
// then reduce_blocks_in_process and exchange_rows_in_process replace the
// reduce-scatter and all-gather of packed rows, reading the other replicas'
// tensors in place.
bool replicas_share_process(const ReplicaContext& ctx);

// Where replicas_share_process: replica r's block r (update_block) of the
// SUM across every replica of each of `values` (the same shapes and dtypes
// on every replica), flat [end - begin], summed straight from the other
// replicas' tensors by the kernel and in the replica order of the
// collectives' all-reduce, so bit-identical to it. A barrier of the
// replicas; every replica must call it. InvalidArgumentError when the
// replicas' shapes or dtypes differ.
std::vector<Tensor> reduce_blocks_in_process(ReplicaContext& ctx,
                                             const std::vector<Tensor>& values);

// Where replicas_share_process: every replica's `rows` (handles, shared
// buffers) in replica order. A barrier of the replicas; every replica must
// call it.
std::shared_ptr<const std::vector<std::vector<Tensor>>> exchange_rows_in_process(
    ReplicaContext& ctx, const std::vector<Tensor>& rows);

// A sharded slot variable of `strategy` (see above) with `args` (the whole
// initial value; the options of a slot: ON_WRITE or AUTO, aggregation NONE),
// every copy in the block state. Called in the strategy's cross-replica
// context (its scope, or a merge_call), on every worker at the same point
// (the copies are made from the initial value, not broadcast from the chief:
// slots start from constants). Component 0 keeps the name; component i is
// "<name>/replica_<i>", as make_distributed_variable's.
Variable make_sharded_slot_variable(Strategy& strategy, const VariableArgs& args);
// Whether `v` is a variable make_sharded_slot_variable made.
bool is_sharded_slot_variable(const Variable& v);

// Whether `copy` (a component of a sharded slot variable) is in the block
// state; false for any other variable.
bool holds_block(const Variable& copy);
// The block of `copy` (a component of a sharded slot variable) as a variable
// of shape [end - begin]: reads and writes are the copy's own storage. A
// whole copy first drops every element outside its block (the block state).
// InvalidArgumentError for another variable.
Variable sharded_slot_block(const Variable& copy);
// The current values of `copy`'s block, flat [end - begin] (from either state).
Tensor sharded_slot_block_values(const Variable& copy);
// Puts `copy` in the whole state holding `value` (the variable's shape and
// dtype; InvalidArgumentError otherwise).
void make_sharded_slot_whole(const Variable& copy, const Tensor& value);
// The bytes `copy`'s storage holds now: a sharded slot copy's block or whole
// value; any other variable's whole value.
int64_t held_bytes(const Variable& copy);

}  // namespace strata::distribute
