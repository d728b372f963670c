#pragma once
// The client side of the StrataTask gRPC service (ps.proto), with no gRPC type
// in its interface. One TaskClient per target address per process (channels
// are shared); every call carries a deadline and maps a failed gRPC status to
// the strata::Error of the same code (the codes are google.rpc.Code on both
// sides), its message naming the RPC and the target.
//
// Thread-safety: TaskClient is thread-safe (gRPC channels and stubs are).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "strata/base/errors.h"
#include "strata/core/tensor.h"
#include "strata/core/variable.h"

namespace strata::distribute::ps::internal {

// The gRPC metadata key that carries the cluster token (strata/cluster/cluster_token.h).
inline constexpr const char* kClusterTokenMetadata = "strata-cluster-token";

using Seconds = std::chrono::duration<double>;

// What identifies a variable that lives on a ps task.
struct RemoteVariableInfo {
  std::string target;  // the ps task's address
  int64_t id = 0;      // its id on that ps
  std::string name;
  DType dtype = DType::float32;
  TensorShape shape;
  bool trainable = true;
  VariableAggregation aggregation = VariableAggregation::NONE;
  VariableSynchronization synchronization = VariableSynchronization::ON_WRITE;
  std::string device;  // "/job:ps/replica:0/task:k/device:CPU:0"
};

// One closure argument on the wire: a tensor, a ps variable, a per-worker
// iterator id, a partitioned variable.
struct IteratorRef {
  int64_t id = 0;
};
// A partitioned variable: its container's name and its shards, in order.
struct ShardedVariableInfo {
  std::string name;
  std::vector<RemoteVariableInfo> shards;
};
using WireArg = std::variant<Tensor, RemoteVariableInfo, IteratorRef, ShardedVariableInfo>;

enum class UpdateKind { ASSIGN, ASSIGN_ADD, ASSIGN_SUB };

// What a worker answers to RunClosure when the transport worked: the results,
// or the error the closure raised (code != OK), and, when that error came from
// a ps the worker could not reach, that ps's address.
struct ClosureOutcome {
  ErrorCode code = ErrorCode::OK;
  std::string message;
  std::string failed_ps;
  std::vector<Tensor> results;
};

struct PingInfo {
  std::string task_type;
  int task_id = 0;
  int64_t incarnation = 0;
};

// Cancels one in-flight call from another thread (a coordinator shutting
// down). cancel() before the call starts makes it fail at once with CancelledError.
class RpcCancellation {
 public:
  RpcCancellation();
  ~RpcCancellation();
  void cancel();
  bool cancelled() const;

  struct State;  // defined in rpc.cc

 private:
  friend class TaskClient;
  std::unique_ptr<State> state_;
};

class TaskClient {
 public:
  // The process-wide client for `target` ("host:port").
  static std::shared_ptr<TaskClient> get(const std::string& target);
  explicit TaskClient(std::string target);
  ~TaskClient();
  TaskClient(const TaskClient&) = delete;
  TaskClient& operator=(const TaskClient&) = delete;

  const std::string& target() const noexcept { return target_; }

  // Creates the variable on this (ps) task; returns its full description.
  RemoteVariableInfo create_variable(const std::string& name, const Tensor& initial_value,
                                     bool trainable, VariableAggregation aggregation,
                                     Seconds timeout);
  Tensor read_variable(int64_t id, Seconds timeout);
  // Applies the update on the ps; returns the new value when read_back.
  Tensor update_variable(int64_t id, UpdateKind kind, const Tensor& value, bool read_back,
                         Seconds timeout);
  std::vector<RemoteVariableInfo> list_variables(Seconds timeout);
  // Throws only for a transport failure (the worker is unreachable, shut down
  // or past the deadline); the closure's own error is in the outcome.
  ClosureOutcome run_closure(const std::string& function, const std::vector<WireArg>& args,
                             Seconds timeout, RpcCancellation* cancellation = nullptr);
  // Builds dataset_function(InputContext(n, id)) on the worker and keeps an
  // iterator over it under `id`. Throws the worker's error.
  void create_iterator(int64_t id, const std::string& dataset_function, int num_input_pipelines,
                       int input_pipeline_id, Seconds timeout);
  PingInfo ping(Seconds timeout);
  void stop(Seconds timeout);

 private:
  struct Stub;
  std::string target_;
  std::string token_;  // $STRATA_CLUSTER_TOKEN when the client was made
  std::unique_ptr<Stub> stub_;
};

// The ps target whose variable RPC last failed for lack of the ps (UNAVAILABLE
// DEADLINE_EXCEEDED or CANCELLED) on this thread; a worker running a closure reports it
// so the coordinator can tell a ps failure from the closure's own error.
std::string& last_unreachable_ps();

// True for the gRPC-level codes that mean "the remote task is gone or hung"
// (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED by its shutdown).
bool is_unreachable(ErrorCode code) noexcept;

}  // namespace strata::distribute::ps::internal
