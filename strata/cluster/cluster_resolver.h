#pragma once
// Cluster resolvers (tf.distribute.cluster_resolver): where a program finds its
// cluster, its own role and the address of its master.
//
//   namespace cr = strata::distribute::cluster_resolver;
//   cr::TFConfigClusterResolver tfc;                      // reads $TF_CONFIG on every call
//   strata::train::ClusterSpec spec = tfc.cluster_spec();
//   if (tfc.task_type() == "ps") { /* serve variables */ }
//   cr::SimpleClusterResolver simple(spec, {.task_type = "worker", .task_id = 0});
//   simple.master();                                      // "" (no master given)
//   simple.master("worker", 1, "grpc");                   // "grpc://localhost:23456"
//
// Python's ValueError/TypeError/KeyError are InvalidArgumentError here: every
// failure is a bad value in TF_CONFIG or in an argument, and the message names the
// field (KeyError in TF only arises for a missing job/task, which is a value the
// caller supplied). Thread-safety: const methods may run concurrently; the setters
// (set_task_type, set_task_id, set_rpc_layer) need exclusive access.

#include <concepts>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "strata/cluster/cluster_spec.h"

namespace strata::distribute::cluster_resolver {

// "<rpc_layer>://<address>", or the address alone when rpc_layer is empty (TF's
// format_master_url).
std::string format_master_url(const std::string& address,
                              const std::optional<std::string>& rpc_layer);

class ClusterResolver {
 public:
  virtual ~ClusterResolver() = default;

  virtual train::ClusterSpec cluster_spec() const = 0;
  // The master's URL for (task_type, task_id), defaulting to this task.
  virtual std::string master(const std::optional<std::string>& task_type = std::nullopt,
                             std::optional<int> task_id = std::nullopt,
                             const std::optional<std::string>& rpc_layer = std::nullopt) const = 0;
  // This task's role; std::nullopt when unknown (TF: None).
  virtual std::optional<std::string> task_type() const { return task_type_; }
  virtual std::optional<int> task_id() const { return task_id_; }
  virtual std::optional<std::string> rpc_layer() const { return rpc_layer_; }
  virtual void set_task_type(std::optional<std::string> task_type) {
    task_type_ = std::move(task_type);
  }
  virtual void set_task_id(std::optional<int> task_id) { task_id_ = task_id; }
  virtual void set_rpc_layer(std::optional<std::string> rpc_layer) {
    rpc_layer_ = std::move(rpc_layer);
  }
  // TF's base value is "".
  virtual std::string environment() const { return ""; }
  // Accelerators per device type ("GPU", "TPU") of (task_type, task_id). The base
  // returns {}: the cluster layer sees no devices, and TF's TFConfigClusterResolver
  // returns {} too for local eager devices; strategies count local devices themselves.
  virtual std::map<std::string, int> num_accelerators(
      const std::optional<std::string>& task_type = std::nullopt,
      std::optional<int> task_id = std::nullopt) const;

 protected:
  ClusterResolver() = default;
  ClusterResolver(const ClusterResolver&) = default;
  ClusterResolver& operator=(const ClusterResolver&) = default;

  std::optional<std::string> task_type_;
  std::optional<int> task_id_;
  std::optional<std::string> rpc_layer_;
};

// The resolver a strategy is given and keeps: shared (a std::shared_ptr, which
// the strategy keeps alive) or borrowed (a pointer, `.cluster_resolver =
// &resolver`: the caller keeps the resolver alive for the strategy's lifetime,
// as a TensorFlow program that declares the resolver before the strategy
// does). Either way strategy.cluster_resolver() returns that very object, as
// TensorFlow's strategy returns the resolver it was given. A cheap value.
class ClusterResolverRef {
 public:
  ClusterResolverRef() = default;
  ClusterResolverRef(std::nullptr_t) {}  // NOLINT(google-explicit-constructor): `= nullptr`
  template <std::derived_from<ClusterResolver> R>
  ClusterResolverRef(std::shared_ptr<R> shared)  // NOLINT(google-explicit-constructor)
      : resolver_(std::move(shared)) {}
  // Borrowed: no ownership is taken.
  ClusterResolverRef(ClusterResolver* borrowed)  // NOLINT(google-explicit-constructor)
      : resolver_(std::shared_ptr<ClusterResolver>(), borrowed) {}

