#pragma once
// SlurmClusterResolver: the cluster of a Slurm job step, from the SLURM_*
// environment, as TF's SlurmClusterResolver.
//
//   // srun -N 2 --ntasks-per-node=2 ./train   (SLURM_STEP_NODELIST=node[01-02], SLURM_PROCID=3)
//   strata::distribute::cluster_resolver::SlurmClusterResolver slurm;
//   slurm.cluster_spec();   // {"worker": ["node01:8888", "node01:8889", "node02:8888",
//   "node02:8889"]} slurm.task_type();      // "worker"; slurm.task_id() == 3
//
// Variables read (once, at construction): SLURM_PROCID (this task's rank),
// SLURM_NTASKS, the node list SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST) and
// the tasks per node SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE).
// Hosts are taken in sorted order (TF sorts them); on each host task k listens on
// port_base + k. Ranks are dealt to the jobs in job-name order (TF sorts the
// jobs), each job taking as many consecutive ranks as it has tasks. A missing
// variable is FailedPreconditionError (TF: RuntimeError) naming it; a malformed
// value or more tasks requested than Slurm assigned is InvalidArgumentError.
// Thread-safety as ClusterResolver.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/cluster/cluster_resolver.h"

namespace strata::distribute::cluster_resolver {

// "node[01-03,07],gpu5" -> {"node01", "node02", "node03", "node07", "gpu5"}; several
// bracket groups in one name expand as a product ("r[1-2]n[1-2]"); zero padding of
// a range's start is kept. Throws InvalidArgumentError for unbalanced brackets or
// a bad range, naming the list.
std::vector<std::string> expand_hostlist(std::string_view hostlist);
// "2(x3),1" -> {2, 2, 2, 1}. Throws InvalidArgumentError naming the value.
std::vector<int> expand_tasks_per_node(std::string_view tasks_per_node);

// SlurmClusterResolver(jobs=None, port_base=8888, gpus_per_node=None,
//                      gpus_per_task=None, tasks_per_node=None, auto_set_gpu=True,
//                      rpc_layer='grpc'). auto_set_gpu (CUDA_VISIBLE_DEVICES) has no
// equivalent here and is left out.
struct SlurmClusterResolverOptions {
  // Job name -> number of tasks; empty = {"worker": SLURM_NTASKS} (TF's default).
  std::vector<std::pair<std::string, int>> jobs = {};
  int port_base = 8888;
  // When set, at most gpus_per_node / gpus_per_task tasks run on a node and
  // num_accelerators() reports {"GPU": gpus_per_task} (gpus_per_task defaults to 1).
  std::optional<int> gpus_per_node = {};
  std::optional<int> gpus_per_task = {};
  // Overrides the tasks-per-node variable: host name -> number of tasks.
  std::map<std::string, int> tasks_per_node = {};
  std::string rpc_layer = "grpc";
  // Where to read SLURM_* from; std::nullopt = the process environment (tests
  // pass a map).
  std::optional<std::map<std::string, std::string>> environment = {};
};

class SlurmClusterResolver : public ClusterResolver {
 public:
  explicit SlurmClusterResolver(SlurmClusterResolverOptions options = {});

  train::ClusterSpec cluster_spec() const override { return cluster_spec_; }
  // format_master_url(address of (task_type, task_id), rpc_layer), defaulting to
  // this task; "" when the task is unknown.
  std::string master(const std::optional<std::string>& task_type = std::nullopt,
                     std::optional<int> task_id = std::nullopt,
                     const std::optional<std::string>& rpc_layer = std::nullopt) const override;
  std::map<std::string, int> num_accelerators(
      const std::optional<std::string>& task_type = std::nullopt,
      std::optional<int> task_id = std::nullopt) const override;

 private:
  train::ClusterSpec cluster_spec_;
  std::optional<int> gpus_per_task_;
};

}  // namespace strata::distribute::cluster_resolver
