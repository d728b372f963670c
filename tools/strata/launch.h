#pragma once
// `strata launch`: starts N local worker processes of one program, each with a
// TF_CONFIG naming every worker on a free loopback port and its own task, and
// the job's cluster token in STRATA_CLUSTER_TOKEN: the operator's when that is
// set, else a fresh random one (strata/cluster/cluster_token.h), so that only
// the job's own tasks can talk to its rendezvous store.
//
//   strata launch --nproc 2 [--devices-per-worker 2] -- strata train --strategy multi_worker
//
// Each child's stdout and stderr lines are prefixed with its task
// ("[worker:1] ..."). When a child fails (non-zero exit or a signal) the others
// get SIGTERM, then SIGKILL after a grace period, and launch exits with the
// failing child's status. SIGINT/SIGTERM to launch are forwarded to every
// child. Exit status: 0 when every worker succeeded.

#include <string>
#include <vector>

namespace strata::tools {

struct LaunchOptions {
  int nproc = 2;
  int devices_per_worker = 0;        // 0: leave the children's device configuration alone
  double grace_seconds = 5.0;        // between SIGTERM and SIGKILL when stopping the others
  std::vector<std::string> command;  // PROGRAM ARGS...
};

// Builds the TF_CONFIG of task `index` for workers at `addresses`.
std::string make_tf_config(const std::vector<std::string>& addresses, int index);

// Runs the workers and returns launch's exit status.
int run_launch(const LaunchOptions& options);

}  // namespace strata::tools
