#pragma once
// strata::train::ClusterSpec: TensorFlow's tf.train.ClusterSpec, a value that maps
// job names ("chief", "worker", "ps", "evaluator", ...) to the network addresses of
// their tasks.
//
//   strata::train::ClusterSpec spec({{"worker", {"localhost:12345", "localhost:23456"}},
//                                    {"ps", {"localhost:34567"}}});
//   spec.jobs();                        // {"worker", "ps"} (insertion order, as TF)
//   spec.num_tasks("worker");           // 2
//   spec.task_address("worker", 1);     // "localhost:23456"
//   strata::train::ClusterSpec sparse({{"worker", {{1, "host1:2222"}, {3, "host3:2222"}}}});
//   sparse.task_indices("worker");      // {1, 3}
//   auto again = strata::train::ClusterSpec::from_json(spec.to_json());   // == spec
//
// A job is dense (tasks 0..n-1, given as a list) or sparse (an index -> address
// map). Internally both are index -> address maps, as in TF; as_dict()/to_json()
// give a job back as a list when its indices are exactly 0..n-1 (TF's as_dict rule).
// Python's ValueError/TypeError become InvalidArgumentError; messages name the job
// and index. Immutable after construction: safe to share between threads.

#include <cstddef>
#include <initializer_list>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::train {

// The tasks of one job: index -> address. Built from a list (dense: task i is
// element i) or from an index -> address map (sparse). `{}` is an empty job.
class JobTasks {
 public:
  JobTasks() = default;
  JobTasks(std::initializer_list<std::string> addresses);
  JobTasks(std::initializer_list<std::pair<const int, std::string>> tasks);
  JobTasks(std::vector<std::string> addresses);  // NOLINT: implicit like the list form
  JobTasks(std::map<int, std::string> tasks);    // NOLINT: implicit like the map form

  const std::map<int, std::string>& tasks() const noexcept { return tasks_; }
  // True when the indices are exactly 0..size()-1 (also for an empty job).
  bool is_dense() const noexcept;
  // The addresses indexed by task id; holes of a sparse job are "" (TF: None).
  std::vector<std::string> as_list() const;
  size_t size() const noexcept { return tasks_.size(); }

  friend bool operator==(const JobTasks&, const JobTasks&) = default;

 private:
  std::map<int, std::string> tasks_;
};

// Thread-safety: immutable value.
class ClusterSpec {
 public:
  using Job = std::pair<std::string, JobTasks>;

  // The empty cluster (TF: ClusterSpec({})); false in a boolean context.
  ClusterSpec() = default;
  // `{{"worker", {"a:1", "b:2"}}, {"ps", {{0, "c:3"}}}}`. Throws InvalidArgumentError
  // for an empty or duplicated job name, an empty address or a negative task index.
  ClusterSpec(std::initializer_list<Job> jobs);
  explicit ClusterSpec(std::vector<Job> jobs);

  // Parses the JSON form used by TF_CONFIG["cluster"]: an object mapping job names
  // to arrays of addresses or to objects {"<index>": "<address>"} (keys are
  // coerced with int(), as TF). Throws InvalidArgumentError naming the offending
  // job/field, including JSON syntax errors (with their position).
  static ClusterSpec from_json(std::string_view json_text);
  // The inverse of from_json: jobs in order, dense jobs as arrays, sparse jobs as
  // objects with decimal string keys. from_json(to_json()) == *this.
  std::string to_json() const;

  // Job names in insertion order.
  std::vector<std::string> jobs() const;
  bool has_job(std::string_view job) const noexcept;
  // Throws InvalidArgumentError "No such job in cluster: 'x'" for an unknown job.
  size_t num_tasks(std::string_view job) const;
  // Sorted task indices of `job`.
  std::vector<int> task_indices(std::string_view job) const;
  // Throws InvalidArgumentError for an unknown job or "No task with index i in job 'x'".
  const std::string& task_address(std::string_view job, int task_index) const;
  // Addresses indexed by task id (length max index + 1); holes are "" (TF: None).
  std::vector<std::string> job_tasks(std::string_view job) const;
  // The jobs in order with their tasks (TF: as_dict(); see JobTasks::is_dense/as_list).
  const std::vector<Job>& as_dict() const noexcept { return jobs_; }

  bool empty() const noexcept { return jobs_.empty(); }
  explicit operator bool() const noexcept { return !empty(); }
  // Compares jobs and tasks, ignoring job order (TF compares the internal dicts).
  friend bool operator==(const ClusterSpec& a, const ClusterSpec& b);

 private:
  const JobTasks& job(std::string_view name) const;
  std::vector<Job> jobs_;
};

// Prints the JSON form (for error messages and tests).
std::ostream& operator<<(std::ostream& os, const ClusterSpec& spec);

}  // namespace strata::train
