#pragma once
// The rebatch rule of tf.distribute (spec §5.3): how a global batch of B
// examples is split among the replicas of W input pipelines with r replicas
// each.
//
//   sd::rebatch_sizes(8, 1, 2, 0);    // {4, 4}
//   sd::rebatch_sizes(7, 2, 2, 0);    // {2, 2, 2, 1}  (worker 0)
//   sd::rebatch_sizes(7, 2, 2, 1);    // {2, 1, 2, 2}  (worker 1)
//   sd::rebatch_sizes(2, 1, 4, 0);    // {1, 1, 0, 0}  (replicas 2, 3 get empty batches)
//   sd::legacy_rebatch_sizes(4, 3);   // {2, 2, 0}
//
// Each list has W·r entries summing to B, any two differ by at most 1, and a
// worker's list is worker 0's rotated left by i·r, so the sub-batches of one
// step across all workers add up to B. A worker consumes its own B-row batch
// over W steps (r sub-batches per step).

#include <cstdint>
#include <vector>

namespace strata::distribute {

// TF's batch_sizes_for_worker(B, W, r, i) (RebatchDatasetV2). InvalidArgumentError
// for B < 0, W < 1, r < 1 or i outside [0, W).
std::vector<int64_t> rebatch_sizes(int64_t global_batch_size, int num_workers,
                                   int replicas_per_worker, int worker_index);

// The legacy rule (RebatchDataset, used when B is unknown or under DATA
// sharding): a batch of b rows cut into n consecutive pieces of ceil(b / n),
// the last ones smaller or empty.
std::vector<int64_t> legacy_rebatch_sizes(int64_t batch, int num_replicas);

}  // namespace strata::distribute
