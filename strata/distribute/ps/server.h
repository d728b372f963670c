#pragma once
// strata::distribute::Server (tf.distribute.Server for ParameterServerStrategy):
// what the ps and worker tasks of the job run. A ps task serves the variables
// the chief creates (create, read, assign, assign_add, assign_sub applied
// where they live); a worker task runs the closures the chief's
// ClusterCoordinator schedules (functions registered by name, function_registry.h)
// and keeps the per-worker input iterators.
//
//   namespace cr = strata::distribute::cluster_resolver;
//   cr::TFConfigClusterResolver resolver;                 // $TF_CONFIG
//   if (resolver.task_type() == "ps" || resolver.task_type() == "worker") {
//     strata::distribute::Server server(resolver);       // listens at its TF_CONFIG address
//     server.join();                                     // until stop() or a Stop RPC
//     return 0;
//   }
//   // the chief: ParameterServerStrategy + ClusterCoordinator
//
// The server listens on exactly its task's cluster address ("host:0" picks a
// free port: port() tells which), on every interface at that port only when
// STRATA_BIND_ALL_INTERFACES=1. Every call must carry the job's cluster token
// (gRPC metadata "strata-cluster-token", compared in constant time); one
// without it is UNAUTHENTICATED and changes nothing (a stray Stop included). It speaks gRPC
// (ps.proto, service StrataTask). join() has no timeout by design (a server runs until told to
// stop); stop(), a Stop RPC and destruction end it: in-flight calls get
// `shutdown_grace` to finish, then are cancelled, and the gRPC threads are
// joined. gRPC's handler threads are bounded by max_rpc_threads.
//
// Thread-safety: thread-safe; join() may be called from several threads.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/cluster/cluster_resolver.h"
#include "strata/core/tensor.h"

namespace strata::distribute {

struct ServerOptions {
  int max_rpc_threads = 16;                        // gRPC sync-server threads, at most
  std::chrono::milliseconds shutdown_grace{1000};  // in-flight RPCs' time at stop
  std::chrono::milliseconds rpc_timeout{30000};    // a worker's RPCs to the ps tasks
  // The cluster token every call must carry; the default is
  // $STRATA_CLUSTER_TOKEN (strata/cluster/cluster_token.h).
  std::optional<std::string> token = std::nullopt;
  // The largest request message accepted; a larger one fails with
  // RESOURCE_EXHAUSTED before it is read (a variable's initial value or an
  // update travels in one message).
  int max_message_bytes = 256 << 20;
};

class Server {
 public:
  // Serves resolver's task (task_type "ps" or "worker"; anything else, a
  // missing task or an address the server cannot bind is InvalidArgumentError /
  // UnavailableError naming it).
  explicit Server(const cluster_resolver::ClusterResolver& resolver, ServerOptions options = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Blocks until the server has stopped (stop(), a Stop RPC, destruction).
  void join();
  // Stops serving (idempotent); returns once gRPC has shut down.
  void stop();

  const std::string& task_type() const noexcept;
  int task_id() const noexcept;
  int port() const noexcept;
  // "<host>:<port>" with the bound port.
  const std::string& target() const noexcept;

  // A ps task's own view of what it holds, in creation order.
  struct VariableSnapshot {
    int64_t id;
    std::string name;
    std::string device;
    Tensor value;
    int64_t reads = 0;    // ReadVariable calls it served
    int64_t updates = 0;  // UpdateVariable calls applied to it
  };
  std::vector<VariableSnapshot> variables() const;
  // Closures this worker has finished (successfully or not).
  int64_t closures_run() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace strata::distribute
