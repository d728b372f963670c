#pragma once
// tf.distribute.MultiWorkerMirroredStrategy: synchronous training over several
// worker processes, each with its local replicas (its logical devices).
//
//   // every process runs the same program; TF_CONFIG says who is who:
//   // {"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
//   //  "task": {"type": "worker", "index": 0}}
//   sd::MultiWorkerMirroredStrategy strategy;             // reads TF_CONFIG
//   strategy.cluster_resolver()->task_type();             // "worker"
//   strategy.num_replicas_in_sync();                      // workers x local devices
//   sd::MultiWorkerMirroredStrategy custom({.cluster_resolver = &resolver,
//                                           .communication_options = {.timeout_seconds = 30}});
//
// Start-up (the constructor is collective: every worker must construct it):
//   1. The cluster comes from the resolver (TFConfigClusterResolver by
//      default), validated as TF (chief/worker/evaluator/ps roles, at most one
//      chief; ps and evaluator tasks cannot run this strategy:
//      InvalidArgumentError). An empty cluster is single-worker mode.
//   2. The chief (the `chief` task, else worker 0) serves a rendezvous
//      key-value store at its own TF_CONFIG address; every worker connects to
//      it and then waits for every other worker, until the start-up deadline
//      (timeout_seconds, default 60 s). While waiting, a worker logs on stderr
//      every few seconds (timeout/4, clamped to 0.25-5 s) which tasks are still
//      missing ("INFO: MultiWorkerMirroredStrategy: worker 0 (/job:worker/task:0)
//      waiting for the rendezvous (1500ms of 60000ms): still missing
//      [/job:worker/task:2]"); at the deadline it raises UnavailableError
//      listing them (or naming the chief and its address when the chief's
//      store never answered).
//   3. Workers exchange their local replica counts (they must agree:
//      InvalidArgumentError naming the worker that differs) and their host
//      identities (collective::shm_host_identity), and build the group that
//      connects them, one rank per worker (cross_worker_transport() says
//      which; every worker logs it at INFO):
//        "shared_memory": every worker on one host -> collective::ShmCollectives;
//        "shared_memory+gloo": several hosts, some running several workers ->
//          collective::HostHierarchicalCollectives: shared memory within each
//          host, a Gloo group over TCP among the hosts' leaders (the lowest
//          worker of each host, listening on the host of its own address);
//        "gloo": one worker per host, or communication_options.shared_memory
//          OFF -> a Gloo group over TCP among all workers.
//      (communication_options.h, shared_memory.)
//   4. All-reduces are hierarchical: in-process reduce -> one all-reduce
//      across workers per process -> local hand-out
//      (collective/hierarchical_collectives.h).
//   5. With communication_options.overlap_gradient_reduction, each local
//      replica gets a communication thread that all-reduces the gradients in
//      buckets while tape.gradient is still running (communication_options.h,
//      internal/gradient_overlap.h). The destructor logs at INFO how many
//      buckets were reduced and how many all-reduces took their sums.
// Worker w's replicas are global replicas [w*L, (w+1)*L) and its input
// pipeline id is w (multi_worker_util::id_in_cluster), so
// experimental_distribute_dataset shards the input across workers by the
// AutoShardPolicy (distributed_dataset.h).
//
// Variables created in the scope start equal everywhere: the chief's initial
// value is broadcast to every worker (so every worker must create the same
// variables in the same order, as in TF). reduce() and reads of SyncOnRead
// variables in cross-replica context add every worker's contribution.
//
// Failure: a worker that dies or stops answering makes the others' pending
// collectives fail (UnavailableError, or DeadlineExceededError after
// timeout_seconds, naming the task that never entered collective #k and what
// that collective was, and what that task was last heard doing); `run`
// re-throws it naming the replica. Over shared memory a dead worker is found
// within about 0.1 s (every waiting worker checks the pids of those it waits
// for), and no segment outlives the workers (removed from /dev/shm once all
// mapped it). In a "shared_memory+gloo" cluster the workers of the host where
// a worker failed report that worker; the other hosts report that host's
// leader (UnavailableError: its leader aborts the leaders' group at once). Workers whose
// collective schedules differ (another collective, op, dtype, shape at the
// same sequence number) fail at once with FailedPreconditionError on every
// worker, showing both sides (collective/gloo_collectives.h). There is no in-job
// recovery (as TF): restart all workers, resume from a checkpoint
// (BackupAndRestore).
//
// extended().should_checkpoint() is true only on the chief;
// extended().in_multi_worker_mode() with two or more workers; extended().task_id()
// is the resolver's task index. Keras's savers use them (TF's
// distributed_file_utils): the chief writes at the user's path, the others
// into <dir>/workertemp_<task_id>, removed after each save.
// Thread-safety: as every strategy, driven by one thread at a time.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "strata/cluster/cluster_resolver.h"
#include "strata/distribute/communication_options.h"
#include "strata/distribute/replicated_strategy.h"