  ClusterResolver* get() const noexcept { return resolver_.get(); }
  ClusterResolver& operator*() const noexcept { return *resolver_; }
  ClusterResolver* operator->() const noexcept { return resolver_.get(); }
  explicit operator bool() const noexcept { return resolver_ != nullptr; }

 private:
  // For a borrowed resolver: an empty owner aliasing the caller's object.
  std::shared_ptr<ClusterResolver> resolver_;
};

// TFConfigClusterResolver(task_type=None, task_id=None, rpc_layer=None, environment=None)
struct TFConfigClusterResolverOptions {
  std::optional<std::string> task_type = {};  // overrides TF_CONFIG["task"]["type"]
  std::optional<int> task_id = {};            // overrides TF_CONFIG["task"]["index"]
  std::optional<std::string> rpc_layer = {};  // overrides TF_CONFIG["rpc_layer"]
  std::string environment = {};               // TF: None; returned by environment()
};

// Reads the TF_CONFIG environment variable on every call (a missing variable is
// `{}`), as TF does. Every read validates the whole document and throws
// InvalidArgumentError naming TF_CONFIG and the field:
//   - invalid JSON (with the parser's byte position), a top level that is not an object;
//   - "cluster" not an object of jobs (see ClusterSpec::from_json);
//   - "task" not an object, "task.type" not a string, "task.index" not an integer
//     (an integer-valued string is accepted, as Python's int());
//   - a task type not among the cluster's jobs ("evaluator" excepted, as TF's
//     multi-worker validation), a task index not in its job;
//   - "rpc_layer", "session_master", "environment" present but not strings.
class TFConfigClusterResolver : public ClusterResolver {
 public:
  explicit TFConfigClusterResolver(TFConfigClusterResolverOptions options = {});
  // Uses `tf_config` (the JSON text) instead of the environment variable.
  static TFConfigClusterResolver from_string(std::string tf_config,
                                             TFConfigClusterResolverOptions options = {});

  train::ClusterSpec cluster_spec() const override;
  // TF_CONFIG["session_master"] if set; "" if the cluster has no jobs or a single
  // job with a single task; else format_master_url(address of the task, rpc_layer).
  // Throws InvalidArgumentError when the task is unknown.
  std::string master(const std::optional<std::string>& task_type = std::nullopt,
                     std::optional<int> task_id = std::nullopt,
                     const std::optional<std::string>& rpc_layer = std::nullopt) const override;
  std::optional<std::string> task_type() const override;
  std::optional<int> task_id() const override;
  std::optional<std::string> rpc_layer() const override;
  std::string environment() const override { return environment_; }

  // The TF_CONFIG text this resolver reads now ("{}" when unset).
  std::string tf_config_text() const;

 private:
  struct Parsed;
  Parsed load() const;

  std::optional<std::string> fixed_config_;
  std::string environment_;
};

// SimpleClusterResolver(cluster_spec, master='', task_type=None, task_id=None,
//                       environment='', num_accelerators=None, rpc_layer=None)
struct SimpleClusterResolverOptions {
  std::string master = {};
  std::optional<std::string> task_type = {};
  std::optional<int> task_id = {};
  std::string environment = {};
  std::map<std::string, int> num_accelerators = {};
  std::optional<std::string> rpc_layer = {};
};

class SimpleClusterResolver : public ClusterResolver {
 public:
  explicit SimpleClusterResolver(train::ClusterSpec cluster_spec,
                                 SimpleClusterResolverOptions options = {});

  train::ClusterSpec cluster_spec() const override { return cluster_spec_; }
  // The address of (task_type, task_id) when both are given, else the configured
  // master; prefixed with "<rpc_layer>://" when an rpc layer is given or configured.
  std::string master(const std::optional<std::string>& task_type = std::nullopt,
                     std::optional<int> task_id = std::nullopt,
                     const std::optional<std::string>& rpc_layer = std::nullopt) const override;
  std::string environment() const override { return environment_; }
  std::map<std::string, int> num_accelerators(
      const std::optional<std::string>& task_type = std::nullopt,
      std::optional<int> task_id = std::nullopt) const override;

 private:
  train::ClusterSpec cluster_spec_;
  std::string master_;
  std::string environment_;
  std::map<std::string, int> num_accelerators_;
};

}  // namespace strata::distribute::cluster_resolver
