#include "strata/distribute/ps/server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>  // std::call_once
#include <random>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/cluster/cluster_spec.h"
#include "strata/cluster/cluster_token.h"
#include "strata/cluster/tcp_store.h"
#include "strata/distribute/ps/function_registry.h"
#include "strata/distribute/ps/internal/remote_variable.h"
#include "strata/distribute/ps/internal/wire.h"
#include "strata/distribute/ps/parameter_server_strategy.h"
#include "strata/distribute/ps/ps.grpc.pb.h"
#include "strata/distribute/sharded_variable.h"
#include "strata/ops/math_ops.h"

namespace strata::distribute {

namespace pi = ps::internal;
namespace pp = ps::proto;

namespace {

grpc::Status to_status(const Error& e) {
  return grpc::Status(static_cast<grpc::StatusCode>(e.code()), e.what());
}

// Runs a handler body, turning a strata::Error into the matching gRPC status.
template <typename Fn>
grpc::Status guarded(Fn&& fn) {
  try {
    fn();
    return grpc::Status::OK;
  } catch (const Error& e) {
    return to_status(e);
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
  }
}

struct StoredVariable {
  std::string name;
  bool trainable = true;
  int aggregation = 0;
  mutable Mutex mu;  // updates of one variable are applied one at a time
  Tensor value STRATA_GUARDED_BY(mu);
  std::atomic<int64_t> reads{0};    // ReadVariable calls served
  std::atomic<int64_t> updates{0};  // UpdateVariable calls applied
};

struct StoredIterator {
  Mutex mu;  // a closure holds it while it draws from the iterator
  std::optional<data::Iterator> iterator STRATA_GUARDED_BY(mu);
};

// The per-worker iterators one closure reads from, each locked from when the
// closure's arguments are decoded until it returns. One thread at a time.
class IteratorLocks {
 public:
  IteratorLocks() = default;
  IteratorLocks(const IteratorLocks&) = delete;
  IteratorLocks& operator=(const IteratorLocks&) = delete;
  // The analysis follows locks of a fixed scope only; these are a run-time set.
  ~IteratorLocks() STRATA_NO_THREAD_SAFETY_ANALYSIS {
    for (auto it = held_.rbegin(); it != held_.rend(); ++it) (*it)->mu.unlock();
  }

  // Locks `stored` (once, however often a closure names it) and returns its
  // iterator, valid until this object is destroyed.
  data::Iterator* lock(const std::shared_ptr<StoredIterator>& stored)
      STRATA_NO_THREAD_SAFETY_ANALYSIS {
    if (std::find(held_.begin(), held_.end(), stored) == held_.end()) {
      stored->mu.lock();
      held_.push_back(stored);
    }
    return &*stored->iterator;
  }

 private:
  std::vector<std::shared_ptr<StoredIterator>> held_;
};

}  // namespace

struct Server::State final : pp::StrataTask::Service {
  std::string task_type;
  int task_id = 0;
  std::string device;
  ServerOptions options;
  int64_t incarnation = 0;
  int port = 0;
  std::string target;
  std::string token;  // the cluster token every call must carry

  mutable Mutex vars_mu;
  std::map<int64_t, std::shared_ptr<StoredVariable>> vars STRATA_GUARDED_BY(vars_mu);
  int64_t next_var_id STRATA_GUARDED_BY(vars_mu) = 0;

  Mutex iters_mu;
  std::map<int64_t, std::shared_ptr<StoredIterator>> iters STRATA_GUARDED_BY(iters_mu);
  std::atomic<int64_t> closures_run{0};

  std::unique_ptr<grpc::Server> server;
  Mutex stop_mu;
  CondVar stop_cv;
  bool stop_requested STRATA_GUARDED_BY(stop_mu) = false;
  std::once_flag shutdown_once;

  void request_stop() {
    MutexLock lock(stop_mu);
    stop_requested = true;
    stop_cv.notify_all();
  }
  void shutdown() {
    std::call_once(shutdown_once, [&] {
      server->Shutdown(std::chrono::system_clock::now() + options.shutdown_grace);
      server->Wait();
    });
  }

