// Collective benchmarks: all-reduce SUM of float32 against peers in the same run.
//
//   build/bench/collective_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//
// BM_LocalAllReduce/<ranks>/<MiB>: LocalCollectives with <ranks> long-lived
//   rank threads (the benchmark thread is rank 0). Counters:
//     algbw      bytes per rank / time (what NCCL calls algorithm bandwidth);
//     traffic    (ranks + 1) * bytes / time: the memory traffic an ideal
//                all-reduce needs (read every input once, write the result once);
//     stream     the same traffic rate of a plain multi-threaded N-way add over
//                pre-touched buffers, measured in the same run (the memory-bandwidth
//                roof for this access pattern on this machine);
//     of_stream  traffic / stream (target >= 0.5).
// BM_StreamAdd/<ranks>/<MiB>: that reference kernel as its own row.
// BM_GlooAllReduceBytes/<bytes> and BM_RawGlooAllReduceBytes/<bytes>: 2 ranks on
//   threads over loopback TCP, 4 B (one element) .. 64 MiB; GlooCollectives
//   versus gloo::allreduce called directly with separate input and output
//   buffers (target: >= 1.0x raw Gloo at every size). Raw Gloo is included here
//   only to be the peer; the library keeps Gloo private to one file.
//   bench/peers/allreduce_2proc.py measures the same with the ranks in 2 processes.
// BM_ShmAllReduce/<bytes> (against BM_RawGlooAllReduceBytes/<bytes>): 2 ranks on
//   threads (each with its own object, exchanging through the shared-memory
//   segment exactly as two processes would), ShmCollectives versus raw Gloo over
//   loopback TCP at 4 B .. 64 MiB (targets: >= 2x raw Gloo at 16-64 MiB;
//   <= 20 us per call at 4 B - 64 KiB).
// BM_ShmAllReduceProcesses/<bytes>: the same with rank 1 in a forked process
//   (the two ranks meet through a TCP store served by the benchmark process).
//   From 1 MiB on also traffic (4 * bytes / time: each rank reads its input
//   and writes its result once), stream (BM_StreamAdd's 2-thread rate at that
//   size, measured after the calls) and of_stream = traffic / stream.
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <thread>
#include <vector>

#include "strata/cluster/tcp_store.h"
#include "strata/collective/gloo_collectives.h"
#include "strata/collective/local_collectives.h"
#include "strata/collective/shm_collectives.h"

namespace sc = strata::collective;
using strata::Tensor;

namespace {

constexpr int64_t kMiB = 1 << 20;

// A float32 tensor of `bytes` bytes whose element 0 is `flag` (helper ranks
// stop when the reduced element 0 is non-zero) and the rest 1.
Tensor payload(int64_t bytes, float flag) {
  Tensor t = Tensor::allocate(strata::float32, {bytes / 4});
  float* p = t.mutable_data<float>();
  std::fill(p, p + bytes / 4, 1.f);
  p[0] = flag;
  return t;
}

// Two untimed calls before a timed loop: the first touches the pages of
// the output buffers (a fresh mapping faults on every page, 4 us each on a
// virtual machine: 64 MiB cost 0.3 s), after which the collectives' buffer
// pool hands them out again, as in every training step after the first. The
// raw Gloo peer's output vector is touched when it is made, before its loop.
template <typename Group>
void warm_up(Group& group, const Tensor& mine) {
  for (int i = 0; i < 2; ++i) group.all_reduce(0, mine, sc::ReduceOp::SUM);
}

// The reference: n threads each summing their 1/n slice of n inputs into one
// output (the access pattern of LocalCollectives' reduce-scatter), repeated.
// Returns the best traffic rate in bytes/s over `reps` runs.
double stream_add_rate(int n, int64_t bytes, int reps) {
  const int64_t count = bytes / 4;
  std::vector<std::vector<float>> in(n, std::vector<float>(count, 1.f));
  std::vector<float> out(count, 0.f);
  std::barrier sync(n + 1);
  std::atomic<bool> stop{false};
  std::vector<std::jthread> threads;
  threads.reserve(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const int64_t per = (count + n - 1) / n;
      const int64_t b = std::min(count, r * per), e = std::min(count, b + per);
      for (;;) {
        sync.arrive_and_wait();
        if (stop) return;
        for (int64_t start = b; start < e; start += 4096) {
          const int64_t end = std::min(e, start + 4096);
          float* __restrict o = out.data();
          const float* __restrict x = in[0].data();
          const float* __restrict y = n > 1 ? in[1].data() : in[0].data();
          for (int64_t i = start; i < end; ++i) o[i] = x[i] + y[i];
          for (int j = 2; j < n; ++j) {
            const float* __restrict z = in[j].data();
            for (int64_t i = start; i < end; ++i) o[i] += z[i];
          }
        }
        sync.arrive_and_wait();
      }
    });
  }
  double best = 0;
  for (int k = 0; k < reps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n + 1) * bytes / s);
  }
  stop = true;
  sync.arrive_and_wait();
  benchmark::DoNotOptimize(out.data());
  return best;
}

