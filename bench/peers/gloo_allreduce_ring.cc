// The raw-Gloo peer of bench/multiworker_allreduce_bench.cc: a standalone
// program (Gloo only, no Strata) running gloo::AllreduceRing<float> between
// processes over Gloo's TCP transport on loopback, rendezvousing through a
// gloo::rendezvous::FileStore directory.
//
//   gloo_allreduce_ring --rank R --size N --store DIR (--mib M | --bytes B) --iters K
//                       [--warmup W] [--sync 0|1|2]
//
// --sync 1 switches every pair to Gloo's synchronous mode (the calling thread
// reads its socket itself instead of waiting for Gloo's device thread to
// read it and wake it); 2 also busy-polls the socket. The default, 0, is
// Gloo's asynchronous mode, which Strata's GlooCollectives uses.
//
// The algorithm object is built once (its buffers registered up front, as
// Gloo's own benchmarks do) and run K times after W untimed runs, between two
// barriers; rank 0 prints
//   {"impl": "gloo_allreduce_ring", "bytes": B, "mib": M, "seconds_per_call": ...,
//    "algbw_mib_s": ...}
// (B bytes: at least one float32 element.)
#include <gloo/allreduce_ring.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

std::string arg(int argc, char** argv, const std::string& name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (name == argv[i]) return argv[i + 1];
  }
  if (fallback == nullptr) {
    std::cerr << "gloo_allreduce_ring: missing " << name << "\n";
    std::exit(2);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int rank = std::stoi(arg(argc, argv, "--rank", nullptr));
  const int size = std::stoi(arg(argc, argv, "--size", nullptr));
  const std::string dir = arg(argc, argv, "--store", nullptr);
  const std::string bytes_arg = arg(argc, argv, "--bytes", "");
  const double mib = bytes_arg.empty() ? std::stod(arg(argc, argv, "--mib", nullptr))
                                       : std::stod(bytes_arg) / (1024 * 1024);
  const int iters = std::stoi(arg(argc, argv, "--iters", nullptr));
  const int warmup = std::stoi(arg(argc, argv, "--warmup", "2"));
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(dir);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(std::chrono::seconds(120));
    context->connectFullMesh(store, device);
    const std::string sync = arg(argc, argv, "--sync", "0");
    if (sync != "0") {
      for (int peer = 0; peer < size; ++peer) {
        if (peer != rank) context->getPair(peer)->setSync(true, /*busyPoll=*/sync == "2");
      }
    }
    const int count = std::max(1, static_cast<int>(mib * 1024 * 1024 / 4));
    std::vector<float> data(count);
    gloo::AllreduceRing<float> ring(context, {data.data()}, count);
    gloo::BarrierAllToAll barrier(context);
    auto fill = [&] { std::fill(data.begin(), data.end(), 1.f + rank); };
    for (int i = 0; i < warmup; ++i) {
      fill();
      ring.run();
    }
    barrier.run();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) ring.run();  // in place: the sum grows, the timing does not
    barrier.run();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
    if (rank == 0) {
      const double bytes = count * 4.0;
      std::printf(
          "{\"impl\": \"gloo_allreduce_ring\", \"bytes\": %.0f, \"mib\": %g, "
          "\"seconds_per_call\": %.9f, \"algbw_mib_s\": %.1f}\n",
          bytes, bytes / (1024 * 1024), seconds, bytes / (1024 * 1024) / seconds);
    }
    // Leave together through the store, not the connections: a rank that left
    // right after a last Gloo barrier could close its connection while the
    // peer's barrier still waits, and Gloo then reports the close instead.
    store.set("done/" + std::to_string(rank), {'1'});
    std::vector<std::string> all;
    all.reserve(size);
    for (int r = 0; r < size; ++r) all.push_back("done/" + std::to_string(r));
    store.wait(all, std::chrono::seconds(120));
  } catch (const std::exception& e) {
    std::cerr << "gloo_allreduce_ring rank " << rank << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