  // OK when the call carries this server's cluster token (compared in
  // constant time), else UNAUTHENTICATED: the handler then touches nothing.
  grpc::Status authorize(const grpc::ServerContext* context) const {
    const auto& metadata = context->client_metadata();
    const auto it = metadata.find(pi::kClusterTokenMetadata);
    const std::string_view offered = it == metadata.end()
                                         ? std::string_view()
                                         : std::string_view(it->second.data(), it->second.size());
    if (cluster::tokens_equal(offered, token)) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        str_cat("task ", task_type, ":", task_id,
                                " refused a call without this job's cluster token (every task "
                                "needs the same ",
                                cluster::kClusterTokenEnv, ")"));
  }

  void check_role(const char* rpc, const char* role) const {
    STRATA_CHECK(FAILED_PRECONDITION, task_type == role, rpc, ": task ", task_type, ":", task_id,
                 " is not a ", role, " task");
  }
  std::shared_ptr<StoredVariable> variable(int64_t id) const {
    MutexLock lock(vars_mu);
    auto it = vars.find(id);
    STRATA_CHECK(NOT_FOUND, it != vars.end(), "ps task ", task_id, ": no variable with id ", id);
    return it->second;
  }

  grpc::Status CreateVariable(grpc::ServerContext* context,
                              const pp::CreateVariableRequest* request,
                              pp::CreateVariableReply* reply) override {
    if (grpc::Status denied = authorize(context); !denied.ok()) return denied;
    return guarded([&] {
      check_role("CreateVariable", "ps");
      auto v = std::make_shared<StoredVariable>();
      v->name = request->name();
      v->trainable = request->trainable();
      v->aggregation = request->aggregation();
      {
        MutexLock vlock(v->mu);
        v->value = pi::from_proto(request->initial_value());
      }
      MutexLock lock(vars_mu);
      const int64_t id = next_var_id++;
      vars.emplace(id, std::move(v));
      reply->set_id(id);
      reply->set_device(device);
    });
  }

  grpc::Status ReadVariable(grpc::ServerContext* context, const pp::ReadVariableRequest* request,
                            pp::ReadVariableReply* reply) override {
    if (grpc::Status denied = authorize(context); !denied.ok()) return denied;
    return guarded([&] {
      check_role("ReadVariable", "ps");
      auto v = variable(request->id());
      Tensor value;
      {
        MutexLock lock(v->mu);
        value = v->value;
      }
      ++v->reads;
      pi::to_proto(value, reply->mutable_value());
    });
  }

  grpc::Status UpdateVariable(grpc::ServerContext* context,
                              const pp::UpdateVariableRequest* request,
                              pp::UpdateVariableReply* reply) override {
    if (grpc::Status denied = authorize(context); !denied.ok()) return denied;
    return guarded([&] {
      check_role("UpdateVariable", "ps");
      auto v = variable(request->id());
      const Tensor operand = pi::from_proto(request->value());
      Tensor after;
      {
        MutexLock lock(v->mu);
        STRATA_CHECK_ARG(operand.shape() == v->value.shape() && operand.dtype() == v->value.dtype(),
                         "UpdateVariable of '", v->name, "': expected ",
                         dtype_name(v->value.dtype()), " of shape ", v->value.shape(), ", got ",
                         dtype_name(operand.dtype()), " of shape ", operand.shape());
        switch (request->kind()) {
          case pp::UpdateVariableRequest::ASSIGN: v->value = operand; break;
          case pp::UpdateVariableRequest::ASSIGN_ADD: v->value = add(v->value, operand); break;
          case pp::UpdateVariableRequest::ASSIGN_SUB: v->value = subtract(v->value, operand); break;
          default:
            throw_error(ErrorCode::INVALID_ARGUMENT,
                        str_cat("UpdateVariable: unknown kind ", request->kind()));
        }
        after = v->value;
      }
      ++v->updates;
      if (request->read_back()) pi::to_proto(after, reply->mutable_value());
    });
  }

  grpc::Status ListVariables(grpc::ServerContext* context, const pp::ListVariablesRequest*,
                             pp::ListVariablesReply* reply) override {
    if (grpc::Status denied = authorize(context); !denied.ok()) return denied;
    return guarded([&] {
      check_role("ListVariables", "ps");
      MutexLock lock(vars_mu);
      for (const auto& [id, v] : vars) {
        MutexLock vlock(v->mu);
        pi::RemoteVariableInfo info;
        info.target = target;
        info.id = id;
        info.name = v->name;
        info.dtype = v->value.dtype();
        info.shape = v->value.shape();
        info.trainable = v->trainable;
        info.aggregation = static_cast<VariableAggregation>(v->aggregation);
        info.device = device;
        pi::to_proto(info, reply->add_variables());
      }
    });
  }

