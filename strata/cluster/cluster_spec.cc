#include "strata/cluster/cluster_spec.h"

#include <algorithm>
#include <ostream>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/cluster/internal/parse.h"

namespace strata::train {
namespace {

std::map<int, std::string> from_list(std::vector<std::string> addresses) {
  std::map<int, std::string> tasks;
  for (size_t i = 0; i < addresses.size(); ++i) {
    tasks.emplace(static_cast<int>(i), std::move(addresses[i]));
  }
  return tasks;
}

}  // namespace

JobTasks::JobTasks(std::initializer_list<std::string> addresses)
    : tasks_(from_list(std::vector<std::string>(addresses))) {}
JobTasks::JobTasks(std::initializer_list<std::pair<const int, std::string>> tasks)
    : tasks_(tasks) {}
JobTasks::JobTasks(std::vector<std::string> addresses) : tasks_(from_list(std::move(addresses))) {}
JobTasks::JobTasks(std::map<int, std::string> tasks) : tasks_(std::move(tasks)) {}

bool JobTasks::is_dense() const noexcept {
  return tasks_.empty() || tasks_.rbegin()->first + 1 == static_cast<int>(tasks_.size());
}

std::vector<std::string> JobTasks::as_list() const {
  if (tasks_.empty()) return {};
  std::vector<std::string> out(static_cast<size_t>(tasks_.rbegin()->first) + 1);
  for (const auto& [i, address] : tasks_) out[static_cast<size_t>(i)] = address;
  return out;
}

ClusterSpec::ClusterSpec(std::initializer_list<Job> jobs) : ClusterSpec(std::vector<Job>(jobs)) {}

ClusterSpec::ClusterSpec(std::vector<Job> jobs) : jobs_(std::move(jobs)) {
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const auto& [name, tasks] = jobs_[i];
    STRATA_CHECK_ARG(!name.empty(),
                     "ClusterSpec: expected non-empty job names, got an empty name at position ",
                     i);
    for (size_t j = 0; j < i; ++j) {
      STRATA_CHECK_ARG(jobs_[j].first != name, "ClusterSpec: job '", name, "' is given twice");
    }
    for (const auto& [index, address] : tasks.tasks()) {
      STRATA_CHECK_ARG(index >= 0, "ClusterSpec: job '", name,
                       "': expected task indices >= 0, got ", index);
      STRATA_CHECK_ARG(!address.empty(), "ClusterSpec: job '", name, "' task ", index,
                       ": expected a network address, got an empty string");
    }
  }
}

ClusterSpec ClusterSpec::from_json(std::string_view json_text) {
  // ordered_json keeps the members' textual order: TF keeps dict insertion order.
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(json_text);
  } catch (const nlohmann::ordered_json::parse_error& e) {
    throw InvalidArgumentError(
        str_cat("ClusterSpec: invalid JSON at byte ", e.byte, ": ", e.what()));
  }
  STRATA_CHECK_ARG(
      j.is_object(),
      "ClusterSpec: `cluster` must be a dictionary mapping one or more job names to lists of "
      "network addresses, got ",
      j.dump());
  std::vector<Job> jobs;
  for (const auto& [name, value] : j.items()) {
    std::map<int, std::string> tasks;
    if (value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        STRATA_CHECK_ARG(value[i].is_string(), "ClusterSpec: job '", name, "' task ", i,
                         ": expected a string address, got ", value[i].dump());
        tasks.emplace(static_cast<int>(i), value[i].get<std::string>());
      }
    } else if (value.is_object()) {
      for (const auto& [key, address] : value.items()) {
        int index = 0;
        STRATA_CHECK_ARG(::strata::cluster::internal::parse_python_int(key, index),
                         "ClusterSpec: job '", name,
                         "': expected integer task indices as keys, got '", key, "'");
        STRATA_CHECK_ARG(address.is_string(), "ClusterSpec: job '", name, "' task ", index,
                         ": expected a string address, got ", address.dump());
        STRATA_CHECK_ARG(tasks.emplace(index, address.get<std::string>()).second,
                         "ClusterSpec: job '", name, "': task index ", index, " is given twice");
      }
    } else {
      throw InvalidArgumentError(
          str_cat("ClusterSpec: job '", name,
                  "': expected a list of addresses or an object mapping task "
                  "indices to addresses, got ",
                  value.dump()));
    }
    jobs.emplace_back(name, JobTasks(std::move(tasks)));
  }
  return ClusterSpec(std::move(jobs));
}

std::string ClusterSpec::to_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [name, tasks] : jobs_) {
    if (tasks.is_dense()) {
      j[name] = tasks.as_list();
    } else {
      nlohmann::ordered_json sparse = nlohmann::ordered_json::object();
      for (const auto& [index, address] : tasks.tasks()) sparse[std::to_string(index)] = address;
      j[name] = sparse;
    }
  }
  return j.dump();
}

std::vector<std::string> ClusterSpec::jobs() const {
  std::vector<std::string> names;
  names.reserve(jobs_.size());
  for (const auto& job : jobs_) names.push_back(job.first);
  return names;
}

bool ClusterSpec::has_job(std::string_view name) const noexcept {
  return std::any_of(jobs_.begin(), jobs_.end(), [&](const Job& j) { return j.first == name; });
}

const JobTasks& ClusterSpec::job(std::string_view name) const {
  for (const auto& j : jobs_) {
    if (j.first == name) return j.second;
  }
  throw InvalidArgumentError(str_cat("No such job in cluster: '", name, "'"));
}

size_t ClusterSpec::num_tasks(std::string_view name) const { return job(name).size(); }

std::vector<int> ClusterSpec::task_indices(std::string_view name) const {
  std::vector<int> out;
  for (const auto& [index, address] : job(name).tasks()) out.push_back(index);
  return out;
}

const std::string& ClusterSpec::task_address(std::string_view name, int task_index) const {
  const auto& tasks = job(name).tasks();
  auto it = tasks.find(task_index);
  STRATA_CHECK_ARG(it != tasks.end(), "No task with index ", task_index, " in job '", name, "'");
  return it->second;
}

std::vector<std::string> ClusterSpec::job_tasks(std::string_view name) const {
  return job(name).as_list();
}

bool operator==(const ClusterSpec& a, const ClusterSpec& b) {
  if (a.jobs_.size() != b.jobs_.size()) return false;
  for (const auto& [name, tasks] : a.jobs_) {
    if (!b.has_job(name) || !(b.job(name) == tasks)) return false;
  }
  return true;
}

std::ostream& operator<<(std::ostream& os, const ClusterSpec& spec) { return os << spec.to_json(); }

}  // namespace strata::train
