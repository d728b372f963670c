#pragma once
// TPUClusterResolver: where the accelerator ("TPU") system is.
//
//   namespace cr = strata::distribute::cluster_resolver;
//   cr::TPUClusterResolver local("local");           // this host: empty cluster, master() == ""
//   cr::TPUClusterResolver pod("10.0.0.1:8470,10.0.0.2:8470");
//   pod.cluster_spec();   // {"worker": ["10.0.0.1:8470", "10.0.0.2:8470"]}
//   pod.master();         // "grpc://10.0.0.1:8470" (task_type "worker", task_id 0)
//
// The `tpu` argument:
//   - "local": the accelerator system attached to this host; empty cluster spec,
//     master() == "" (as TF's local TPU).
//   - "": auto-resolve from the environment, as TF resolves from its environment:
//     if TF_CONFIG (or options.tf_config) has a cluster with a `job_name` job, a
//     pod of those hosts, and this task's index comes from TF_CONFIG["task"];
//     otherwise the same as "local".
//   - one or more comma-separated addresses "host:port" or "grpc://host:port": a
//     multi-host pod whose hosts form job `job_name`; task_id defaults to 0.
//   - anything else (a Cloud TPU name) is InvalidArgumentError: Strata has no
//     Cloud TPU API to resolve names.
// task_type defaults to job_name, task_id to 0, rpc_layer to "grpc". A coordinator
// (coordinator_name + coordinator_address) is added as its own job. Thread-safety
// as ClusterResolver.

#include <map>
#include <optional>
#include <string>

#include "strata/cluster/cluster_resolver.h"

namespace strata::distribute::cluster_resolver {

// TPUClusterResolver(tpu=None, zone=None, project=None, job_name='worker',
//                    coordinator_name=None, coordinator_address=None, ...)
struct TPUClusterResolverOptions {
  std::optional<std::string> zone = {};     // accepted for parity; unused
  std::optional<std::string> project = {};  // accepted for parity; unused
  std::string job_name = "worker";
  std::optional<std::string> coordinator_name = {};
  std::optional<std::string> coordinator_address = {};
  // TF_CONFIG text for tpu == ""; std::nullopt = the TF_CONFIG environment variable.
  std::optional<std::string> tf_config = {};
};

class TPUClusterResolver : public ClusterResolver {
 public:
  explicit TPUClusterResolver(std::string tpu = "", TPUClusterResolverOptions options = {});

  train::ClusterSpec cluster_spec() const override { return cluster_spec_; }
  // "" for the local system; else "grpc://<address of (task_type, task_id)>".
  // Throws InvalidArgumentError "No TPUs with the specified names exist." when
  // the task is not in the cluster.
  std::string master(const std::optional<std::string>& task_type = std::nullopt,
                     std::optional<int> task_id = std::nullopt,
                     const std::optional<std::string>& rpc_layer = std::nullopt) const override;
  // True for the local system ("local", or "" without a TF_CONFIG pod).
  bool is_local() const noexcept { return local_; }
  const std::string& tpu() const noexcept { return tpu_; }

 private:
  std::string tpu_;
  bool local_ = true;
  train::ClusterSpec cluster_spec_;
};

}  // namespace strata::distribute::cluster_resolver
