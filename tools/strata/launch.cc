#include "tools/strata/launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/str_cat.h"
#include "strata/cluster/cluster_token.h"
#include "strata/cluster/socket.h"

extern char** environ;

namespace strata::tools {

namespace {

std::atomic<int> g_forward_signal{0};  // the signal to forward to the children, 0 = none

void on_signal(int sig) { g_forward_signal.store(sig); }

struct Stream {
  UniqueFd fd;
  std::string pending;  // bytes after the last newline
  std::ostream* out;
  // The last line that reads as an error (the strata CLI's "strata: ..."
  // line, else the last line with "error"), for the report at the end.
  std::string last_error;
};

struct Worker {
  std::string task;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  bool killed_by_launch = false;  // SIGKILLed after the grace period
  Stream streams[2];
};

void note_line(Stream& s, const std::string& line) {
  if (line.rfind("strata: ", 0) == 0 ||
      (s.last_error.rfind("strata: ", 0) != 0 && line.find("error") != std::string::npos)) {
    s.last_error = line;
  }
}

void flush_lines(Stream& s, const std::string& task, bool final) {
  size_t start = 0;
  for (;;) {
    const size_t nl = s.pending.find('\n', start);
    if (nl == std::string::npos) break;
    const std::string line = s.pending.substr(start, nl - start);
    note_line(s, line);
    *s.out << "[" << task << "] " << line << "\n";
    start = nl + 1;
  }
  s.pending.erase(0, start);
  if (final && !s.pending.empty()) {
    note_line(s, s.pending);
    *s.out << "[" << task << "] " << s.pending << "\n";
    s.pending.clear();
  }
  s.out->flush();
}

// One line per worker after a failed job: how it ended and the error it
// printed, so that every worker's view of a failure (which task never
// arrived, what it was last doing) reads in one place.
void print_report(const std::vector<Worker>& workers) {
  std::cerr << "[launch] report of every worker:\n";
  for (const Worker& w : workers) {
    std::string how;
    if (WIFEXITED(w.status)) {
      how = str_cat("exit status ", WEXITSTATUS(w.status));
    } else if (WIFSIGNALED(w.status)) {
      how = str_cat("killed by signal ", WTERMSIG(w.status), " (", ::strsignal(WTERMSIG(w.status)),
                    ")", w.killed_by_launch ? " after the grace period" : "");
    }
    const std::string& error =
        !w.streams[1].last_error.empty() ? w.streams[1].last_error : w.streams[0].last_error;
    std::cerr << "[launch]   " << w.task << ": " << how << ": "
              << (error.empty() ? std::string("printed no error") : error) << "\n";
  }
  std::cerr.flush();
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

std::string make_tf_config(const std::vector<std::string>& addresses, int index) {
  nlohmann::json config;
  config["cluster"]["worker"] = addresses;
  config["task"] = {{"type", "worker"}, {"index", index}};
  return config.dump();
}

int run_launch(const LaunchOptions& options) {
  STRATA_CHECK_ARG(options.nproc >= 1, "launch: --nproc must be >= 1, got ", options.nproc);
  STRATA_CHECK_ARG(options.devices_per_worker >= 0,
                   "launch: --devices-per-worker must be >= 0, got ", options.devices_per_worker);
  STRATA_CHECK_ARG(!options.command.empty(), "launch: expected a program after --, got nothing");

  // Every worker gets the cluster token that authenticates the job's
  // connections: the operator's when set, else a fresh one.
  std::string token = cluster::cluster_token();
  if (token.empty()) token = cluster::generate_cluster_token();

  std::vector<std::string> addresses;
  for (int port : cluster::pick_free_ports(options.nproc))
    addresses.push_back("127.0.0.1:" + std::to_string(port));

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  std::vector<Worker> workers(options.nproc);
  std::vector<char*> argv;
  for (const std::string& a : options.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  for (int i = 0; i < options.nproc; ++i) {
    Worker& w = workers[i];
    w.task = "worker:" + std::to_string(i);
    int out_pipe[2], err_pipe[2];
    STRATA_CHECK(UNAVAILABLE, ::pipe(out_pipe) == 0 && ::pipe(err_pipe) == 0,
                 "launch: pipe() failed: ", std::strerror(errno));
    // The child's environment: ours plus TF_CONFIG, the cluster token (and the device count).
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "TF_CONFIG=", 10) == 0) continue;
      if (std::strncmp(*e, "STRATA_CLUSTER_TOKEN=", 21) == 0) continue;
      if (options.devices_per_worker > 0 && std::strncmp(*e, "STRATA_CPU_DEVICES=", 19) == 0)
        continue;
      env_strings.emplace_back(*e);
    }
    env_strings.push_back("TF_CONFIG=" + make_tf_config(addresses, i));
    env_strings.push_back(str_cat(cluster::kClusterTokenEnv, "=", token));
    if (options.devices_per_worker > 0) {
      env_strings.push_back("STRATA_CPU_DEVICES=" + std::to_string(options.devices_per_worker));
    }
    std::vector<char*> envp;
    envp.reserve(env_strings.size());
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
    posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
    const int rc = ::posix_spawnp(&w.pid, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    w.streams[0] = {UniqueFd(out_pipe[0]), {}, &std::cout, {}};
    w.streams[1] = {UniqueFd(err_pipe[0]), {}, &std::cerr, {}};
    if (rc != 0) {
      for (auto& other : workers) {
        if (other.running) ::kill(other.pid, SIGKILL);
      }
      for (auto& other : workers) {
        if (other.running) ::waitpid(other.pid, nullptr, 0);
      }
      sigaction(SIGINT, &old_int, nullptr);
      sigaction(SIGTERM, &old_term, nullptr);
      throw NotFoundError(
          str_cat("launch: cannot start '", options.command[0], "': ", std::strerror(rc)));
    }
    w.running = true;
  }

  int result = 0;
  bool stopping = false;
  std::chrono::steady_clock::time_point kill_at{};
  auto stop_others = [&](int sig) {
    for (auto& w : workers)
      if (w.running) ::kill(w.pid, sig);
    if (!stopping)
      kill_at = std::chrono::steady_clock::now() +
                std::chrono::milliseconds(static_cast<int>(options.grace_seconds * 1000));
    stopping = true;
  };

  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<int, int>> owners;  // (worker, stream)
    for (int i = 0; i < options.nproc; ++i) {
      for (int s = 0; s < 2; ++s) {
        if (workers[i].streams[s].fd.get() >= 0) {
          fds.push_back({workers[i].streams[s].fd.get(), POLLIN, 0});
          owners.emplace_back(i, s);
        }
      }
    }
    bool any_running = false;
    for (auto& w : workers) any_running = any_running || w.running;
    if (fds.empty() && !any_running) break;

    ::poll(fds.data(), fds.size(), 100);
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [i, s] = owners[k];
      Stream& stream = workers[i].streams[s];
      char buf[4096];
      const ssize_t n = ::read(stream.fd.get(), buf, sizeof(buf));
      if (n > 0) {
        stream.pending.append(buf, static_cast<size_t>(n));
        flush_lines(stream, workers[i].task, false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        flush_lines(stream, workers[i].task, true);
        stream.fd.reset();
      }
    }
    for (auto& w : workers) {
      if (!w.running) continue;
      int status = 0;
      if (::waitpid(w.pid, &status, WNOHANG) == w.pid) {
        w.running = false;
        w.status = status;
        const int code = exit_code_of(status);
        if (code != 0 && result == 0 && !stopping) {
          result = code;
          std::cerr << "[launch] " << w.task << " failed with status " << code
                    << "; stopping the other workers\n";
          stop_others(SIGTERM);
        }
      }
    }
    if (const int sig = g_forward_signal.exchange(0); sig != 0) {
      std::cerr << "[launch] forwarding signal " << sig << " to the workers\n";
      if (result == 0) result = 128 + sig;
      stop_others(sig);
    }
    if (stopping && std::chrono::steady_clock::now() > kill_at) {
      for (auto& w : workers) {
        if (w.running && !w.killed_by_launch) {
          ::kill(w.pid, SIGKILL);
          w.killed_by_launch = true;
        }
      }
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (result != 0) print_report(workers);
  return result;
}

}  // namespace strata::tools
