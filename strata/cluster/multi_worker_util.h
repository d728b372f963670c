#pragma once
// Roles in a multi-worker cluster, as TF's distribute/multi_worker_util.
//
//   namespace mwu = strata::distribute::multi_worker_util;
//   strata::train::ClusterSpec spec({{"worker", {"h0:1", "h1:1"}}, {"ps", {"h2:1"}}});
//   mwu::is_chief(spec, "worker", 0);            // true: no "chief" job, so worker 0 is chief
//   mwu::worker_count(spec, "worker");           // 2 (chief + workers)
//   mwu::id_in_cluster(spec, "worker", 1);       // 1 (the input pipeline id / replica offset)
//   mwu::collective_leader(spec, "worker", 1);   // "/job:worker/replica:0/task:0"
//
// Every function validates first (validate_cluster_spec) and throws
// InvalidArgumentError (TF: ValueError) with TF's message. Stateless: thread-safe.

#include <optional>
#include <string>

#include "strata/cluster/cluster_spec.h"

namespace strata::distribute::multi_worker_util {

// TF's _validate_cluster_spec: jobs and task_type must be chief, worker,
// evaluator or ps; task_type must be a job of the cluster (except "evaluator");
// at most one chief and one evaluator task; task_id below the job's task count.
// With a non-empty cluster, a missing task_type or task_id is an error ("When
// `cluster_spec` is given, you must also specify `task_type` and `task_id`.").
void validate_cluster_spec(const train::ClusterSpec& cluster_spec,
                           const std::optional<std::string>& task_type, std::optional<int> task_id);

// Chief and evaluator tasks are chiefs; without a chief job, worker 0 is. An
// empty cluster (single-worker mode) is its own chief.
bool is_chief(const train::ClusterSpec& cluster_spec, const std::optional<std::string>& task_type,
              std::optional<int> task_id);

// #chief + #worker for chief/worker tasks; #evaluator for the evaluator. Other
// task types and a count of 0 are InvalidArgumentError.
int worker_count(const train::ClusterSpec& cluster_spec, const std::string& task_type);

// chief -> 0; worker i -> i + #chief; evaluator i -> i; others: InvalidArgumentError.
int id_in_cluster(const train::ClusterSpec& cluster_spec, const std::string& task_type,
                  int task_id);

// "/job:chief/replica:0/task:0" when a chief exists, else "/job:worker/replica:0/task:0";
// "" for an empty cluster or an evaluator.
std::string collective_leader(const train::ClusterSpec& cluster_spec,
                              const std::optional<std::string>& task_type,
                              std::optional<int> task_id);

}  // namespace strata::distribute::multi_worker_util