namespace strata {
class Store;
}  // namespace strata

namespace strata::cluster {
class TcpStoreServer;
}  // namespace strata::cluster

namespace strata::collective {
class Collectives;
class GlooCollectives;
class ShmCollectives;
}  // namespace strata::collective

namespace strata::distribute {

// Fields in the order of TensorFlow's arguments,
// MultiWorkerMirroredStrategy(cluster_resolver=None, communication_options=None).
struct MultiWorkerMirroredStrategyOptions {
  // nullptr: a TFConfigClusterResolver reading $TF_CONFIG. A shared_ptr, or
  // `&resolver` for a resolver the caller keeps alive (ClusterResolverRef).
  cluster_resolver::ClusterResolverRef cluster_resolver = nullptr;
  CommunicationOptions communication_options = {};
};

class MultiWorkerMirroredStrategy : public ReplicatedStrategy {
 public:
  explicit MultiWorkerMirroredStrategy(MultiWorkerMirroredStrategyOptions options = {});
  ~MultiWorkerMirroredStrategy() override;

  std::string name() const override { return "MultiWorkerMirroredStrategy"; }
  int num_input_pipelines() const override { return num_workers_; }
  int input_pipeline_id() const override { return worker_index_; }
  const cluster_resolver::ClusterResolver* cluster_resolver() const override {
    return resolver_.get();
  }
  Tensor sum_across_workers(const Tensor& local) override;
  StepAgreement step_agreement() const override;

  int num_workers() const noexcept { return num_workers_; }
  // How collectives cross between workers: "shared_memory",
  // "shared_memory+gloo", "gloo", or "none" in single-worker mode (see above).
  const std::string& cross_worker_transport() const noexcept { return transport_; }
  // The number of hosts the workers run on (as their host identities say; 1
  // in single-worker mode).
  int num_hosts() const noexcept { return num_hosts_; }
  int worker_index() const noexcept { return worker_index_; }
  bool is_chief() const noexcept { return is_chief_; }

 protected:
  void initialize_distributed_variable(const Variable& variable) override;

 private:
  struct Setup;
  static std::unique_ptr<Setup> make_setup(MultiWorkerMirroredStrategyOptions options);
  explicit MultiWorkerMirroredStrategy(std::unique_ptr<Setup> setup);
  // The Gloo group of `workers` (this worker among them; Gloo rank = position),
  // retried as a whole until every member connected, by `deadline`.
  std::shared_ptr<collective::GlooCollectives> connect_gloo(
      const std::vector<int>& workers, const std::vector<std::string>& names,
      const std::string& my_address, std::chrono::milliseconds call_timeout,
      std::chrono::steady_clock::time_point deadline);

  cluster_resolver::ClusterResolverRef resolver_;
  int num_workers_;
  int worker_index_;
  bool is_chief_;
  std::unique_ptr<cluster::TcpStoreServer> store_server_;  // the chief's
  std::shared_ptr<Store> store_;
  // The group across workers (one rank per worker), and the groups it is made
  // of that publish this worker's activity for the others' failure reports.
  std::shared_ptr<collective::Collectives> cross_workers_;
  std::shared_ptr<collective::GlooCollectives> gloo_;
  std::shared_ptr<collective::ShmCollectives> shm_;
  std::string transport_ = "none";
  int num_hosts_ = 1;
};

// tf.distribute.experimental.MultiWorkerMirroredStrategy: the name the seed page and
// older guides use; the same class.
namespace experimental {
using MultiWorkerMirroredStrategy = distribute::MultiWorkerMirroredStrategy;
}  // namespace experimental

}  // namespace strata::distribute
