#pragma once
// Where this process writes a checkpoint (TF's rule for multi-worker
// training): every worker runs the same saving code, since reading the
// variables may need all of them (a SyncOnReadVariable sums across workers),
// but only the chief's files are kept. A worker that should not checkpoint
// (strategy.extended().should_checkpoint() false under a strategy in
// multi-worker mode) writes into "<dir>/workertemp_<task_id>" and removes it
// at once; it neither records the checkpoint in the `checkpoint` state file
// nor deletes old checkpoints (the chief does both).
//
// The strategy is the one owning the checkpoint's distributed variables, else
// the current one. Thread-safety: reads the graph and the strategy only.

#include <optional>
#include <string>

#include "strata/train/internal/object_graph_walk.h"

namespace strata::train::internal {

// The temporary directory to write into instead of `dir` (`dir` itself when
// it already is "workertemp_<task_id>"), or std::nullopt when this process
// writes at the real path (the chief, or a single worker).
std::optional<std::string> worker_temp_dir(const LiveGraph& live, const std::string& dir);

}  // namespace strata::train::internal
