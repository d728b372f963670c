#pragma once
// The cluster layer: who is in the job and how its processes meet.
//
// A multi-worker program learns its cluster from a resolver: TF_CONFIG (as set
// by Kubeflow's TFJob or `strata launch`), Slurm's environment, an explicit
// ClusterSpec, or the TPU resolver. The multi_worker_util rules decide roles
// (chief, worker ids, the collective leader), and a rendezvous Store served by
// the chief lets the processes exchange addresses before collectives start.
//
//   namespace cr = strata::distribute::cluster_resolver;
//   namespace mwu = strata::distribute::multi_worker_util;
//   cr::TFConfigClusterResolver resolver;                 // reads $TF_CONFIG
//   auto spec = resolver.cluster_spec();
//   bool chief = mwu::is_chief(spec, resolver.task_type(), resolver.task_id());
//   std::optional<strata::cluster::TcpStoreServer> server;
//   if (chief) server.emplace("0.0.0.0:" +
//   strata::cluster::split_host_port(spec.task_address("worker", 0)).second);
//   strata::cluster::TcpStoreClient store(leader_address, {.connect_timeout =
//   std::chrono::seconds(30)}); store.add("arrived", 1); store.wait({"ready"});
//
// See docs/cluster.md for TF_CONFIG, the resolvers, the chief rule and the store protocol.

#include "strata/cluster/cluster_resolver.h"
#include "strata/cluster/cluster_spec.h"
#include "strata/cluster/multi_worker_util.h"
#include "strata/cluster/slurm_cluster_resolver.h"
#include "strata/cluster/socket.h"
#include "strata/cluster/tcp_store.h"
#include "strata/cluster/tpu_cluster_resolver.h"
