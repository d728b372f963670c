#pragma once
// Shared by the translated TensorFlow guides in this folder: the flags that
// shorten a guide for its test run, a fresh temporary directory for the files
// a guide writes into its working directory, and the processes that stand for
// the guides' `python main.py` workers (this program again, with TF_CONFIG).
//
//   auto flags = tutorial::parse_flags(argc, argv, {.epochs = 10});   // --epochs 2
//   --limit-examples 1280 int EPOCHS = flags.epochs; std::string dir =
//   tutorial::make_temp_dir("custom_training");
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace tutorial {

struct Flags {
  int epochs = 1;               // the guide's EPOCHS; --epochs overrides it
  int64_t limit_examples = -1;  // --limit-examples N: keep the first N training examples
  int64_t steps = -1;           // --steps N: the guide's step counts (steps_per_epoch, ...)
  int64_t width = -1;  // --width N: the widest layers get N units, the others in proportion
};

// The defaults with the flags in argv applied; an unknown flag exits with 2.
inline Flags parse_flags(int argc, char** argv, Flags flags) {
  for (int i = 1; i < argc; i += 2) {
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    if (std::strcmp(argv[i], "--epochs") == 0) {
      flags.epochs = std::atoi(value);
    } else if (std::strcmp(argv[i], "--limit-examples") == 0) {
      flags.limit_examples = std::atoll(value);
    } else if (std::strcmp(argv[i], "--steps") == 0) {
      flags.steps = std::atoll(value);
    } else if (std::strcmp(argv[i], "--width") == 0) {
      flags.width = std::atoll(value);
    } else {
      std::cerr << argv[0] << ": unknown flag '" << argv[i]
                << "' (--epochs N, --limit-examples N, --steps N, --width N)\n";
      std::exit(2);
    }
  }
  return flags;
}

// A new empty directory under the system's temporary directory.
inline std::string make_temp_dir(const std::string& name) {
  std::string pattern = (std::filesystem::temp_directory_path() / (name + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::cerr << "cannot create a temporary directory from " << pattern << "\n";
    std::exit(2);
  }
  return pattern;
}

// n distinct free TCP ports on the loopback interface (the guides' fixed
// 'localhost:12345' ports could be taken by concurrent tests).
inline std::vector<int> pick_free_ports(int n) {
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
      std::exit(2);
    }
    fds.push_back(fd);  // held until all are picked, so that they are distinct
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

// Child processes running this program again (a worker of the guide's
// cluster). Each gets TF_CONFIG and its own arguments; its output goes to a
// log file (the guide's `python main.py &> job_0.log`) or to this process's.
// Children still running when the object dies are killed and reaped.
class Processes {
 public:
  Processes() = default;
  Processes(const Processes&) = delete;
  Processes& operator=(const Processes&) = delete;
  ~Processes() {
    for (pid_t p : running_) ::kill(p, SIGKILL);
    for (pid_t p : running_) ::waitpid(p, nullptr, 0);
  }

  // Starts `/proc/self/exe args...` with TF_CONFIG=tf_config; log_path "" =
  // this process's stdout and stderr.
  pid_t spawn(const std::vector<std::string>& args, const std::string& tf_config,
              const std::string& log_path = "") {
    std::cout.flush();
    std::cerr.flush();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("TF_CONFIG", tf_config.c_str(), 1);
      if (!log_path.empty()) {
        const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) std::_Exit(126);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
      }
      std::vector<char*> argv;
      static char self[] = "/proc/self/exe";
      argv.push_back(self);
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(self, argv.data());
      std::_Exit(127);
    }
    running_.push_back(pid);
    return pid;
  }

  // Waits for `pid` to exit, at most `timeout`; returns its exit status, or -1
  // after killing it when the time ran out (or when it died of a signal).
  int wait(pid_t pid, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::cerr << "process " << pid << " did not finish within " << timeout.count()
                  << " s: killed\n";
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        forget(pid);
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    forget(pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  void forget(pid_t pid) {
    for (size_t i = 0; i < running_.size(); ++i) {
      if (running_[i] == pid) {
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        return;
      }
    }
  }
  std::vector<pid_t> running_;
};

// The text of a file (the guide's `cat job_0.log`); "" when it cannot be read.
inline std::string read_text(const std::string& path) {
  std::string text;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

}  // namespace tutorial
