#pragma once
// The execution pieces sharded_ops.cc's rules are made of, shared with the
// op-API dispatcher (dispatch.cc). Not installed.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "strata/core/device.h"
#include "strata/core/tensor.h"
#include "strata/tpu/sharded/sharded_ops.h"
#include "strata/tpu/sharding.h"

namespace strata::tpu::sharded::internal {

// Adds one to fallback_count(op).
void count_fallback(const std::string& op);

// Runs fn(d) for every logical device d in `which`, each under a DeviceScope
// of devices[d], in parallel: the caller runs the first, every other one is a
// task of its device's ThreadPool (run by a worker of that pool, or by the
// caller if none has started it when the caller gets to it). Returns after
// every shard has run; result[d] stays undefined for devices not in `which`.
// Ops recorded by the shards are replayed into the caller's tapes in
// logical-device order afterwards. Rethrows the first error (in `which`
// order) after every shard has run.
std::vector<Tensor> run_shards(const std::vector<const Device*>& devices,
                               const std::vector<int>& which, const std::function<Tensor(int)>& fn);

// The logical devices holding a shard of `s` (all but for MAXIMAL: its holder).
std::vector<int> holders(const tpu::Sharding& s);
// The partition count of dimension i (1 unless tiled).
int64_t parts(const tpu::Sharding& s, int i);
// Whether a tiled sharding splits any dimension.
bool any_split(const tpu::Sharding& s);

// The fallback: gathers every input to logical device 0 of the first, runs
// `op` there once, re-shards to the first input's sharding when the result's
// shape suits it, else replicates. Counts a fallback of `name`.
ShardedTensor fallback(const std::string& name, const std::vector<ShardedTensor>& inputs,
                       const std::function<Tensor(const std::vector<Tensor>&)>& op);

// Slices a plain operand `b` (broadcast against a tensor of `full` shape) to
// logical device d's tile of `s` (in the dimensions where b is not 1).
Tensor broadcast_tile(const Tensor& b, const tpu::Sharding& s, const TensorShape& full, int d);
// Whether broadcasting `b` against `a` gives `a` back.
bool broadcasts_into(const TensorShape& b, const TensorShape& a);

}  // namespace strata::tpu::sharded::internal
