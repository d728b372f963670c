// The peer of bench/ps_bench.cc written directly over gRPC (no Strata beyond
// the annotated Mutex of strata/base/mutex.h, a plain std::mutex underneath): the
// same loopback layout (2 ps servers, 1 or 2 worker servers, the chief in
// this thread, all on 127.0.0.1 in one process) and the same loops:
//   round trip: the chief calls Noop on a worker and waits (BM_PsClosureRoundTrip);
//   linear steps: per worker one chief thread sends Step requests one at a
//   time (one RPC in flight per worker, as the ClusterCoordinator); a step
//   reads w [3] from ps 0 and b from ps 1, computes the mean squared error's
//   gradient on its next batch of 32 with plain loops, and pushes both
//   updates (BM_PsLinearSteps).
//
//   build/bench/grpc_ps_peer [--runs=3]
// Prints each run and the median, in the units of ps_bench.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/peers/grpc_ps_peer.grpc.pb.h"
#include "strata/base/mutex.h"

namespace peer = strata_bench::peer;
using Clock = std::chrono::steady_clock;

namespace {

std::string to_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}
std::vector<float> from_bytes(const std::string& s) {
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}

class PsService final : public peer::Ps::Service {
 public:
  grpc::Status Read(grpc::ServerContext*, const peer::ReadRequest* request,
                    peer::ReadReply* reply) override {
    strata::MutexLock lock(mu_);
    reply->set_value(to_bytes(values_[request->id()]));
    return grpc::Status::OK;
  }
  grpc::Status Push(grpc::ServerContext*, const peer::PushRequest* request,
                    peer::PushReply*) override {
    const std::vector<float> delta = from_bytes(request->delta());
    strata::MutexLock lock(mu_);
    std::vector<float>& v = values_[request->id()];
    if (v.size() != delta.size()) return {grpc::StatusCode::INVALID_ARGUMENT, "shape"};
    for (size_t i = 0; i < v.size(); ++i) v[i] -= delta[i];
    return grpc::Status::OK;
  }
  void set(int id, std::vector<float> v) {
    strata::MutexLock lock(mu_);
    values_[id] = std::move(v);
  }

 private:
  strata::Mutex mu_;
  std::map<int, std::vector<float>> values_ STRATA_GUARDED_BY(mu_);
};

constexpr int kExamples = 1024, kBatch = 32;

class WorkerService final : public peer::Worker::Service {
 public:
  WorkerService(int index, int num_workers, const std::shared_ptr<grpc::Channel>& ps0,
                const std::shared_ptr<grpc::Channel>& ps1)
      : ps0_(peer::Ps::NewStub(ps0)), ps1_(peer::Ps::NewStub(ps1)) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (int i = 0; i < kExamples; ++i) {
      float xi[3] = {u(rng), u(rng), u(rng)};
      if (i % num_workers != index) continue;  // this worker's shard
      x_.insert(x_.end(), xi, xi + 3);
      y_.push_back(xi[0] - 2.f * xi[1] + 0.5f * xi[2] + 0.3f);
    }
  }
  grpc::Status Noop(grpc::ServerContext*, const peer::NoopRequest*, peer::NoopReply*) override {
    return grpc::Status::OK;
  }
  grpc::Status Step(grpc::ServerContext*, const peer::StepRequest* request,
                    peer::StepReply* reply) override {
    const std::vector<float> w = read(*ps0_, 0), b = read(*ps1_, 1);
    const size_t rows = y_.size();
    std::vector<float> gw(3, 0.f);
    float gb = 0.f, loss = 0.f;
    for (int k = 0; k < kBatch; ++k) {
      const size_t i = (cursor_ + k) % rows;
      const float* xi = &x_[i * 3];
      const float e = xi[0] * w[0] + xi[1] * w[1] + xi[2] * w[2] + b[0] - y_[i];
      loss += e * e;
      for (int j = 0; j < 3; ++j) gw[j] += 2.f * e * xi[j];
      gb += 2.f * e;
    }
    cursor_ = (cursor_ + kBatch) % rows;
    const float scale = request->learning_rate() / kBatch;
    for (float& g : gw) g *= scale;
    push(*ps0_, 0, gw);
    push(*ps1_, 1, {gb * scale});
    reply->set_loss(loss / kBatch);
    return grpc::Status::OK;
  }

 private:
  static std::vector<float> read(peer::Ps::Stub& ps, int id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    peer::ReadRequest request;
    request.set_id(id);
    peer::ReadReply reply;
    const grpc::Status s = ps.Read(&context, request, &reply);
    if (!s.ok()) throw std::runtime_error("Read: " + s.error_message());
    return from_bytes(reply.value());
  }
  static void push(peer::Ps::Stub& ps, int id, const std::vector<float>& delta) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    peer::PushRequest request;
    request.set_id(id);
    request.set_delta(to_bytes(delta));
    peer::PushReply reply;
    const grpc::Status s = ps.Push(&context, request, &reply);
    if (!s.ok()) throw std::runtime_error("Push: " + s.error_message());
  }

  std::unique_ptr<peer::Ps::Stub> ps0_, ps1_;
  std::vector<float> x_, y_;
  size_t cursor_ = 0;  // one Step at a time per worker (the chief's one RPC in flight)
};

