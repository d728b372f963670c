#include "strata/distribute/rebatch.h"

#include <algorithm>

#include "strata/base/errors.h"

namespace strata::distribute {

std::vector<int64_t> rebatch_sizes(int64_t global_batch_size, int num_workers,
                                   int replicas_per_worker, int worker_index) {
  STRATA_CHECK_ARG(global_batch_size >= 0, "rebatch_sizes: expected a batch size >= 0, got ",
                   global_batch_size);
  STRATA_CHECK_ARG(num_workers >= 1 && replicas_per_worker >= 1,
                   "rebatch_sizes: expected num_workers >= 1 and replicas_per_worker >= 1, got ",
                   num_workers, " and ", replicas_per_worker);
  STRATA_CHECK_ARG(worker_index >= 0 && worker_index < num_workers,
                   "rebatch_sizes: expected worker_index in [0, ", num_workers, "), got ",
                   worker_index);
  const int64_t n = int64_t{num_workers} * replicas_per_worker;
  const int64_t floor = global_batch_size / n;
  const int64_t num_ceil = global_batch_size - n * floor;
  std::vector<int64_t> sizes(n, floor);
  std::fill(sizes.begin(), sizes.begin() + num_ceil, floor + 1);
  std::rotate(sizes.begin(), sizes.begin() + (int64_t{worker_index} * replicas_per_worker) % n,
              sizes.end());
  return sizes;
}

std::vector<int64_t> legacy_rebatch_sizes(int64_t batch, int num_replicas) {
  STRATA_CHECK_ARG(batch >= 0 && num_replicas >= 1,
                   "legacy_rebatch_sizes: expected batch >= 0 and num_replicas >= 1, got ", batch,
                   " and ", num_replicas);
  const int64_t piece = (batch + num_replicas - 1) / num_replicas;
  std::vector<int64_t> sizes;
  int64_t left = batch;
  for (int i = 0; i < num_replicas; ++i) {
    const int64_t s = std::min(piece, left);
    sizes.push_back(s);
    left -= s;
  }
  return sizes;
}

}  // namespace strata::distribute
