// MultiWorkerMirroredStrategy's all-reduce across 2 worker processes on this
// host, over shared memory (CommunicationOptions.shared_memory AUTO: the
// workers share the host, so ShmCollectives) and over Gloo's TCP (OFF), in one
// run: the co-located-workers figure of docs/PERFORMANCE.md.
//
//   mwms_allreduce_bench [--repetitions 5] [--deadline 600]
//
// Without TF_CONFIG the program is the launcher: for every repetition and each
// transport in turn it picks free loopback ports and starts itself twice with
// TF_CONFIG set (worker i = task i). Each worker builds the strategy (1
// logical CPU device) and, for every size (4 B to 64 MiB of float32), sums a
// tensor over the workers (strategy.sum_across_workers, the strategy's
// cross-worker group) a few times untimed, then times a fixed number of calls
// between two barriers; worker 0 reports seconds per call. The launcher prints
// one JSON line per measurement, then a table of medians over the repetitions
// with the ratio Gloo time / shared-memory time.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "strata/base/file.h"
#include "strata/strata.h"

extern char** environ;

namespace strata {
namespace {

namespace sd = strata::distribute;

// Bytes per call, and how many timed calls each gets.
const std::vector<std::pair<int64_t, int>> kSizes = {
    {4, 2000}, {4 << 10, 2000}, {64 << 10, 1000}, {1 << 20, 100}, {16 << 20, 10}, {64 << 20, 4}};
const std::vector<std::string> kTransports = {"shared_memory", "gloo"};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string size_name(int64_t bytes) {
  if (bytes >= (1 << 20)) return str_cat(bytes >> 20, " MiB");
  if (bytes >= (1 << 10)) return str_cat(bytes >> 10, " KiB");
  return str_cat(bytes, " B");
}

std::string time_name(double seconds) {
  char out[32];
  if (seconds >= 1e-3) {
    std::snprintf(out, sizeof(out), "%.2f ms", seconds * 1e3);
  } else {
    std::snprintf(out, sizeof(out), "%.1f µs", seconds * 1e6);
  }
  return out;
}

// --- worker ------------------------------------------------------------------
int work(const std::string& transport) {
  config::set_intra_op_parallelism_threads(1);
  sd::MultiWorkerMirroredStrategy strategy(
      {.communication_options = {
           .timeout_seconds = 120,
           .shared_memory = transport == "gloo" ? sd::SharedMemory::OFF : sd::SharedMemory::AUTO}});
  STRATA_CHECK(FAILED_PRECONDITION, strategy.cross_worker_transport() == transport,
               "mwms_allreduce_bench: expected the ", transport, " transport, got ",
               strategy.cross_worker_transport());
  const Tensor zero = constant(0.f);
  for (const auto& [bytes, iters] : kSizes) {
    const int64_t n = bytes / 4;
    const Tensor x = constant(std::vector<float>(n, 1.f + strategy.worker_index()));
    for (int i = 0; i < 3; ++i) strategy.sum_across_workers(x);
    strategy.sum_across_workers(zero);  // a barrier
    const auto start = std::chrono::steady_clock::now();
    float check = 0;
    for (int i = 0; i < iters; ++i) check += strategy.sum_across_workers(x).data<float>()[n - 1];
    strategy.sum_across_workers(zero);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
    STRATA_CHECK(INTERNAL, check == 3.f * iters, "mwms_allreduce_bench: wrong sum ", check);
    if (strategy.worker_index() == 0) std::printf("%lld %.9f\n", (long long)bytes, seconds);
  }
  std::fflush(stdout);
  strategy.sum_across_workers(zero);  // keep the chief's store up until every worker is done
  return 0;
}

// --- launcher ----------------------------------------------------------------
// Runs the 2 workers of one transport; worker 0's lines (bytes, seconds) go to `out`.
bool run_pair(const std::string& transport, const std::string& out, int deadline_s) {
  const std::vector<int> ports = cluster::pick_free_ports(2);
  const std::string cluster = str_cat("\"127.0.0.1:", ports[0], "\", \"127.0.0.1:", ports[1], "\"");
  std::vector<pid_t> pids;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> env_strings{
        str_cat("TF_CONFIG={\"cluster\": {\"worker\": [", cluster,
                "]}, \"task\": {\"type\": \"worker\", \"index\": ", i, "}}"),
        "STRATA_MIN_LOG_LEVEL=1"};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "TF_CONFIG=", 10) != 0) env_strings.emplace_back(*e);
    }
    std::vector<char*> env;
    env.reserve(env_strings.size() + 1);
    for (std::string& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    std::string self = "/proc/self/exe", flag = "--worker", value = transport;
    std::vector<char*> argv{self.data(), flag.data(), value.data(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (i == 0) {
      posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
    }
    pid_t pid = 0;
    const int rc =
        ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), env.data());
    posix_spawn_file_actions_destroy(&actions);
    STRATA_CHECK(UNAVAILABLE, rc == 0, "posix_spawn worker ", i, ": ", std::strerror(rc));
    pids.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(deadline_s);
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t p : pids) ::kill(p, SIGKILL);
        ::waitpid(pid, &status, 0);
        ok = false;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok;
}

int launch(int repetitions, int deadline_s) {
  const TempDir dir("mwms_allreduce_bench");
  std::map<std::pair<std::string, int64_t>, std::vector<double>> results;
  for (int rep = 0; rep < repetitions; ++rep) {
    for (const std::string& transport : kTransports) {
      const std::string out = dir.file(str_cat(transport, rep, ".out"));
      if (!run_pair(transport, out, deadline_s)) {
        std::cerr << "mwms_allreduce_bench: the " << transport << " workers failed\n";
        return 1;
      }
      std::ifstream in(out);
      long long bytes = 0;
      double seconds = 0;
      while (in >> bytes >> seconds) {
        results[{transport, bytes}].push_back(seconds);
        std::printf(
            "{\"transport\": \"%s\", \"bytes\": %lld, \"seconds_per_call\": %.9f, "
            "\"repetition\": %d}\n",
            transport.c_str(), bytes, seconds, rep);
      }
    }
  }
  double load[3] = {0, 0, 0};
  ::getloadavg(load, 3);
  std::printf("load average: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  std::printf("| size | shared memory | Gloo over TCP | Gloo / shared memory |\n");
  std::printf("| --- | --- | --- | --- |\n");
  for (const auto& [bytes, iters] : kSizes) {
    const auto& shm = results[{"shared_memory", bytes}];
    const auto& gloo = results[{"gloo", bytes}];
    if (shm.empty() || gloo.empty()) continue;
    std::printf("| %s | %s | %s | %.2f |\n", size_name(bytes).c_str(),
                time_name(median(shm)).c_str(), time_name(median(gloo)).c_str(),
                median(gloo) / median(shm));
  }
  return 0;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  try {
    int repetitions = 5, deadline_s = 600;
    std::string worker;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string name = argv[i];
      if (name == "--worker") {
        worker = argv[i + 1];
      } else if (name == "--repetitions") {
        repetitions = std::stoi(argv[i + 1]);
      } else if (name == "--deadline") {
        deadline_s = std::stoi(argv[i + 1]);
      } else {
        std::cerr << "mwms_allreduce_bench: unknown flag " << name << "\n";
        return 2;
      }
    }
    if (!worker.empty()) return strata::work(worker);
    return strata::launch(repetitions, deadline_s);
  } catch (const std::exception& e) {
    std::cerr << "mwms_allreduce_bench: " << e.what() << "\n";
    return 1;
  }
}
