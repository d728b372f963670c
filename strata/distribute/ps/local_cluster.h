#pragma once
// An in-process ParameterServerStrategy cluster on loopback, for tests and
// benchmarks: every ps and worker task is a real strata::distribute::Server
// (its own gRPC server on its own 127.0.0.1 port, picked by the server),
// serving from this process's threads; the calling thread is the chief.
//
//   sd::ps::LocalCluster cluster(/*workers=*/2, /*ps=*/2);
//   sd::ParameterServerStrategy strategy(cluster.chief);
//   cluster.ps_servers[0]->variables();     // ps 0's own view
//   cluster.worker_servers[1]->stop();      // "kill" worker 1
//
// The chief's address in the cluster spec (127.0.0.1:1) is never contacted.
// Thread-safety: as Server.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/cluster/cluster_resolver.h"
#include "strata/distribute/ps/server.h"

namespace strata::distribute::ps {

// A resolver naming one task of type `type`, index `index`, at `address`.
inline std::shared_ptr<cluster_resolver::SimpleClusterResolver> single_task_resolver(
    const std::string& type, int index, const std::string& address = "127.0.0.1:0") {
  train::ClusterSpec spec({{type, std::map<int, std::string>{{index, address}}}});
  return std::make_shared<cluster_resolver::SimpleClusterResolver>(
      spec, cluster_resolver::SimpleClusterResolverOptions{.task_type = type, .task_id = index});
}

struct LocalCluster {
  // chief + `workers` workers + `ps` ps; InvalidArgumentError from Server for
  // invalid options, UnavailableError when a port cannot be bound.
  LocalCluster(int workers, int ps, const ServerOptions& options = {}) {
    std::vector<std::string> ps_addresses, worker_addresses;
    for (int k = 0; k < ps; ++k) {
      ps_servers.push_back(std::make_unique<Server>(*single_task_resolver("ps", k), options));
      ps_addresses.push_back(ps_servers.back()->target());
    }
    for (int k = 0; k < workers; ++k) {
      worker_servers.push_back(
          std::make_unique<Server>(*single_task_resolver("worker", k), options));
      worker_addresses.push_back(worker_servers.back()->target());
    }
    spec = train::ClusterSpec(
        {{"chief", {"127.0.0.1:1"}}, {"worker", worker_addresses}, {"ps", ps_addresses}});
    chief = std::make_shared<cluster_resolver::SimpleClusterResolver>(
        spec, cluster_resolver::SimpleClusterResolverOptions{.task_type = "chief", .task_id = 0});
  }
  train::ClusterSpec spec;
  std::shared_ptr<cluster_resolver::SimpleClusterResolver> chief;
  std::vector<std::unique_ptr<Server>> ps_servers, worker_servers;
};

}  // namespace strata::distribute::ps
