#include "strata/cluster/slurm_cluster_resolver.h"

#include <algorithm>
#include <cstdlib>

#include "strata/base/errors.h"
#include "strata/cluster/internal/parse.h"

namespace strata::distribute::cluster_resolver {
namespace {

using ::strata::cluster::internal::parse_python_int;

// Splits on commas outside brackets.
std::vector<std::string> split_top_level(std::string_view list) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    STRATA_CHECK_ARG(depth >= 0 && depth <= 1, "expand_hostlist: unbalanced brackets in '", list,
                     "'");
    if (c == ',' && depth == 0) {
      parts.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  STRATA_CHECK_ARG(depth == 0, "expand_hostlist: unbalanced brackets in '", list, "'");
  parts.push_back(std::move(current));
  return parts;
}

// "01-03,07" -> {"01", "02", "03", "07"}.
std::vector<std::string> expand_range(std::string_view hostlist, std::string_view ranges) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= ranges.size()) {
    size_t comma = ranges.find(',', start);
    if (comma == std::string_view::npos) comma = ranges.size();
    std::string_view item = ranges.substr(start, comma - start);
    const size_t dash = item.find('-');
    std::string_view lo = item.substr(0, dash);
    std::string_view hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    int a = 0, b = 0;
    const bool digits = !lo.empty() && !hi.empty() && std::all_of(lo.begin(), lo.end(), [](char c) {
      return c >= '0' && c <= '9';
    }) && std::all_of(hi.begin(), hi.end(), [](char c) { return c >= '0' && c <= '9'; });
    STRATA_CHECK_ARG(digits && parse_python_int(lo, a) && parse_python_int(hi, b) && a <= b,
                     "expand_hostlist: expected a range like 01-03 in '", hostlist, "', got '",
                     item, "'");
    for (int i = a; i <= b; ++i) {
      std::string number = std::to_string(i);
      // SLURM keeps the width of the range's start ("01-10" -> 01 ... 10).
      if (number.size() < lo.size()) number.insert(0, lo.size() - number.size(), '0');
      out.push_back(std::move(number));
    }
    start = comma + 1;
  }
  return out;
}

void expand_name(std::string_view hostlist, std::string_view name, std::vector<std::string>& out) {
  const size_t open = name.find('[');
  if (open == std::string_view::npos) {
    STRATA_CHECK_ARG(name.find(']') == std::string_view::npos,
                     "expand_hostlist: unbalanced brackets in '", hostlist, "'");
    out.emplace_back(name);
    return;
  }
  const size_t close = name.find(']', open);
  STRATA_CHECK_ARG(close != std::string_view::npos, "expand_hostlist: unbalanced brackets in '",
                   hostlist, "'");
  const std::string_view prefix = name.substr(0, open);
  std::vector<std::string> suffixes;
  expand_name(hostlist, name.substr(close + 1), suffixes);
  for (const auto& middle : expand_range(hostlist, name.substr(open + 1, close - open - 1))) {
    for (const auto& suffix : suffixes) out.push_back(str_cat(prefix, middle, suffix));
  }
}

std::optional<std::string> lookup(const std::optional<std::map<std::string, std::string>>& env,
                                  const std::string& name) {
  if (env) {
    auto it = env->find(name);
    if (it == env->end()) return std::nullopt;
    return it->second;
  }
  const char* value = std::getenv(name.c_str());
  if (!value) return std::nullopt;
  return std::string(value);
}

std::string require(const std::optional<std::map<std::string, std::string>>& env,
                    std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto value = lookup(env, name)) return *value;
  }
  throw FailedPreconditionError(str_cat("SlurmClusterResolver requires the ", *names.begin(),
                                        " environment variable (not running under Slurm?)"));
}

int require_int(const std::optional<std::map<std::string, std::string>>& env, const char* name) {
  const std::string value = require(env, {name});
  int out = 0;
  STRATA_CHECK_ARG(parse_python_int(value, out), "SlurmClusterResolver: expected ", name,
                   " to be an integer, got '", value, "'");
  return out;
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view hostlist) {
  std::vector<std::string> hosts;
  for (const auto& part : split_top_level(hostlist)) {
    if (part.empty()) continue;
    expand_name(hostlist, part, hosts);
  }
  return hosts;
}