  grpc::Status RunClosure(grpc::ServerContext* context, const pp::RunClosureRequest* request,
                          pp::RunClosureReply* reply) override {
    if (grpc::Status denied = authorize(context); !denied.ok()) return denied;
    return guarded([&] {
      check_role("RunClosure", "worker");
      pi::last_unreachable_ps().clear();
      IteratorLocks iterator_locks;
      try {
        auto fn = ps::FunctionRegistry::global().function(request->function());
        std::vector<ps::FunctionArgs::Value> values;
        for (const pp::ClosureArg& arg : request->args()) {
          switch (arg.kind_case()) {
            case pp::ClosureArg::kTensor: values.emplace_back(pi::from_proto(arg.tensor())); break;
            case pp::ClosureArg::kVariable:
              values.emplace_back(
                  pi::make_remote_variable(pi::from_proto(arg.variable()), options.rpc_timeout));
              break;
            case pp::ClosureArg::kShardedVariable: {
              std::vector<Variable> shards;
              for (const pp::VariableRef& ref : arg.sharded_variable().shards())
                shards.push_back(
                    pi::make_remote_variable(pi::from_proto(ref), options.rpc_timeout));
              values.emplace_back(
                  ShardedVariable(std::move(shards), arg.sharded_variable().name()).as_variable());
              break;
            }
            case pp::ClosureArg::kIterator: {
              values.emplace_back(iterator_locks.lock(iterator(arg.iterator())));
              break;
            }
            default:
              throw_error(ErrorCode::DATA_LOSS,
                          str_cat("RunClosure: argument ", values.size(), " has no value"));
          }
        }
        ps::FunctionArgs args(request->function(), std::move(values));
        ps::internal::CurrentWorkerScope worker(task_id);
        // get_strategy() in the function: the worker's ParameterServerStrategy.
        auto strategy_scope = ps::internal::worker_strategy().scope();
        for (const Tensor& t : (*fn)(args)) pi::to_proto(t, reply->add_results());
      } catch (const Error& e) {
        reply->clear_results();
        reply->set_error_code(static_cast<int>(e.code()));
        reply->set_error_message(e.what());
        reply->set_failed_ps(pi::last_unreachable_ps());
      } catch (const std::exception& e) {
        reply->clear_results();
        reply->set_error_code(static_cast<int>(ErrorCode::UNKNOWN));
        reply->set_error_message(e.what());
      }
      ++closures_run;
    });
  }

  std::shared_ptr<StoredIterator> iterator(int64_t id) {
    MutexLock lock(iters_mu);
    auto it = iters.find(id);
    STRATA_CHECK(NOT_FOUND, it != iters.end(), "worker task ", task_id, ": no per-worker iterator ",
                 id);
    return it->second;
  }

  grpc::Status CreateIterator(grpc::ServerContext* context,
                              const pp::CreateIteratorRequest* request,
                              pp::CreateIteratorReply* reply) override {
    if (grpc::Status denied = authorize(context); !denied.ok()) return denied;
    return guarded([&] {
      check_role("CreateIterator", "worker");
      try {
        auto fn = ps::FunctionRegistry::global().dataset_function(request->dataset_function());
        data::Dataset ds =
            (*fn)(InputContext(request->num_input_pipelines(), request->input_pipeline_id()));
        auto stored = std::make_shared<StoredIterator>();
        {
          MutexLock lock(stored->mu);
          stored->iterator.emplace(ds.iter());
        }
        MutexLock lock(iters_mu);
        iters[request->id()] = std::move(stored);
      } catch (const Error& e) {
        reply->set_error_code(static_cast<int>(e.code()));
        reply->set_error_message(e.what());
      }
    });
  }

  grpc::Status Ping(grpc::ServerContext* context, const pp::PingRequest*,
                    pp::PingReply* reply) override {
    if (grpc::Status denied = authorize(context); !denied.ok()) return denied;
    reply->set_task_type(task_type);
    reply->set_task_id(task_id);
    reply->set_incarnation(incarnation);
    return grpc::Status::OK;
  }

