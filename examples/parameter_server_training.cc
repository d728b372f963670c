// The seed page's TF_CONFIG snippet with ParameterServerStrategy: a cluster of
// two workers and one ps (plus the chief that ParameterServerStrategy needs as
// its coordinator), every process running this same program and branching on
// cluster_resolver.task_type():
//
//   TF_CONFIG='{"cluster": {"chief": ["localhost:20000"],
//                           "worker": ["localhost:12345", "localhost:23456"],
//                           "ps": ["localhost:34567"]},
//               "task": {"type": "ps", "index": 0}}' build/examples/parameter_server_training
//
// Without TF_CONFIG the program launches the cluster itself on free loopback
// ports: it starts the ps and the two workers as child processes (this binary
// again, each with its TF_CONFIG) and runs the chief. The chief trains a linear
// model (y = x . [1, -2, 0.5] + 0.3) with 300 scheduled steps and checks that
// the loss falls below 1e-3 and the variables sit on the ps.
//   --kill-worker   SIGKILLs worker 1 mid-training: its closures are retried on
//                   worker 0 and training still completes.
//   --kill-ps       SIGKILLs the ps mid-training: the chief must get
//                   UnavailableError within 5 seconds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "example_check.h"
#include "strata/strata.h"

// gRPC, protobuf and abseil come from Debian uninstrumented: their locks and
// completion-queue hand-offs are invisible to ThreadSanitizer, so a buffer
// they pass between their threads would be reported as a race. Under TSan the
// interceptors ignore calls from uninstrumented modules (TSAN_OPTIONS still
// adds to or overrides this).
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_options() { return "ignore_noninstrumented_modules=1"; }
#endif

namespace tf = strata;
namespace sd = strata::distribute;
namespace cr = strata::distribute::cluster_resolver;
namespace sps = strata::distribute::ps;
using example::expect;
using namespace std::chrono_literals;

namespace {

constexpr int64_t kExamples = 256;
constexpr int64_t kBatch = 32;
constexpr int kSteps = 300;

tf::data::Dataset linear_data(const sd::InputContext& ctx) {
  tf::Tensor x = tf::random::uniform({kExamples, 3}, {.minval = -1, .maxval = 1, .seed = 7});
  tf::Tensor y =
      tf::matmul(x, tf::constant(std::vector<float>{1.f, -2.f, 0.5f}, {3, 1})) + tf::constant(0.3f);
  return tf::data::Dataset::from_tensor_slices({x, y})
      .shard(ctx.num_input_pipelines(), ctx.input_pipeline_id())
      .repeat()
      .batch(kBatch);
}
STRATA_REGISTER_DATASET_FUNCTION(linear_data, linear_data);

// Runs on a worker: w and b live on the ps; the update is applied there.
std::vector<tf::Tensor> train_step(const sps::FunctionArgs& args) {
  const tf::Variable& w = args.variable(0);
  const tf::Variable& b = args.variable(1);
  tf::data::Element batch = args.iterator(2).get_next();
  tf::GradientTape tape;
  tf::Tensor loss =
      tf::reduce_mean(tf::square(tf::matmul(batch[0], w.value()) + b.value() - batch[1]));
  std::vector<tf::Tensor> g = tape.gradient(loss, std::vector<tf::Variable>{w, b});
  w.assign_sub(g[0] * tf::constant(0.2f));
  b.assign_sub(g[1] * tf::constant(0.2f));
  return {loss};
}
STRATA_REGISTER_FUNCTION(train_step, train_step);

std::vector<tf::Tensor> full_loss(const sps::FunctionArgs& args) {
  tf::data::Element all = linear_data(sd::InputContext())
                              .take(kExamples / kBatch)
                              .unbatch()
                              .batch(kExamples)
                              .iter()
                              .get_next();
  return {tf::reduce_mean(tf::square(tf::matmul(all[0], args.variable(0).value()) +
                                     args.variable(1).value() - all[1]))};
}
STRATA_REGISTER_FUNCTION(full_loss, full_loss);

std::vector<int> pick_free_ports(int n) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      std::perror("pick_free_ports");
      std::exit(1);
    }
    fds.push_back(fd);  // held until all are picked, so they are distinct
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

std::string tf_config(const std::vector<int>& ports, const std::string& type, int index) {
  auto at = [&](int i) { return "\"localhost:" + std::to_string(ports[i]) + "\""; };
  return "{\"cluster\": {\"chief\": [" + at(0) + "], \"worker\": [" + at(1) + ", " + at(2) +
         "], \"ps\": [" + at(3) + "]}, \"task\": {\"type\": \"" + type +
         "\", \"index\": " + std::to_string(index) + "}}";
}

