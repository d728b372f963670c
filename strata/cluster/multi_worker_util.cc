#include "strata/cluster/multi_worker_util.h"

#include <array>
#include <string_view>

#include "strata/base/errors.h"

namespace strata::distribute::multi_worker_util {
namespace {

constexpr std::array<std::string_view, 4> kAllowedTaskTypes = {"chief", "worker", "evaluator",
                                                               "ps"};

bool allowed(std::string_view type) {
  for (auto t : kAllowedTaskTypes) {
    if (t == type) return true;
  }
  return false;
}

size_t count(const train::ClusterSpec& spec, std::string_view job) {
  return spec.has_job(job) ? spec.num_tasks(job) : 0;
}

}  // namespace

void validate_cluster_spec(const train::ClusterSpec& spec,
                           const std::optional<std::string>& task_type,
                           std::optional<int> task_id) {
  if (!spec.empty()) {
    STRATA_CHECK_ARG(
        task_type && task_id,
        "When `cluster_spec` is given, you must also specify `task_type` and `task_id`.");
  }
  for (const auto& job : spec.jobs()) {
    STRATA_CHECK_ARG(allowed(job),
                     "Disallowed task type found in cluster spec. Allowed types are "
                     "['chief', 'worker', 'evaluator', 'ps'] and the cluster spec is ",
                     spec, " (job '", job, "')");
  }
  if (task_type) {
    STRATA_CHECK_ARG(allowed(*task_type), "Unrecognized task_type: '", *task_type,
                     "', valid task types are: ['chief', 'worker', 'evaluator', 'ps']");
    STRATA_CHECK_ARG(spec.has_job(*task_type) || *task_type == "evaluator" || spec.empty(),
                     "`task_type` '", *task_type, "' not found in cluster_spec.");
  }
  STRATA_CHECK_ARG(count(spec, "chief") <= 1, "There must be at most one 'chief' job.");
  STRATA_CHECK_ARG(count(spec, "evaluator") <= 1, "There must be at most one 'evaluator' job.");
  if (task_type && task_id && spec.has_job(*task_type)) {
    STRATA_CHECK_ARG(*task_id >= 0, "The `task_id` ", *task_id, " must be >= 0.");
    STRATA_CHECK_ARG(static_cast<size_t>(*task_id) < spec.job_tasks(*task_type).size(),
                     "The `task_id` ", *task_id, " exceeds the maximum id of ", *task_type, ".");
  }
}

bool is_chief(const train::ClusterSpec& spec, const std::optional<std::string>& task_type,
              std::optional<int> task_id) {
  if (spec.empty()) return true;
  validate_cluster_spec(spec, task_type, task_id);
  if (*task_type == "chief" || *task_type == "evaluator") return true;
  return !spec.has_job("chief") && *task_type == "worker" && *task_id == 0;
}

int worker_count(const train::ClusterSpec& spec, const std::string& task_type) {
  validate_cluster_spec(spec, task_type, 0);
  STRATA_CHECK_ARG(task_type == "chief" || task_type == "worker" || task_type == "evaluator",
                   "Unexpected `task_type` '", task_type, "'");
  const size_t n = task_type == "evaluator" ? count(spec, "evaluator")
                                            : count(spec, "chief") + count(spec, "worker");
  STRATA_CHECK_ARG(n > 0,
                   "No `worker`, `chief` or `evaluator` tasks can be found in `cluster_spec`.");
  return static_cast<int>(n);
}

int id_in_cluster(const train::ClusterSpec& spec, const std::string& task_type, int task_id) {
  validate_cluster_spec(spec, task_type, task_id);
  if (task_type == "chief") return 0;
  if (task_type == "worker") return task_id + static_cast<int>(count(spec, "chief"));
  if (task_type == "evaluator") return task_id;
  throw InvalidArgumentError(str_cat("There is no id for task_type '", task_type, "'"));
}

std::string collective_leader(const train::ClusterSpec& spec,
                              const std::optional<std::string>& task_type,
                              std::optional<int> task_id) {
  if (spec.empty()) return "";
  validate_cluster_spec(spec, task_type, task_id);
  if (*task_type == "evaluator") return "";
  if (spec.has_job("chief")) return "/job:chief/replica:0/task:0";
  STRATA_CHECK_ARG(spec.has_job("worker"),
                   "collective_leader: expected a 'chief' or 'worker' job in ", spec);
  return "/job:worker/replica:0/task:0";
}

}  // namespace strata::distribute::multi_worker_util