std::vector<int> expand_tasks_per_node(std::string_view tasks_per_node) {
  std::vector<int> out;
  for (const auto& item : split_top_level(tasks_per_node)) {
    std::string_view s = item;
    int count = 0, repeat = 1;
    const size_t paren = s.find('(');
    if (paren != std::string_view::npos) {
      const bool ok = s.size() > paren + 3 && s.substr(paren, 2) == "(x" && s.back() == ')' &&
                      parse_python_int(s.substr(paren + 2, s.size() - paren - 3), repeat) &&
                      repeat > 0;
      STRATA_CHECK_ARG(ok, "expand_tasks_per_node: expected an item like 2(x3) in '",
                       tasks_per_node, "', got '", item, "'");
      s = s.substr(0, paren);
    }
    STRATA_CHECK_ARG(parse_python_int(s, count) && count >= 0,
                     "expand_tasks_per_node: expected a task count in '", tasks_per_node,
                     "', got '", item, "'");
    out.insert(out.end(), static_cast<size_t>(repeat), count);
  }
  return out;
}

SlurmClusterResolver::SlurmClusterResolver(SlurmClusterResolverOptions options)
    : gpus_per_task_(options.gpus_per_task) {
  const auto& env = options.environment;
  const int rank = require_int(env, "SLURM_PROCID");
  const int num_tasks = require_int(env, "SLURM_NTASKS");
  rpc_layer_ = options.rpc_layer;

  // Hosts and their task counts, sorted by host name as TF does.
  std::map<std::string, int> per_node = options.tasks_per_node;
  if (per_node.empty()) {
    const std::string nodelist = require(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"});
    const std::string counts = require(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
    const auto hosts = expand_hostlist(nodelist);
    const auto tasks = expand_tasks_per_node(counts);
    STRATA_CHECK_ARG(hosts.size() == tasks.size(), "SlurmClusterResolver: the node list '",
                     nodelist, "' has ", hosts.size(), " hosts but the tasks per node '", counts,
                     "' describe ", tasks.size());
    for (size_t i = 0; i < hosts.size(); ++i) per_node[hosts[i]] = tasks[i];
  }
  STRATA_CHECK_ARG(options.port_base > 0 && options.port_base < 65536,
                   "SlurmClusterResolverOptions.port_base must be a TCP port, got ",
                   options.port_base);
  int tasks_cap = -1;
  if (options.gpus_per_node) {
    const int per_task = options.gpus_per_task.value_or(1);
    STRATA_CHECK_ARG(per_task > 0, "SlurmClusterResolverOptions.gpus_per_task must be > 0, got ",
                     per_task);
    tasks_cap = *options.gpus_per_node / per_task;
    gpus_per_task_ = per_task;
  }
  std::vector<std::string> addresses;
  for (const auto& [host, count] : per_node) {
    const int n = tasks_cap >= 0 ? std::min(count, tasks_cap) : count;
    for (int k = 0; k < n; ++k) addresses.push_back(str_cat(host, ":", options.port_base + k));
  }

  auto jobs = options.jobs;
  if (jobs.empty()) jobs.emplace_back("worker", num_tasks);
  std::sort(jobs.begin(), jobs.end());
  int requested = 0;
  for (const auto& [name, count] : jobs) {
    STRATA_CHECK_ARG(count >= 0, "SlurmClusterResolverOptions.jobs: job '", name,
                     "' expects >= 0 tasks, got ", count);
    requested += count;
  }
  STRATA_CHECK_ARG(requested <= num_tasks && requested <= static_cast<int>(addresses.size()),
                   "SlurmClusterResolver: requested ", requested, " tasks but Slurm assigned ",
                   num_tasks, " (SLURM_NTASKS) on ", addresses.size(), " task slots");
  std::vector<train::ClusterSpec::Job> spec_jobs;
  int offset = 0;
  for (const auto& [name, count] : jobs) {
    std::vector<std::string> job_addresses(addresses.begin() + offset,
                                           addresses.begin() + offset + count);
    if (rank >= offset && rank < offset + count) {
      task_type_ = name;
      task_id_ = rank - offset;
    }
    spec_jobs.emplace_back(name, train::JobTasks(std::move(job_addresses)));
    offset += count;
  }
  cluster_spec_ = train::ClusterSpec(std::move(spec_jobs));
}

std::string SlurmClusterResolver::master(const std::optional<std::string>& task_type,
                                         std::optional<int> task_id,
                                         const std::optional<std::string>& rpc_layer) const {
  const auto type = task_type ? task_type : task_type_;
  const auto id = task_id ? task_id : task_id_;
  if (!type || !id) return "";
  return format_master_url(cluster_spec_.task_address(*type, *id),
                           rpc_layer ? rpc_layer : rpc_layer_);
}

std::map<std::string, int> SlurmClusterResolver::num_accelerators(const std::optional<std::string>&,
                                                                  std::optional<int>) const {
  if (!gpus_per_task_) return {};
  return {{"GPU", *gpus_per_task_}};
}

}  // namespace strata::distribute::cluster_resolver