void BM_StreamAdd(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int64_t bytes = state.range(1) * kMiB;
  double rate = 0;
  for (auto _ : state) {
    rate = stream_add_rate(n, bytes, 5);
    state.SetIterationTime(static_cast<double>(n + 1) * bytes / rate);
  }
  state.counters["traffic"] =
      benchmark::Counter(rate, benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
}
BENCHMARK(BM_StreamAdd)->ArgsProduct({{2, 4}, {1, 64}})->UseManualTime()->Iterations(3);

void BM_LocalAllReduce(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int64_t bytes = state.range(1) * kMiB;
  const double stream = stream_add_rate(n, bytes, 5);
  sc::LocalCollectives group(n);
  std::vector<std::jthread> helpers;
  for (int r = 1; r < n; ++r) {
    helpers.emplace_back([&, r] {
      const Tensor mine = payload(bytes, 0.f);
      for (;;) {
        Tensor s = group.all_reduce(r, mine, sc::ReduceOp::SUM);
        if (s.data<float>()[0] != 0.f) return;
      }
    });
  }
  const Tensor mine = payload(bytes, 0.f);
  warm_up(group, mine);
  for (auto _ : state) {
    Tensor s = group.all_reduce(0, mine, sc::ReduceOp::SUM);
    benchmark::DoNotOptimize(s.raw_data());
  }
  group.all_reduce(0, payload(bytes, 1.f), sc::ReduceOp::SUM);  // releases the helpers
  helpers.clear();
  const double iters = static_cast<double>(state.iterations());
  using C = benchmark::Counter;
  state.counters["algbw"] = C(bytes * iters, C::kIsRate, C::kIs1024);
  state.counters["traffic"] = C((n + 1) * bytes * iters, C::kIsRate, C::kIs1024);
  state.counters["stream"] = C(stream, C::kDefaults, C::kIs1024);
  // kIsRate divides by the measured time: traffic / stream.
  state.counters["of_stream"] = C((n + 1) * bytes * iters / stream, C::kIsRate);
  state.SetLabel(std::to_string(n) + " ranks");
}
BENCHMARK(BM_LocalAllReduce)
    ->ArgsProduct({{2, 4}, {1, 64}})
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// Two GlooCollectives on threads over loopback; the benchmark thread is rank 0.
void BM_GlooAllReduceBytes(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  auto store = std::make_shared<strata::InMemoryStore>();
  std::unique_ptr<sc::GlooCollectives> peer;
  std::jthread connect([&] { peer = std::make_unique<sc::GlooCollectives>(1, 2, store); });
  sc::GlooCollectives group(0, 2, store);
  connect.join();
  std::jthread helper([&] {
    const Tensor mine = payload(bytes, 0.f);
    for (;;) {
      Tensor s = peer->all_reduce(1, mine, sc::ReduceOp::SUM);
      if (s.data<float>()[0] != 0.f) return;
    }
  });
  const Tensor mine = payload(bytes, 0.f);
  warm_up(group, mine);
  for (auto _ : state) {
    Tensor s = group.all_reduce(0, mine, sc::ReduceOp::SUM);
    benchmark::DoNotOptimize(s.raw_data());
  }
  group.all_reduce(0, payload(bytes, 1.f), sc::ReduceOp::SUM);
  helper.join();
  using C = benchmark::Counter;
  state.counters["algbw"] =
      C(bytes * static_cast<double>(state.iterations()), C::kIsRate, C::kIs1024);
}

// The peer: gloo::allreduce with a separate input and output (as
// GlooCollectives uses it), on contexts connected through Gloo's HashStore.
void raw_gloo_all_reduce(benchmark::State& state, int64_t count) {
  gloo::rendezvous::HashStore store;
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto make_context = [&](int rank) {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, 2);
    ctx->connectFullMesh(store, device);
    return ctx;
  };
  std::shared_ptr<gloo::rendezvous::Context> peer_ctx;
  std::jthread connect([&] { peer_ctx = make_context(1); });
  auto ctx = make_context(0);
  connect.join();
  auto run = [count](const std::shared_ptr<gloo::rendezvous::Context>& c, std::vector<float>& in,
                     std::vector<float>& out) {
    gloo::AllreduceOptions opts(c);
    opts.setInput(in.data(), count);
    opts.setOutput(out.data(), count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(opts);
  };
  std::jthread helper([&] {
    std::vector<float> in(count, 1.f), out(count);
    in[0] = 0.f;
    for (;;) {
      run(peer_ctx, in, out);
      if (out[0] != 0.f) return;
    }
  });
  std::vector<float> in(count, 1.f), out(count);
  in[0] = 0.f;
  for (auto _ : state) {
    run(ctx, in, out);
    benchmark::DoNotOptimize(out.data());
  }
  in[0] = 1.f;
  run(ctx, in, out);
  helper.join();
  using C = benchmark::Counter;
  state.counters["algbw"] =
      C(count * 4.0 * static_cast<double>(state.iterations()), C::kIsRate, C::kIs1024);
}

// The sizes of the TCP and shared-memory comparisons, in bytes.
void all_reduce_sizes(benchmark::internal::Benchmark* b) {
  for (int64_t bytes :
       {int64_t{4}, int64_t{4} << 10, int64_t{64} << 10, kMiB, 16 * kMiB, 64 * kMiB})
    b->Arg(bytes);
}

void BM_RawGlooAllReduceBytes(benchmark::State& state) {
  raw_gloo_all_reduce(state, state.range(0) / 4);
}
BENCHMARK(BM_RawGlooAllReduceBytes)->Apply(all_reduce_sizes)->UseRealTime();
BENCHMARK(BM_GlooAllReduceBytes)->Apply(all_reduce_sizes)->UseRealTime();

// Two ShmCollectives objects on threads; the benchmark thread is rank 0.
void BM_ShmAllReduce(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  auto store = std::make_shared<strata::InMemoryStore>();
  std::unique_ptr<sc::ShmCollectives> peer;
  std::jthread connect([&] { peer = std::make_unique<sc::ShmCollectives>(1, 2, store); });
  sc::ShmCollectives group(0, 2, store);
  connect.join();
  std::jthread helper([&] {
    const Tensor mine = payload(bytes, 0.f);
    for (;;) {
      Tensor s = peer->all_reduce(1, mine, sc::ReduceOp::SUM);
      if (s.data<float>()[0] != 0.f) return;
    }
  });
  const Tensor mine = payload(bytes, 0.f);
  warm_up(group, mine);
  for (auto _ : state) {
    Tensor s = group.all_reduce(0, mine, sc::ReduceOp::SUM);
    benchmark::DoNotOptimize(s.raw_data());
  }
  group.all_reduce(0, payload(bytes, 1.f), sc::ReduceOp::SUM);
  helper.join();
  using C = benchmark::Counter;
  state.counters["algbw"] =
      C(bytes * static_cast<double>(state.iterations()), C::kIsRate, C::kIs1024);
}
BENCHMARK(BM_ShmAllReduce)->Apply(all_reduce_sizes)->UseRealTime();

// Rank 1 in a forked process that all-reduces until element 0 of the sum is non-zero.
void BM_ShmAllReduceProcesses(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  strata::cluster::TcpStoreServer server("127.0.0.1:0", {.token = ""});
  const pid_t child = ::fork();
  if (child == 0) {
    int status = 0;
    try {
      auto store = std::make_shared<strata::cluster::TcpStoreClient>(
          server.address(), strata::cluster::TcpStoreClientOptions{.token = ""});
      sc::ShmCollectives peer(1, 2, store);
      const Tensor mine = payload(bytes, 0.f);
      while (peer.all_reduce(1, mine, sc::ReduceOp::SUM).data<float>()[0] == 0.f) {
      }
    } catch (...) {
      status = 1;
    }
    ::_exit(status);
  }
  auto store = std::make_shared<strata::cluster::TcpStoreClient>(
      server.address(), strata::cluster::TcpStoreClientOptions{.token = ""});
  sc::ShmCollectives group(0, 2, store);
  const Tensor mine = payload(bytes, 0.f);
  warm_up(group, mine);
  for (auto _ : state) {
    Tensor s = group.all_reduce(0, mine, sc::ReduceOp::SUM);
    benchmark::DoNotOptimize(s.raw_data());
  }
  group.all_reduce(0, payload(bytes, 1.f), sc::ReduceOp::SUM);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) state.SkipWithError("rank 1 failed");
  const double iters = static_cast<double>(state.iterations());
  using C = benchmark::Counter;
  state.counters["algbw"] = C(bytes * iters, C::kIsRate, C::kIs1024);
  if (bytes >= kMiB) {
    // The least memory traffic of the call: each of the 2 ranks reads its
    // input and writes its result once (what moves through the segment can
    // stay in the cache), against a 2-thread add over the same size.
    const double stream = stream_add_rate(2, bytes, 5);
    state.counters["traffic"] = C(4 * bytes * iters, C::kIsRate, C::kIs1024);
    state.counters["stream"] = C(stream, C::kDefaults, C::kIs1024);
    state.counters["of_stream"] = C(4 * bytes * iters / stream, C::kIsRate);
  }
}
BENCHMARK(BM_ShmAllReduceProcesses)->Apply(all_reduce_sizes)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
