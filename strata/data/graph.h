#pragma once
// Dataset graph inspection and rewrites, for the distribute layer (spec §5.3,
// §5.4). A Dataset is a DAG of nodes; every rewrite returns a new Dataset and
// leaves the original untouched (nodes are immutable and shared).
//
//   namespace sd = strata::data;
//   auto ds = sd::Dataset::list_files("/data/*.tfrecord", {.shuffle = false})
//                 .interleave([](const sd::Element& f) {
//                   return sd::TFRecordDataset({f[0].item<std::string>()}); })
//                 .batch(64).prefetch(sd::AUTOTUNE);
//   sd::source_files(ds);                 // the 8 files, sorted
//   sd::static_batch_size(ds);            // 64 (nearest batch; spec §5.3)
//   auto mine = sd::auto_shard(ds, sd::AutoShardPolicy::AUTO, /*num_workers=*/2,
//                              /*index=*/1, /*num_replicas=*/4);   // files 1, 3, 5, 7
//   auto per_replica = sd::apply_before_prefetch(mine, [](const sd::Dataset& d) {
//     return d.rebatch({16, 16}); });      // rebatch inserted before the prefetch
//
// Walking rules. "Pass-through" nodes have one input and keep the file
// structure: map, filter, batch, padded_batch, unbatch, rebatch (both), shuffle,
// repeat, take, skip, shard, enumerate, cache, prefetch, options. zip and
// concatenate are walked input by input. interleave/flat_map functions are C++
// callables the rewrite cannot look into: the walk assumes the function opens
// a reader on its input element (the list_files + interleave(TFRecordDataset)
// idiom) and shards the interleave's input (its file-name stream).
//
// Thread-safety: all functions are pure over immutable graphs.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "strata/data/dataset.h"

namespace strata::data {

// True for kinds that read files (TFRecord, TextLine, FixedLengthRecord).
bool is_reader(NodeKind k) noexcept;
// True for the pass-through kinds listed above.
bool is_pass_through(NodeKind k) noexcept;

// The files read by `ds`: every reader source's file list and every
// list_files source that feeds an interleave/flat_map, in graph order
// (depth-first, inputs in order), duplicates kept.
std::vector<std::string> source_files(const Dataset& ds);

// The nearest batching node walking up from the output through pass-through
// nodes (stopping at unbatch and rebatch, which change the batch).
struct BatchInfo {
  NodeKind kind = NodeKind::kBatch;  // kBatch or kPaddedBatch
  int64_t batch_size = -1;
  bool drop_remainder = false;
};
std::optional<BatchInfo> find_batch(const Dataset& ds);
// Spec §5.3's B: the nearest batching node's batch_size; without one, the
// common known leading dimension of element_spec(); otherwise -1.
int64_t static_batch_size(const Dataset& ds);

// Post-order rewrite: every node's inputs are rewritten first, then
// fn(node over the rewritten inputs) may return a replacement (nullopt keeps
// it). Shared sub-graphs are rewritten once.
using RewriteFn = std::function<std::optional<Dataset>(const Dataset&)>;
Dataset rewrite(const Dataset& ds, const RewriteFn& fn);

// Applies fn at the point above the trailing prefetch/options nodes and
// re-attaches them: TF inserts rebatch and DATA shards there.
Dataset apply_before_prefetch(const Dataset& ds, const std::function<Dataset(const Dataset&)>& fn);

// FILE policy: worker `index` of `num_workers` keeps files index, index + n, ...
// of each reader's (pre-shuffle) file list. A worker left without files fails
// at iteration with TF's "There aren't enough elements ..." InvalidArgumentError.
// NotFoundError (TF's messages) when the walk meets an unshardable source
// (range, generator, from_tensors, from_tensor_slices not feeding an
// interleave). num_workers == 1 returns ds unchanged.
Dataset shard_by_files(const Dataset& ds, int64_t num_workers, int64_t index);
// DATA policy: above the trailing prefetch/options, a rebatch there becomes
// rebatch_legacy(num_replicas) (spec §5.3c; num_replicas 0 keeps it), then a
// shard(num_workers, index) that requires every shard to be non-empty.
Dataset shard_by_data(const Dataset& ds, int64_t num_workers, int64_t index, int64_t num_replicas);
// HINT policy: every shard(SHARD_HINT, k) becomes shard(num_workers, index).
Dataset apply_shard_hints(const Dataset& ds, int64_t num_workers, int64_t index);
// The auto-shard rewrite of spec §5.4 with `policy` (AUTO: FILE, falling back
// to DATA on NotFoundError; OFF: unchanged). InvalidArgumentError unless
// num_workers >= 1, 0 <= index < num_workers and num_replicas >= 0.
Dataset auto_shard(const Dataset& ds, AutoShardPolicy policy, int64_t num_workers, int64_t index,
                   int64_t num_replicas);

// Node parameters, for kinds that have them (-1 / empty otherwise).
int64_t node_batch_size(const Dataset& ds);              // batch, padded_batch, prefetch buffer
bool node_drop_remainder(const Dataset& ds);             // batch, padded_batch, rebatch
std::vector<std::string> node_files(const Dataset& ds);  // readers, list_files
int64_t node_num_shards(const Dataset& ds);              // shard; rebatch_legacy's num_replicas
int64_t node_shard_index(const Dataset& ds);
std::vector<int64_t> node_rebatch_sizes(const Dataset& ds);

}  // namespace strata::data
