#include "strata/cluster/tpu_cluster_resolver.h"

#include <algorithm>
#include <vector>

#include "strata/base/errors.h"

namespace strata::distribute::cluster_resolver {
namespace {

// "host:port" with a non-empty host and a decimal port (after "grpc://").
bool looks_like_address(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
  for (size_t i = colon + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return s.find('/') == std::string::npos;
}

}  // namespace

TPUClusterResolver::TPUClusterResolver(std::string tpu, TPUClusterResolverOptions options)
    : tpu_(std::move(tpu)) {
  STRATA_CHECK_ARG(!options.job_name.empty(),
                   "TPUClusterResolverOptions.job_name must not be empty");
  task_type_ = options.job_name;
  task_id_ = 0;
  rpc_layer_ = "grpc";
  std::vector<train::ClusterSpec::Job> jobs;
  if (tpu_ == "local") {
    local_ = true;
  } else if (tpu_.empty()) {
    auto tfc = options.tf_config ? TFConfigClusterResolver::from_string(*options.tf_config)
                                 : TFConfigClusterResolver();
    const auto spec = tfc.cluster_spec();
    local_ = !spec.has_job(options.job_name);
    if (!local_) {
      jobs = spec.as_dict();
      if (auto type = tfc.task_type()) task_type_ = type;
      if (auto id = tfc.task_id()) task_id_ = id;
    }
  } else {
    local_ = false;
    std::vector<std::string> addresses;
    size_t start = 0;
    while (start <= tpu_.size()) {
      size_t comma = tpu_.find(',', start);
      if (comma == std::string::npos) comma = tpu_.size();
      std::string item = tpu_.substr(start, comma - start);
      if (item.rfind("grpc://", 0) == 0) item = item.substr(7);
      STRATA_CHECK_ARG(
          looks_like_address(item),
          "TPUClusterResolver: expected \"\", \"local\" or comma-separated worker addresses "
          "(host:port or grpc://host:port), got '",
          tpu_, "' (Cloud TPU names cannot be resolved: Strata has no Cloud TPU API)");
      addresses.push_back(std::move(item));
      start = comma + 1;
    }
    jobs.emplace_back(options.job_name, train::JobTasks(std::move(addresses)));
  }
  if (options.coordinator_name && options.coordinator_address && !local_) {
    jobs.emplace_back(*options.coordinator_name, train::JobTasks{*options.coordinator_address});
  }
  cluster_spec_ = train::ClusterSpec(std::move(jobs));
}

std::string TPUClusterResolver::master(const std::optional<std::string>& task_type,
                                       std::optional<int> task_id,
                                       const std::optional<std::string>& rpc_layer) const {
  if (local_) return "";
  const auto type = task_type ? task_type : task_type_;
  const int id = task_id.value_or(task_id_.value_or(0));
  if (!type || !cluster_spec_.has_job(*type)) {
    throw InvalidArgumentError("No TPUs with the specified names exist.");
  }
  const auto indices = cluster_spec_.task_indices(*type);
  STRATA_CHECK_ARG(std::find(indices.begin(), indices.end(), id) != indices.end(),
                   "No TPUs with the specified names exist. (task ", id, " of job '", *type, "')");
  return format_master_url(cluster_spec_.task_address(*type, id),
                           rpc_layer ? rpc_layer : rpc_layer_);
}

}  // namespace strata::distribute::cluster_resolver
