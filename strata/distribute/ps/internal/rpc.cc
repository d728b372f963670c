#include "strata/distribute/ps/internal/rpc.h"

#include <grpcpp/grpcpp.h>

#include <bit>
#include <cstring>
#include <map>

#include "strata/base/mutex.h"
#include "strata/cluster/cluster_token.h"
#include "strata/distribute/ps/internal/wire.h"
#include "strata/distribute/ps/ps.grpc.pb.h"

namespace strata::distribute::ps::internal {

namespace {

constexpr int kNumDTypes = static_cast<int>(DType::string) + 1;

// Element bytes little-endian whatever the host (the wire format's order).
void copy_little_endian(const std::byte* src, std::byte* dst, size_t count, size_t width) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(dst, src, count * width);
  } else {
    for (size_t i = 0; i < count; ++i)
      for (size_t b = 0; b < width; ++b) dst[i * width + b] = src[i * width + width - 1 - b];
  }
}

std::chrono::system_clock::time_point deadline_after(Seconds timeout) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(timeout);
}

[[noreturn]] void throw_status(const grpc::Status& status, const char* rpc,
                               const std::string& target) {
  // gRPC's codes are google.rpc.Code, as strata::ErrorCode.
  throw_error(static_cast<ErrorCode>(status.error_code()),
              str_cat(rpc, " to ", target, ": ", status.error_message()));
}

}  // namespace

void to_proto(const Tensor& tensor, proto::TensorProto* out) {
  out->set_dtype(static_cast<int>(tensor.dtype()));
  for (int64_t d : tensor.shape().dims()) out->add_dims(d);
  if (tensor.dtype() == DType::string) {
    const std::string* s = tensor.data<std::string>();
    for (int64_t i = 0; i < tensor.num_elements(); ++i) out->add_strings(s[i]);
    return;
  }
  std::string* bytes = out->mutable_data();
  bytes->resize(tensor.size_bytes());
  copy_little_endian(static_cast<const std::byte*>(tensor.raw_data()),
                     reinterpret_cast<std::byte*>(bytes->data()), tensor.num_elements(),
                     dtype_size(tensor.dtype()));
}

Tensor from_proto(const proto::TensorProto& proto) {
  STRATA_CHECK(DATA_LOSS, proto.dtype() >= 0 && proto.dtype() < kNumDTypes,
               "TensorProto: expected a dtype in [0, ", kNumDTypes, "), got ", proto.dtype());
  const DType dtype = static_cast<DType>(proto.dtype());
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  for (int64_t d : dims) STRATA_CHECK(DATA_LOSS, d >= 0, "TensorProto: negative dimension ", d);
  const TensorShape shape(dims);
  Tensor t = Tensor::allocate(dtype, shape);
  const auto n = static_cast<size_t>(shape.num_elements());
  if (dtype == DType::string) {
    STRATA_CHECK(DATA_LOSS, static_cast<size_t>(proto.strings_size()) == n, "TensorProto: shape ",
                 shape, " needs ", n, " strings, got ", proto.strings_size());
    std::string* s = t.mutable_data<std::string>();
    for (size_t i = 0; i < n; ++i) s[i] = proto.strings(static_cast<int>(i));
    return t;
  }
  const size_t width = dtype_size(dtype);
  STRATA_CHECK(DATA_LOSS, proto.data().size() == n * width, "TensorProto: shape ", shape, " of ",
               dtype_name(dtype), " needs ", n * width, " bytes, got ", proto.data().size());
  copy_little_endian(reinterpret_cast<const std::byte*>(proto.data().data()),
                     static_cast<std::byte*>(t.mutable_raw_data()), n, width);
  return t;
}

void to_proto(const RemoteVariableInfo& info, proto::VariableRef* out) {
  out->set_target(info.target);
  out->set_id(info.id);
  out->set_name(info.name);
  out->set_dtype(static_cast<int>(info.dtype));
  for (int64_t d : info.shape.dims()) out->add_dims(d);
  out->set_trainable(info.trainable);
  out->set_aggregation(static_cast<int>(info.aggregation));
  out->set_device(info.device);
  out->set_synchronization(static_cast<int>(info.synchronization));
}

RemoteVariableInfo from_proto(const proto::VariableRef& ref) {
  STRATA_CHECK(DATA_LOSS, ref.dtype() >= 0 && ref.dtype() < kNumDTypes,
               "VariableRef: expected a dtype in [0, ", kNumDTypes, "), got ", ref.dtype());
  STRATA_CHECK(DATA_LOSS, ref.aggregation() >= 0 && ref.aggregation() <= 3,
               "VariableRef: expected an aggregation in [0, 3], got ", ref.aggregation());
  RemoteVariableInfo info;
  info.target = ref.target();
  info.id = ref.id();
  info.name = ref.name();
  info.dtype = static_cast<DType>(ref.dtype());
  info.shape = TensorShape(std::vector<int64_t>(ref.dims().begin(), ref.dims().end()));
  info.trainable = ref.trainable();
  info.aggregation = static_cast<VariableAggregation>(ref.aggregation());
  info.device = ref.device();
  STRATA_CHECK(DATA_LOSS, ref.synchronization() >= 0 && ref.synchronization() <= 3,
               "VariableRef: expected a synchronization in [0, 3], got ", ref.synchronization());
  info.synchronization = static_cast<VariableSynchronization>(ref.synchronization());
  return info;
}