// The child processes of a self-launched cluster; killed and reaped on exit.
struct Children {
  std::vector<pid_t> pids;  // worker 0, worker 1, ps 0
  ~Children() {
    for (pid_t p : pids) ::kill(p, SIGKILL);
    for (pid_t p : pids) ::waitpid(p, nullptr, 0);
  }
  void spawn(const char* self, const std::string& config) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("TF_CONFIG", config.c_str(), 1);
      ::execl("/proc/self/exe", self, static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    pids.push_back(pid);
  }
};

int run_chief(const std::shared_ptr<cr::TFConfigClusterResolver>& resolver, Children* children,
              bool kill_worker, bool kill_ps) {
  sd::ParameterServerStrategy strategy(resolver);
  tf::Variable w, b;
  {
    auto scope = strategy.scope();
    // The ps may still be starting: the first creation retries for a while.
    for (int attempt = 0;; ++attempt) {
      try {
        w = tf::Variable(tf::zeros({3, 1}), {.name = "w"});
        break;
      } catch (const tf::UnavailableError&) {
        if (attempt == 100) throw;
        std::this_thread::sleep_for(100ms);
      }
    }
    b = tf::Variable(tf::zeros({}), {.name = "b"});
  }
  std::cout << "w lives on " << w.device() << ", b on " << b.device() << "\n";
  expect(w.device() == "/job:ps/replica:0/task:0/device:CPU:0", "w is on the ps");
  sd::ClusterCoordinator coordinator(strategy, {.ping_interval = 50ms});
  auto iterator = coordinator.create_per_worker_dataset("linear_data").iter();
  std::vector<sd::RemoteValue<>> losses;
  for (int step = 0; step < kSteps; ++step) {
    losses.push_back(coordinator.schedule("train_step", {w, b, iterator}));
    if (step == kSteps / 3 && children) {
      losses[step / 2].fetch();  // training is under way
      if (kill_worker) {
        std::cout << "killing worker 1 (pid " << children->pids[1] << ")\n";
        ::kill(children->pids[1], SIGKILL);
      }
      if (kill_ps) {
        std::cout << "killing the ps (pid " << children->pids[2] << ")\n";
        ::kill(children->pids[2], SIGKILL);
        const auto start = std::chrono::steady_clock::now();
        try {
          for (int more = 0; more < kSteps; ++more)
            coordinator.schedule("train_step", {w, b, iterator});
          coordinator.join();
          expect(false, "a dead ps raises UnavailableError");
        } catch (const tf::UnavailableError& e) {
          const double s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          std::cout << "the chief got UnavailableError after " << s << " s: " << e.what() << "\n";
          expect(s < 5.0, "the ps failure is reported within 5 s");
        }
        return example::exit_code();
      }
    }
  }
  coordinator.join();
  const float loss = coordinator.schedule("full_loss", {w, b}).fetch().at(0).item<float>();
  std::cout << "after " << kSteps << " steps: loss " << loss << ", w " << w.value().values_string()
            << ", b " << b.value().values_string() << ", closures retried after a worker failure "
            << coordinator.worker_failures() << "\n";
  expect(loss < 1e-3f, "the loss falls below 1e-3");
  if (kill_worker)
    expect(coordinator.worker_failures() >= 1,
           "the killed worker's closure failed and was retried on the other worker");
  for (const auto& l : losses) expect(l.fetch().size() == 1, "every step has a result");
  return example::exit_code();
}

}  // namespace

int main(int argc, char** argv) {
  bool kill_worker = false, kill_ps = false;
  for (int i = 1; i < argc; ++i) {
    kill_worker = kill_worker || std::strcmp(argv[i], "--kill-worker") == 0;
    kill_ps = kill_ps || std::strcmp(argv[i], "--kill-ps") == 0;
  }
  try {
    Children children;
    if (!std::getenv("TF_CONFIG")) {
      const std::vector<int> ports = pick_free_ports(4);
      children.spawn(argv[0], tf_config(ports, "worker", 0));
      children.spawn(argv[0], tf_config(ports, "worker", 1));
      children.spawn(argv[0], tf_config(ports, "ps", 0));
      const std::string chief = tf_config(ports, "chief", 0);
      std::cout << "TF_CONFIG of the chief: " << chief << "\n";
      ::setenv("TF_CONFIG", chief.c_str(), 1);
    }
    auto resolver = std::make_shared<cr::TFConfigClusterResolver>();
    if (resolver->task_type() == "worker" || resolver->task_type() == "ps") {
      // Perform something that's only applicable on workers / parameter servers:
      // serve closures / variables until stopped (here: killed by the chief).
      sd::Server server(*resolver);
      server.join();
      return 0;
    }
    return run_chief(resolver, children.pids.empty() ? nullptr : &children, kill_worker, kill_ps);
  } catch (const tf::Error& e) {
    std::cerr << "error (" << tf::error_code_name(e.code()) << "): " << e.what() << "\n";
    return 1;
  }
}
