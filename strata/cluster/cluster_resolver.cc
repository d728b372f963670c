#include "strata/cluster/cluster_resolver.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/cluster/internal/parse.h"

namespace strata::distribute::cluster_resolver {

std::string format_master_url(const std::string& address,
                              const std::optional<std::string>& rpc_layer) {
  if (rpc_layer && !rpc_layer->empty()) return str_cat(*rpc_layer, "://", address);
  return address;
}

std::map<std::string, int> ClusterResolver::num_accelerators(const std::optional<std::string>&,
                                                             std::optional<int>) const {
  return {};
}

// --- TFConfigClusterResolver -------------------------------------------------

struct TFConfigClusterResolver::Parsed {
  train::ClusterSpec cluster;
  std::optional<std::string> task_type;
  std::optional<int> task_id;
  std::optional<std::string> rpc_layer;
  std::optional<std::string> session_master;
};

namespace {

std::optional<std::string> optional_string(const nlohmann::ordered_json& j, const char* field) {
  if (!j.contains(field) || j[field].is_null()) return std::nullopt;
  STRATA_CHECK_ARG(j[field].is_string(), "TF_CONFIG: expected \"", field, "\" to be a string, got ",
                   j[field].dump());
  return j[field].get<std::string>();
}

}  // namespace

TFConfigClusterResolver::TFConfigClusterResolver(TFConfigClusterResolverOptions options)
    : environment_(std::move(options.environment)) {
  task_type_ = std::move(options.task_type);
  task_id_ = options.task_id;
  rpc_layer_ = std::move(options.rpc_layer);
}

TFConfigClusterResolver TFConfigClusterResolver::from_string(
    std::string tf_config, TFConfigClusterResolverOptions options) {
  TFConfigClusterResolver resolver(std::move(options));
  resolver.fixed_config_ = std::move(tf_config);
  return resolver;
}

std::string TFConfigClusterResolver::tf_config_text() const {
  if (fixed_config_) return *fixed_config_;
  // TF reads os.environ on every access; so do we (the variable may change).
  const char* value = std::getenv("TF_CONFIG");
  return value ? std::string(value) : std::string("{}");
}

TFConfigClusterResolver::Parsed TFConfigClusterResolver::load() const {
  const std::string text = tf_config_text();
  Parsed parsed;
  // TF treats an empty variable like a missing one (json.loads of "{}").
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return parsed;
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::ordered_json::parse_error& e) {
    throw InvalidArgumentError(str_cat("TF_CONFIG: invalid JSON at byte ", e.byte, ": ", e.what()));
  }
  STRATA_CHECK_ARG(j.is_object(), "TF_CONFIG: expected a JSON object, got ", j.dump());
  if (j.contains("cluster") && !j["cluster"].is_null()) {
    STRATA_CHECK_ARG(
        j["cluster"].is_object(),
        "TF_CONFIG: expected \"cluster\" to be an object mapping job names to lists of "
        "addresses, got ",
        j["cluster"].dump());
    try {
      parsed.cluster = train::ClusterSpec::from_json(j["cluster"].dump());
    } catch (const InvalidArgumentError& e) {
      throw InvalidArgumentError(str_cat("TF_CONFIG: \"cluster\": ", e.what()));
    }
  }
  if (j.contains("task") && !j["task"].is_null()) {
    const auto& task = j["task"];
    STRATA_CHECK_ARG(task.is_object(), "TF_CONFIG: expected \"task\" to be an object, got ",
                     task.dump());
    if (task.contains("type") && !task["type"].is_null()) {
      STRATA_CHECK_ARG(task["type"].is_string(),
                       "TF_CONFIG: expected \"task.type\" to be a string, got ",
                       task["type"].dump());
      parsed.task_type = task["type"].get<std::string>();
    }
    if (task.contains("index") && !task["index"].is_null()) {
      const auto& index = task["index"];
      int value = 0;
      bool ok = false;
      if (index.is_number_integer()) {
        const auto wide = index.get<int64_t>();
        ok = wide >= INT32_MIN && wide <= INT32_MAX;
        value = static_cast<int>(wide);
      } else if (index.is_string()) {
        ok = ::strata::cluster::internal::parse_python_int(index.get<std::string>(), value);
      }
      STRATA_CHECK_ARG(ok, "TF_CONFIG: expected \"task.index\" to be an integer, got ",
                       index.dump());
      parsed.task_id = value;
    }
  }
  parsed.rpc_layer = optional_string(j, "rpc_layer");
  parsed.session_master = optional_string(j, "session_master");
  (void)optional_string(j, "environment");