std::string& last_unreachable_ps() {
  thread_local std::string target;
  return target;
}

bool is_unreachable(ErrorCode code) noexcept {
  // CANCELLED: the task shut down with the call in flight (nobody else cancels a ps call).
  return code == ErrorCode::UNAVAILABLE || code == ErrorCode::DEADLINE_EXCEEDED ||
         code == ErrorCode::CANCELLED;
}

struct RpcCancellation::State {
  mutable Mutex mu;
  grpc::ClientContext* context STRATA_GUARDED_BY(mu) = nullptr;  // the call in flight, if any
  bool cancelled STRATA_GUARDED_BY(mu) = false;
};

RpcCancellation::RpcCancellation() : state_(std::make_unique<State>()) {}
RpcCancellation::~RpcCancellation() = default;

void RpcCancellation::cancel() {
  MutexLock lock(state_->mu);
  state_->cancelled = true;
  if (state_->context) state_->context->TryCancel();
}

bool RpcCancellation::cancelled() const {
  MutexLock lock(state_->mu);
  return state_->cancelled;
}

struct TaskClient::Stub {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<proto::StrataTask::Stub> stub;
};

std::shared_ptr<TaskClient> TaskClient::get(const std::string& target) {
  // One client (one channel) per target, shared while anyone holds it.
  struct Clients {
    Mutex mu;
    std::map<std::string, std::weak_ptr<TaskClient>> by_target STRATA_GUARDED_BY(mu);
  };
  static Clients clients;
  MutexLock lock(clients.mu);
  std::weak_ptr<TaskClient>& slot = clients.by_target[target];
  if (auto client = slot.lock()) return client;
  auto client = std::make_shared<TaskClient>(target);
  slot = client;
  return client;
}

TaskClient::TaskClient(std::string target)
    : target_(std::move(target)), token_(cluster::cluster_token()), stub_(new Stub) {
  grpc::ChannelArguments args;
  // A dead task is reported at once instead of after a long reconnect backoff.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  stub_->channel = grpc::CreateCustomChannel(target_, grpc::InsecureChannelCredentials(), args);
  stub_->stub = proto::StrataTask::NewStub(stub_->channel);
}

TaskClient::~TaskClient() = default;

namespace {
// Runs one unary call with a deadline; throws the status as a strata::Error.
// Registers the call's context with `cancellation` for the call's duration.
class CancellationGuard {
 public:
  CancellationGuard(RpcCancellation::State* state, grpc::ClientContext* context) : state_(state) {
    if (!state_) return;
    MutexLock lock(state_->mu);
    state_->context = context;
    if (state_->cancelled) context->TryCancel();
  }
  ~CancellationGuard() {
    if (!state_) return;
    MutexLock lock(state_->mu);
    state_->context = nullptr;
  }
  CancellationGuard(const CancellationGuard&) = delete;
  CancellationGuard& operator=(const CancellationGuard&) = delete;

 private:
  RpcCancellation::State* state_;
};

template <typename Request, typename Reply, typename Method>
Reply call(proto::StrataTask::Stub& stub, const std::string& token, Method method,
           const Request& request, Seconds timeout, const char* rpc, const std::string& target,
           RpcCancellation::State* cancel = nullptr) {
  grpc::ClientContext context;
  context.set_deadline(deadline_after(timeout));
  // Every call carries the cluster token; the server refuses calls without it.
  if (!token.empty()) context.AddMetadata(kClusterTokenMetadata, token);
  Reply reply;
  grpc::Status status;
  {
    CancellationGuard guard(cancel, &context);
    status = (stub.*method)(&context, request, &reply);
  }
  if (!status.ok()) throw_status(status, rpc, target);
  return reply;
}

// A variable RPC: remembers an unreachable ps for the closure's report.
template <typename Fn>
auto ps_call(const std::string& target, Fn&& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    if (is_unreachable(e.code())) last_unreachable_ps() = target;
    throw;
  }
}
}  // namespace

RemoteVariableInfo TaskClient::create_variable(const std::string& name, const Tensor& initial_value,
                                               bool trainable, VariableAggregation aggregation,
                                               Seconds timeout) {
  proto::CreateVariableRequest request;
  request.set_name(name);
  to_proto(initial_value, request.mutable_initial_value());
  request.set_trainable(trainable);
  request.set_aggregation(static_cast<int>(aggregation));
  auto reply = ps_call(target_, [&] {
    return call<proto::CreateVariableRequest, proto::CreateVariableReply>(
        *stub_->stub, token_, &proto::StrataTask::Stub::CreateVariable, request, timeout,
        "CreateVariable", target_);
  });
  RemoteVariableInfo info;
  info.target = target_;
  info.id = reply.id();
  info.name = name;
  info.dtype = initial_value.dtype();
  info.shape = initial_value.shape();
  info.trainable = trainable;
  info.aggregation = aggregation;
  info.device = reply.device();
  return info;
}

