// Cross-process all-reduce, one rank per process on loopback (the all-reduce
// figure): GlooCollectives over the chief's TCP store, as
// MultiWorkerMirroredStrategy uses it, versus the peers that
// bench/peers/allreduce_2proc.py runs in the same invocation (raw Gloo
// AllreduceRing in bench/peers/gloo_allreduce_ring.cc and
// torch.distributed.all_reduce with the gloo backend).
//
//   multiworker_allreduce_bench --rank R --size N --store 127.0.0.1:PORT
//                               (--mib M | --bytes B) --iters K [--warmup W]
//                               [--collective all_reduce|reduce_scatter]
//
// Rank 0 serves the store at PORT. Every rank all-reduces (SUM) a float32
// tensor of M MiB (or B bytes, at least one element) K times after W untimed
// calls, or reduce-scatters it (each rank receives its 1/N of the sum); the
// timed loop is between two barriers, and rank 0 prints one JSON line:
//   {"impl": "strata", "collective": "all_reduce", "bytes": B, "mib": M,
//    "seconds_per_call": ..., "algbw_mib_s": ...}
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "strata/cluster/tcp_store.h"
#include "strata/collective/gloo_collectives.h"
#include "strata/core/tensor.h"

namespace {

namespace sc = strata::collective;
namespace cl = strata::cluster;

std::string arg(int argc, char** argv, const std::string& name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (name == argv[i]) return argv[i + 1];
  }
  if (fallback == nullptr) {
    std::cerr << "multiworker_allreduce_bench: missing " << name << "\n";
    std::exit(2);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int rank = std::stoi(arg(argc, argv, "--rank", nullptr));
  const int size = std::stoi(arg(argc, argv, "--size", nullptr));
  const std::string address = arg(argc, argv, "--store", nullptr);
  const std::string bytes_arg = arg(argc, argv, "--bytes", "");
  const double mib = bytes_arg.empty() ? std::stod(arg(argc, argv, "--mib", nullptr))
                                       : std::stod(bytes_arg) / (1024 * 1024);
  const std::string collective = arg(argc, argv, "--collective", "all_reduce");
  if (collective != "all_reduce" && collective != "reduce_scatter") {
    std::cerr << "multiworker_allreduce_bench: unknown --collective " << collective << "\n";
    return 2;
  }
  const bool scatter = collective == "reduce_scatter";
  const int iters = std::stoi(arg(argc, argv, "--iters", nullptr));
  const int warmup = std::stoi(arg(argc, argv, "--warmup", "2"));
  try {
    std::unique_ptr<cl::TcpStoreServer> server;
    if (rank == 0) server = std::make_unique<cl::TcpStoreServer>(address);
    auto client = std::make_shared<cl::TcpStoreClient>(
        address, cl::TcpStoreClientOptions{.connect_timeout = std::chrono::seconds(60)});
    sc::GlooCollectives group(rank, size, client,
                              sc::GlooOptions{.timeout = std::chrono::seconds(120)});
    // At least one element, and for reduce_scatter a multiple of the group size.
    int64_t count = std::max<int64_t>(1, static_cast<int64_t>(mib * 1024 * 1024 / 4));
    if (scatter) count = std::max<int64_t>(size, count / size * size);
    const strata::Tensor x = strata::constant(std::vector<float>(count, 1.f + rank));
    auto call = [&] {
      return scatter ? group.reduce_scatter(rank, x, sc::ReduceOp::SUM)
                     : group.all_reduce(rank, x, sc::ReduceOp::SUM);
    };
    for (int i = 0; i < warmup; ++i) call();
    group.barrier(rank);
    const auto start = std::chrono::steady_clock::now();
    float check = 0;
    for (int i = 0; i < iters; ++i) {
      const strata::Tensor s = call();
      check += s.data<float>()[s.num_elements() - 1];
    }
    group.barrier(rank);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
    if (check != iters * size * (size + 1) / 2.f) {
      std::cerr << "multiworker_allreduce_bench: wrong sum " << check << "\n";
      return 1;
    }
    if (rank == 0) {
      const double bytes = static_cast<double>(count) * 4;
      std::printf(
          "{\"impl\": \"strata\", \"collective\": \"%s\", \"bytes\": %.0f, \"mib\": %g, "
          "\"seconds_per_call\": %.9f, \"algbw_mib_s\": %.1f}\n",
          collective.c_str(), bytes, bytes / (1024 * 1024), seconds,
          bytes / (1024 * 1024) / seconds);
    }
    // Keep the store up until every rank has finished with it.
    group.barrier(rank);
  } catch (const std::exception& e) {
    std::cerr << "multiworker_allreduce_bench rank " << rank << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