// The server options of strata::distribute::Server (server.cc), so both sides
// poll the same way: one completion queue, 1..8 pollers.
std::unique_ptr<grpc::Server> serve(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 8);
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

std::shared_ptr<grpc::Channel> channel(int port) {
  return grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                             grpc::InsecureChannelCredentials());
}

struct Cluster {
  explicit Cluster(int workers) {
    int port = 0;
    for (int k = 0; k < 2; ++k) {
      ps.push_back(std::make_unique<PsService>());
      servers.push_back(serve(ps.back().get(), &port));
      ps_ports.push_back(port);
    }
    ps[0]->set(0, {0.f, 0.f, 0.f});
    ps[1]->set(1, {0.f});
    for (int k = 0; k < workers; ++k) {
      worker.push_back(
          std::make_unique<WorkerService>(k, workers, channel(ps_ports[0]), channel(ps_ports[1])));
      servers.push_back(serve(worker.back().get(), &port));
      stubs.push_back(peer::Worker::NewStub(channel(port)));
    }
  }
  ~Cluster() {
    for (auto& s : servers) s->Shutdown();
  }
  std::vector<std::unique_ptr<PsService>> ps;
  std::vector<int> ps_ports;
  std::vector<std::unique_ptr<WorkerService>> worker;
  std::vector<std::unique_ptr<peer::Worker::Stub>> stubs;
  std::vector<std::unique_ptr<grpc::Server>> servers;
};

template <typename Call>
void call_ok(Call&& call) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  const grpc::Status s = call(&context);
  if (!s.ok()) throw std::runtime_error(s.error_message());
}

// Microseconds per Noop round trip, over `calls` calls.
double round_trip_us(Cluster& c, int calls) {
  peer::NoopRequest request;
  peer::NoopReply reply;
  for (int i = 0; i < 100; ++i)
    call_ok([&](grpc::ClientContext* ctx) { return c.stubs[0]->Noop(ctx, request, &reply); });
  const auto start = Clock::now();
  for (int i = 0; i < calls; ++i)
    call_ok([&](grpc::ClientContext* ctx) { return c.stubs[0]->Noop(ctx, request, &reply); });
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / calls;
}

// Steps per second for `steps` steps spread over the workers.
double steps_per_s(Cluster& c, int steps) {
  std::atomic<int> next{0};
  auto drive = [&](size_t w, int limit) {
    peer::StepRequest request;
    request.set_learning_rate(0.05f);
    peer::StepReply reply;
    while (next.fetch_add(1) < limit)
      call_ok([&](grpc::ClientContext* ctx) { return c.stubs[w]->Step(ctx, request, &reply); });
  };
  // Warm up: connections from every worker to both ps.
  for (size_t w = 0; w < c.stubs.size(); ++w) {
    next = 0;
    drive(w, 2);
  }
  next = 0;
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (size_t w = 0; w < c.stubs.size(); ++w) threads.emplace_back(drive, w, steps);
  for (auto& t : threads) t.join();
  return steps / std::chrono::duration<double>(Clock::now() - start).count();
}

void report(const char* what, std::vector<double> runs) {
  std::string all;
  for (double r : runs) all += (all.empty() ? "" : ", ") + std::to_string(r);
  std::sort(runs.begin(), runs.end());
  std::printf("%s median=%.2f runs=[%s]\n", what, runs[runs.size() / 2], all.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 3;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--runs=", 7) == 0) runs = std::max(1, std::atoi(argv[i] + 7));
  try {
    {
      Cluster c(1);
      std::vector<double> r;
      r.reserve(static_cast<size_t>(runs));
      for (int i = 0; i < runs; ++i) r.push_back(round_trip_us(c, 3000));
      report("grpc_ps_peer round_trip_us", r);
    }
    for (int workers : {1, 2}) {
      Cluster c(workers);
      std::vector<double> r;
      r.reserve(static_cast<size_t>(runs));
      for (int i = 0; i < runs; ++i) r.push_back(steps_per_s(c, 2000));
      report(workers == 1 ? "grpc_ps_peer linear_steps_per_s workers=1"
                          : "grpc_ps_peer linear_steps_per_s workers=2",
             r);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grpc_ps_peer: %s\n", e.what());
    return 1;
  }
  return 0;
}