  if (!parsed.cluster.empty() && parsed.task_type) {
    const std::string& type = *parsed.task_type;
    if (parsed.cluster.has_job(type)) {
      if (parsed.task_id) {
        const auto indices = parsed.cluster.task_indices(type);
        STRATA_CHECK_ARG(
            std::find(indices.begin(), indices.end(), *parsed.task_id) != indices.end(),
            "TF_CONFIG: \"task.index\" ", *parsed.task_id, " is out of range for job '", type,
            "' with task indices ", indices);
      }
    } else {
      // An evaluator may run outside the training cluster (TF allows it).
      STRATA_CHECK_ARG(type == "evaluator", "TF_CONFIG: \"task.type\" '", type,
                       "' is not a job of the cluster; jobs are ", parsed.cluster.jobs());
    }
  }
  return parsed;
}

train::ClusterSpec TFConfigClusterResolver::cluster_spec() const { return load().cluster; }

std::optional<std::string> TFConfigClusterResolver::task_type() const {
  if (task_type_) return task_type_;
  return load().task_type;
}

std::optional<int> TFConfigClusterResolver::task_id() const {
  if (task_id_) return task_id_;
  return load().task_id;
}

std::optional<std::string> TFConfigClusterResolver::rpc_layer() const {
  if (rpc_layer_) return rpc_layer_;
  return load().rpc_layer;
}

std::string TFConfigClusterResolver::master(const std::optional<std::string>& task_type,
                                            std::optional<int> task_id,
                                            const std::optional<std::string>& rpc_layer) const {
  const Parsed parsed = load();
  if (parsed.session_master && !parsed.session_master->empty()) return *parsed.session_master;
  const auto& cluster = parsed.cluster;
  const auto jobs = cluster.jobs();
  if (jobs.empty() || (jobs.size() == 1 && cluster.job_tasks(jobs[0]).size() == 1)) return "";
  const auto type = task_type ? task_type : (task_type_ ? task_type_ : parsed.task_type);
  const auto id = task_id ? task_id : (task_id_ ? task_id_ : parsed.task_id);
  STRATA_CHECK_ARG(type && id,
                   "TFConfigClusterResolver.master: expected a task type and id (as arguments or "
                   "in TF_CONFIG[\"task\"]), got type ",
                   type.value_or("None"), " and id ",
                   id ? std::to_string(*id) : std::string("None"));
  const auto layer = rpc_layer ? rpc_layer : (rpc_layer_ ? rpc_layer_ : parsed.rpc_layer);
  return format_master_url(cluster.task_address(*type, *id), layer);
}

// --- SimpleClusterResolver ---------------------------------------------------

SimpleClusterResolver::SimpleClusterResolver(train::ClusterSpec cluster_spec,
                                             SimpleClusterResolverOptions options)
    : cluster_spec_(std::move(cluster_spec)),
      master_(std::move(options.master)),
      environment_(std::move(options.environment)),
      num_accelerators_(std::move(options.num_accelerators)) {
  task_type_ = std::move(options.task_type);
  task_id_ = options.task_id;
  rpc_layer_ = std::move(options.rpc_layer);
}

std::string SimpleClusterResolver::master(const std::optional<std::string>& task_type,
                                          std::optional<int> task_id,
                                          const std::optional<std::string>& rpc_layer) const {
  // TF uses the arguments only (not the configured task) to pick an address.
  std::string address =
      task_type && task_id ? cluster_spec_.task_address(*task_type, *task_id) : master_;
  return format_master_url(address, rpc_layer ? rpc_layer : rpc_layer_);
}

std::map<std::string, int> SimpleClusterResolver::num_accelerators(
    const std::optional<std::string>&, std::optional<int>) const {
  return num_accelerators_;
}

}  // namespace strata::distribute::cluster_resolver
