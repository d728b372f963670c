#pragma once
// Distributed variables (spec §4): MirroredVariable (synchronization ON_WRITE)
// and SyncOnReadVariable (ON_READ), behind the ordinary strata::Variable handle.
//
//   sd::MirroredStrategy strategy({"CPU:0", "CPU:1"});
//   strata::Variable v;
//   { auto scope = strategy.scope(); v = strata::Variable(strata::constant(1.f)); }
//   std::cout << v;                       // MirroredVariable:{ 0: <tf.Variable 'Variable:0' ...>,
//   1: ... } sd::is_mirrored_variable(v);          // true strategy.run([&] {
//   v.assign_add(strata::constant(1.f)); });   // NONE: each replica its own copy
//   sd::distributed_components(v);        // one plain Variable per local replica
//
// Creation (a strategy's scope installs the creator, on the caller's thread
// and on its replica threads): AUTO becomes ON_WRITE; NONE synchronization,
// an aggregation outside the enum and MEAN on a non-floating dtype are
// InvalidArgumentError with TF's wording. One component per local replica, on
// that replica's device, all initialised from replica 0's initial value (so
// random initialisers give identical copies). Component 0 keeps the name;
// component i is named "<name>/replica_<i>". A variable created inside `run`
// (a layer built lazily on its first call) is created once, through a
// merge_call, and every replica gets the same handle.
//
// Reads: in a replica context of the owning strategy, the replica's own
// component. Elsewhere (cross-replica, or outside every scope): a
// MirroredVariable gives the component on the current device, else component
// 0; a SyncOnReadVariable aggregates its components (SUM / MEAN across every
// replica of every worker, ONLY_FIRST_REPLICA: component 0, NONE:
// InvalidArgumentError).
//
// Writes follow §4.4:
//   MirroredVariable, replica context: NONE -> the local component only (as
//     current TF; the optimizer's updates rely on every replica computing the
//     same value); SUM / MEAN -> all replicas' values are aggregated (the same
//     tensor passed by every replica counts as one identical value: MEAN keeps
//     it, SUM with more than one replica is InvalidArgumentError), then every
//     component takes the result; ONLY_FIRST_REPLICA -> replica 0's value goes
//     to every component. Every replica must make the same update calls.
//   MirroredVariable, cross-replica context: the value goes to every component.
//   SyncOnReadVariable, replica context: the local component only.
//   SyncOnReadVariable, cross-replica context: assign of x with SUM writes x/R
//     to every component (so the SUM read gives x back); other aggregations
//     write x; assign_add/assign_sub with SUM is InvalidArgumentError.
// update_in_place (Variable) writes like assign: a MirroredVariable in replica
// context with aggregation NONE rewrites the local component's buffer in
// place; every other case rewrites a copy of the value read and assigns it.
// A different strategy current while reading or writing is
// FailedPreconditionError ("Mixing different tf.distribute.Strategy objects").
//
// Thread-safety: each component is a thread-safe Variable; replica threads
// touch only their own component except inside a merge (one thread runs it
// while the others wait).

#include <memory>
#include <vector>

#include "strata/core/variable.h"

namespace strata::distribute {

class Strategy;

bool is_distributed_variable(const Variable& v);
bool is_mirrored_variable(const Variable& v);
bool is_sync_on_read_variable(const Variable& v);
// The per-replica components of a distributed variable (local replica order);
// {v} for a plain variable.
std::vector<Variable> distributed_components(const Variable& v);
// The strategy whose scope created distributed variable `v`; nullptr for a
// plain variable.
const Strategy* owning_strategy(const Variable& v);
// The live distributed variable whose component `v` is; an empty handle when
// `v` is no component.
Variable distributed_container(const Variable& v);

namespace internal {
// Makes the distributed variable for `args` (already validated by the
// creator) with one component per local replica of `strategy`.
Variable make_distributed_variable(Strategy& strategy, const VariableArgs& args);
// A MirroredVariable of `strategy` over the given components (one per local
// replica, in local replica order, each already on its replica's device and
// holding the same value): for copies that are not plain variables (the
// sharded weight update's slots, weight_update_sharding.h). Goes through no
// creator and no initialisation broadcast.
Variable make_mirrored_variable(Strategy& strategy, std::vector<Variable> components);
// Validates and normalises `args` for a mirrored-style strategy (AUTO ->
// ON_WRITE, the §4.1 errors, trainable default).
VariableArgs check_distributed_variable_args(VariableArgs args);
}  // namespace internal

}  // namespace strata::distribute