Tensor TaskClient::read_variable(int64_t id, Seconds timeout) {
  proto::ReadVariableRequest request;
  request.set_id(id);
  return ps_call(target_, [&] {
    return from_proto(call<proto::ReadVariableRequest, proto::ReadVariableReply>(
                          *stub_->stub, token_, &proto::StrataTask::Stub::ReadVariable, request,
                          timeout, "ReadVariable", target_)
                          .value());
  });
}

Tensor TaskClient::update_variable(int64_t id, UpdateKind kind, const Tensor& value, bool read_back,
                                   Seconds timeout) {
  proto::UpdateVariableRequest request;
  request.set_id(id);
  request.set_kind(static_cast<proto::UpdateVariableRequest::Kind>(kind));
  to_proto(value, request.mutable_value());
  request.set_read_back(read_back);
  return ps_call(target_, [&] {
    auto reply = call<proto::UpdateVariableRequest, proto::UpdateVariableReply>(
        *stub_->stub, token_, &proto::StrataTask::Stub::UpdateVariable, request, timeout,
        "UpdateVariable", target_);
    return read_back ? from_proto(reply.value()) : Tensor();
  });
}

std::vector<RemoteVariableInfo> TaskClient::list_variables(Seconds timeout) {
  auto reply = call<proto::ListVariablesRequest, proto::ListVariablesReply>(
      *stub_->stub, token_, &proto::StrataTask::Stub::ListVariables, proto::ListVariablesRequest(),
      timeout, "ListVariables", target_);
  std::vector<RemoteVariableInfo> out;
  for (const auto& ref : reply.variables()) out.push_back(from_proto(ref));
  return out;
}

ClosureOutcome TaskClient::run_closure(const std::string& function,
                                       const std::vector<WireArg>& args, Seconds timeout,
                                       RpcCancellation* cancellation) {
  proto::RunClosureRequest request;
  request.set_function(function);
  for (const WireArg& arg : args) {
    proto::ClosureArg* a = request.add_args();
    if (const auto* t = std::get_if<Tensor>(&arg)) {
      to_proto(*t, a->mutable_tensor());
    } else if (const auto* v = std::get_if<RemoteVariableInfo>(&arg)) {
      to_proto(*v, a->mutable_variable());
    } else if (const auto* sv = std::get_if<ShardedVariableInfo>(&arg)) {
      proto::ShardedVariableRef* ref = a->mutable_sharded_variable();
      ref->set_name(sv->name);
      for (const RemoteVariableInfo& shard : sv->shards) to_proto(shard, ref->add_shards());
    } else {
      a->set_iterator(std::get<IteratorRef>(arg).id);
    }
  }
  auto reply = call<proto::RunClosureRequest, proto::RunClosureReply>(
      *stub_->stub, token_, &proto::StrataTask::Stub::RunClosure, request, timeout, "RunClosure",
      target_, cancellation ? cancellation->state_.get() : nullptr);
  ClosureOutcome outcome;
  outcome.code = static_cast<ErrorCode>(reply.error_code());
  outcome.message = reply.error_message();
  outcome.failed_ps = reply.failed_ps();
  for (const auto& r : reply.results()) outcome.results.push_back(from_proto(r));
  return outcome;
}

void TaskClient::create_iterator(int64_t id, const std::string& dataset_function,
                                 int num_input_pipelines, int input_pipeline_id, Seconds timeout) {
  proto::CreateIteratorRequest request;
  request.set_id(id);
  request.set_dataset_function(dataset_function);
  request.set_num_input_pipelines(num_input_pipelines);
  request.set_input_pipeline_id(input_pipeline_id);
  auto reply = call<proto::CreateIteratorRequest, proto::CreateIteratorReply>(
      *stub_->stub, token_, &proto::StrataTask::Stub::CreateIterator, request, timeout,
      "CreateIterator", target_);
  if (reply.error_code() != 0)
    throw_error(static_cast<ErrorCode>(reply.error_code()), reply.error_message());
}

PingInfo TaskClient::ping(Seconds timeout) {
  auto reply = call<proto::PingRequest, proto::PingReply>(
      *stub_->stub, token_, &proto::StrataTask::Stub::Ping, proto::PingRequest(), timeout, "Ping",
      target_);
  return {reply.task_type(), reply.task_id(), reply.incarnation()};
}

void TaskClient::stop(Seconds timeout) {
  call<proto::StopRequest, proto::StopReply>(*stub_->stub, token_, &proto::StrataTask::Stub::Stop,
                                             proto::StopRequest(), timeout, "Stop", target_);
}

}  // namespace strata::distribute::ps::internal