  grpc::Status Stop(grpc::ServerContext* context, const pp::StopRequest*, pp::StopReply*) override {
    if (grpc::Status denied = authorize(context); !denied.ok()) return denied;
    // Only flags the stop: gRPC's Shutdown waits for handlers, this one included.
    request_stop();
    return grpc::Status::OK;
  }
};

Server::Server(const cluster_resolver::ClusterResolver& resolver, ServerOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  const std::optional<std::string> type = resolver.task_type();
  const std::optional<int> id = resolver.task_id();
  STRATA_CHECK_ARG(type.has_value() && id.has_value(),
                   "Server: expected the resolver to name this task (task_type and task_id), got ",
                   type.value_or("None"), ":", id ? std::to_string(*id) : "None");
  STRATA_CHECK_ARG(*type == "ps" || *type == "worker",
                   "Server: expected task type 'ps' or 'worker', got '", *type,
                   "' (the chief runs the ClusterCoordinator)");
  STRATA_CHECK_ARG(options.max_rpc_threads >= 2, "ServerOptions.max_rpc_threads must be >= 2, got ",
                   options.max_rpc_threads);
  s.task_type = *type;
  s.task_id = *id;
  s.device = str_cat("/job:", s.task_type, "/replica:0/task:", s.task_id, "/device:CPU:0");
  s.options = options;
  s.incarnation =
      static_cast<int64_t>(std::random_device{}() | (uint64_t{std::random_device{}()} << 32));
  STRATA_CHECK_ARG(options.max_message_bytes > 0,
                   "ServerOptions.max_message_bytes must be > 0, got ", options.max_message_bytes);
  s.token = options.token ? *options.token : cluster::cluster_token();
  cluster::validate_cluster_token(s.token, "Server");
  const std::string address = resolver.cluster_spec().task_address(s.task_type, s.task_id);
  const auto [host, port] = cluster::split_host_port(address);
  // The task's TF_CONFIG address; every interface only when the operator asked.
  const std::string bind =
      cluster::bind_all_interfaces()
          ? str_cat(host.find(':') != std::string::npos ? "[::]" : "0.0.0.0", ":", port)
          : address;

  grpc::ServerBuilder builder;
  grpc::ResourceQuota quota("strata-server");
  quota.SetMaxThreads(options.max_rpc_threads);
  builder.SetResourceQuota(quota);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              options.max_rpc_threads / 2);
  // gRPC refuses a larger message from its length prefix, before reading it.
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(-1);
  // gRPC binds with SO_REUSEPORT by default: a second server on a taken port
  // would share it, and the kernel would hand each connection to either of
  // them (a task's RPCs answered by another task). A taken port fails here.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(bind, grpc::InsecureServerCredentials(), &s.port);
  builder.RegisterService(&s);
  s.server = builder.BuildAndStart();
  STRATA_CHECK(UNAVAILABLE, s.server != nullptr && s.port > 0, "Server: task ", s.task_type, ":",
               s.task_id, " cannot listen on ", bind);
  s.target = str_cat(host, ":", s.port);
}

Server::~Server() {
  state_->request_stop();
  state_->shutdown();
}

void Server::join() {
  {
    State& s = *state_;
    MutexLock lock(s.stop_mu);
    // Blocks until stop() or a Stop RPC, as tf.distribute.Server.join does.
    s.stop_cv.wait(s.stop_mu, [&]() STRATA_REQUIRES(s.stop_mu) { return s.stop_requested; });
  }
  state_->shutdown();
}

void Server::stop() {
  state_->request_stop();
  state_->shutdown();
}

const std::string& Server::task_type() const noexcept { return state_->task_type; }
int Server::task_id() const noexcept { return state_->task_id; }
int Server::port() const noexcept { return state_->port; }
const std::string& Server::target() const noexcept { return state_->target; }

std::vector<Server::VariableSnapshot> Server::variables() const {
  std::vector<VariableSnapshot> out;
  MutexLock lock(state_->vars_mu);
  for (const auto& [id, v] : state_->vars) {
    MutexLock vlock(v->mu);
    out.push_back({id, v->name, state_->device, v->value, v->reads.load(), v->updates.load()});
  }
  return out;
}

int64_t Server::closures_run() const { return state_->closures_run.load(); }

}  // namespace strata::distribute
