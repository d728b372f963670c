// Fault injection on loopback: the test starts the processes of a two-task job
// (tests/fault_tolerance/fault_worker.cc: a chief and a worker under
// MultiWorkerMirroredStrategy) itself, then stops or disturbs one of them, and
// checks that the others fail in bounded time naming the culprit, or that the
// job completes. Every wait is bounded; every process is killed at the end.
// Each case prints the time it measured ("detected in ...").
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/file.h"
#include "strata/cluster/socket.h"
#include "strata/cluster/tcp_store.h"

extern char** environ;

namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// One process of the job, its output in a file; killed (SIGKILL) when destroyed.
class Task {
 public:
  // `token` is the task's STRATA_CLUSTER_TOKEN (none when empty); `host_id`
  // its STRATA_HOST_ID (the host it pretends to run on; none when empty).
  Task(const std::vector<std::string>& args, const std::string& tf_config, std::string out_path,
       const std::string& token = "", const std::string& host_id = "")
      : out_path_(std::move(out_path)) {
    std::vector<std::string> env_strings{"TF_CONFIG=" + tf_config, "STRATA_CPU_DEVICES=1"};
    if (!token.empty()) env_strings.push_back("STRATA_CLUSTER_TOKEN=" + token);
    if (!host_id.empty()) env_strings.push_back("STRATA_HOST_ID=" + host_id);
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      if (entry.rfind("TF_CONFIG=", 0) != 0 && entry.rfind("STRATA_CPU_DEVICES=", 0) != 0 &&
          entry.rfind("STRATA_CLUSTER_TOKEN=", 0) != 0 && entry.rfind("STRATA_HOST_ID=", 0) != 0)
        env_strings.push_back(entry);
    }
    std::vector<char*> envp, argv;
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> all{FAULT_WORKER_PATH};
    all.insert(all.end(), args.begin(), args.end());
    for (std::string& s : all) argv.push_back(s.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    EXPECT_EQ(::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Task() {
    if (!status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;

  pid_t pid() const { return pid_; }
  std::string output() const {
    std::ifstream in(out_path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  // Polls (every 10 ms) until the output holds `text` or `limit` passed.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds limit) const {
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      if (output().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  // The exit status once the process ended within `limit` (polled every 10 ms).
  std::optional<int> wait_exit(std::chrono::milliseconds limit) {
    const auto until = Clock::now() + limit;
    while (!status_ && Clock::now() < until) {
      int raw = 0;
      if (::waitpid(pid_, &raw, WNOHANG) == pid_) {
        status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
      } else {
        std::this_thread::sleep_for(10ms);
      }
    }
    return status_;
  }

 private:
  std::string out_path_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// TF_CONFIG of task `type`:0 in a job of one chief and one worker at `ports`.
std::string tf_config(const std::vector<int>& ports, const std::string& type) {
  return "{\"cluster\": {\"chief\": [\"127.0.0.1:" + std::to_string(ports[0]) +
         "\"], \"worker\": [\"127.0.0.1:" + std::to_string(ports[1]) +
         "\"]}, \"task\": {\"type\": \"" + type + "\", \"index\": 0}}";
}

// A TCP connection to 127.0.0.1:`port`, retried until `limit` (the server may
// not listen yet); an invalid descriptor if it never succeeded.
strata::UniqueFd connect_within(int port, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    strata::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
    std::this_thread::sleep_for(10ms);
  }
  return strata::UniqueFd();
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The two ways collectives cross between the two tasks on loopback: shared
// memory (the default for workers on one host) and Gloo over TCP
// (CommunicationOptions.shared_memory OFF). The failure tests run over both.
struct Transport {
  std::string name;                // MultiWorkerMirroredStrategy::cross_worker_transport()
  std::vector<std::string> flags;  // fault_worker's flags selecting it
};
const std::vector<Transport> kTransports = {{"shared_memory", {}},
                                            {"gloo", {"--shared-memory", "0"}}};

std::vector<std::string> with(std::vector<std::string> args, const Transport& t) {
  args.insert(args.end(), t.flags.begin(), t.flags.end());
  return args;
}

void stopped_chief_case(const Transport& transport) {
  // The chief serves the store: a worker that times out must not wait on it
  // for its report (the store client's own 300 s default) on top of the
  // collective timeout.
  constexpr auto kTimeout = 2s;
  const strata::TempDir dir("fault_injection");
  const std::vector<int> ports = strata::cluster::pick_free_ports(2);
  const std::vector<std::string> args = with({"--timeout", "2", "--steps", "100000"}, transport);
  Task chief(args, tf_config(ports, "chief"), dir.file("chief.out"));
  Task worker(args, tf_config(ports, "worker"), dir.file("worker.out"));
  ASSERT_TRUE(chief.wait_for_output("ready (" + transport.name + ")", 30s)) << chief.output();
  ASSERT_TRUE(worker.wait_for_output("ready (" + transport.name + ")", 30s)) << worker.output();
  ASSERT_EQ(::kill(chief.pid(), SIGSTOP), 0);
  const auto stopped = Clock::now();
  // The collective timeout, then at most one report to the stopped store
  // (GlooFailureReports::store_timeout: 1 s here), plus scheduling slack.
  const std::optional<int> status = worker.wait_exit(kTimeout + 1s + 3s);
  const double detected = seconds_since(stopped);
  ASSERT_TRUE(status.has_value()) << "the worker still runs " << detected
                                  << " s after the chief stopped:\n"
                                  << worker.output();
  std::printf("a stopped chief: detected in %.2f s (collective timeout 2 s)\n", detected);
  EXPECT_EQ(*status, 1) << worker.output();
  EXPECT_THAT(worker.output(), HasSubstr("error (DEADLINE_EXCEEDED)"));
  EXPECT_THAT(worker.output(), HasSubstr("rank 0 (/job:chief/task:0)"));
  EXPECT_THAT(worker.output(), HasSubstr("2000ms"));
}

// A worker stopped (SIGSTOP) mid-training: the chief's timeout names it, the
// collective it never entered (or never finished), and what it was last heard
// doing (its progress, published every half second: its last completed
// collective and its step phase).
void stopped_worker_case(const Transport& transport) {
  constexpr auto kTimeout = 2s;
  const strata::TempDir dir("fault_injection");
  const std::vector<int> ports = strata::cluster::pick_free_ports(2);
  const std::vector<std::string> args =
      with({"--timeout", "2", "--steps", "100000", "--profile", "1"}, transport);
  Task chief(args, tf_config(ports, "chief"), dir.file("chief.out"));
  Task worker(args, tf_config(ports, "worker"), dir.file("worker.out"));
  ASSERT_TRUE(chief.wait_for_output("ready (" + transport.name + ")", 30s)) << chief.output();
  ASSERT_TRUE(worker.wait_for_output("ready (" + transport.name + ")", 30s)) << worker.output();
  std::this_thread::sleep_for(2500ms);  // several progress reports after some steps
  ASSERT_EQ(::kill(worker.pid(), SIGSTOP), 0);
  const std::optional<int> status = chief.wait_exit(kTimeout + 2s + 3s);
  ::kill(worker.pid(), SIGCONT);
  ASSERT_TRUE(status.has_value()) << chief.output();
  EXPECT_EQ(*status, 1) << chief.output();
  const std::string out = chief.output();
  EXPECT_THAT(out, HasSubstr("error (DEADLINE_EXCEEDED)"));
  // Stopped between collectives, or inside one after its header went out.
  EXPECT_THAT(out,
              ::testing::ContainsRegex(
                  "rank 1 \\(/job:worker/task:0\\) never (entered|finished) it within 2000ms"));
  EXPECT_THAT(out, HasSubstr("rank 1 (/job:worker/task:0) was last heard from "));
  EXPECT_THAT(
      out, ::testing::ContainsRegex("s before: completed collective #[0-9]+ (all_reduce|barrier)"));
  EXPECT_THAT(out, ::testing::ContainsRegex("step [0-9]+, phase (input|collective_wait|"
                                            "collective_transfer)"));
  std::printf("%s", out.c_str());  // the example in docs/reliability.md
}

TEST(FaultInjection, AStoppedChiefFailsTheWorkerWithinTheTimeoutNamingTheChief) {
  for (const Transport& transport : kTransports) {
    SCOPED_TRACE(transport.name);
    std::printf("over %s: ", transport.name.c_str());
    stopped_chief_case(transport);
  }
}

TEST(FaultInjection, AStoppedWorkerIsNamedWithWhatItWasLastDoing) {
  for (const Transport& transport : kTransports) {
    SCOPED_TRACE(transport.name);
    std::printf("over %s:\n", transport.name.c_str());
    stopped_worker_case(transport);
  }
}

TEST(FaultInjection, StrayConnectionsToTheStorePortDoNotStopTheJob) {
  const strata::TempDir dir("fault_injection");
  const std::vector<int> ports = strata::cluster::pick_free_ports(2);
  const std::vector<std::string> args{"--timeout", "20", "--steps", "20"};
  Task chief(args, tf_config(ports, "chief"), dir.file("chief.out"));
  // Before the worker connects: one idle connection and one that sends a
  // frame of garbage announcing a huge payload.
  strata::UniqueFd idle = connect_within(ports[0], 20s);
  ASSERT_TRUE(idle.valid()) << chief.output();
  strata::UniqueFd noisy = connect_within(ports[0], 20s);
  ASSERT_TRUE(noisy.valid());
  const char garbage[] = "\xff\xff\xff\x3fGET / HTTP/1.0\r\n\r\n";
  ASSERT_GT(::send(noisy.get(), garbage, sizeof(garbage) - 1, MSG_NOSIGNAL), 0);
  const auto start = Clock::now();
  Task worker(args, tf_config(ports, "worker"), dir.file("worker.out"));
  const std::optional<int> worker_status = worker.wait_exit(60s);
  const std::optional<int> chief_status = chief.wait_exit(10s);
  std::printf("stray connections to the store: the job finished in %.2f s\n", seconds_since(start));
  ASSERT_TRUE(worker_status.has_value()) << worker.output();
  ASSERT_TRUE(chief_status.has_value()) << chief.output();
  EXPECT_EQ(*worker_status, 0) << worker.output();
  EXPECT_EQ(*chief_status, 0) << chief.output();
  EXPECT_THAT(worker.output(), HasSubstr("done"));
}

// A store frame: u32 length (little-endian), then `payload`.
std::string frame(const std::string& payload) {
  std::string out;
  const auto n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + payload;
}

// A store string field: u32 length, then the bytes.
std::string field(const std::string& s) { return frame(s); }

// The store's HELLO offering `token`, and a SET of `key` to `value`.
std::string hello(const std::string& token) {
  return frame(std::string("\x06", 1) + field("strata-store/2") + field(token));
}
std::string set_request(const std::string& key, const std::string& value) {
  return frame(std::string("\x01", 1) + field(key) + field(value));
}

// Sends what it can of `bytes` within `limit` (non-blocking; stops at an
// error, such as the peer closing); returns how much went out.
size_t send_within(int fd, const std::string& bytes, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  size_t sent = 0;
  while (sent < bytes.size() && Clock::now() < until) {
    const ssize_t n =
        ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      std::this_thread::sleep_for(1ms);
    } else {
      break;
    }
  }
  return sent;
}

// A field of /proc/<pid>/status in kB ("VmHWM", "VmRSS"); -1 if unreadable.
long status_kb(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) == 0) return std::stol(line.substr(name.size() + 1));
  }
  return -1;
}

// Runs the two-task job with `token` and checks that it finishes, both tasks
// exiting 0 with every all-reduce summed right ("done"); `disturb` runs after
// the chief started and before the worker starts.
template <typename Disturb>
void expect_the_job_finishes(const std::string& name, const std::string& token, Disturb disturb) {
  const strata::TempDir dir("fault_injection");
  const std::vector<int> ports = strata::cluster::pick_free_ports(2);
  const std::vector<std::string> args{"--timeout", "20", "--steps", "20"};
  Task chief(args, tf_config(ports, "chief"), dir.file("chief.out"), token);
  disturb(chief, ports[0]);
  const auto start = Clock::now();
  Task worker(args, tf_config(ports, "worker"), dir.file("worker.out"), token);
  const std::optional<int> worker_status = worker.wait_exit(60s);
  const std::optional<int> chief_status = chief.wait_exit(10s);
  std::printf("%s: the job finished in %.2f s\n", name.c_str(), seconds_since(start));
  ASSERT_TRUE(worker_status.has_value()) << worker.output();
  ASSERT_TRUE(chief_status.has_value()) << chief.output();
  EXPECT_EQ(*worker_status, 0) << worker.output();
  EXPECT_EQ(*chief_status, 0) << chief.output();
  EXPECT_THAT(worker.output(), HasSubstr("done"));
  EXPECT_THAT(chief.output(), HasSubstr("done"));
}

constexpr const char* kToken = "f00dfeed0123456789abcdef";

TEST(FaultInjection, UnauthenticatedWritesToTheStoreDoNotDisturbTheJob) {
  // Writes that would poison the rendezvous if they were taken: the worker's
  // report of a failed Gloo attempt and its replica count, sent with no
  // HELLO, with the old token-less HELLO and with a wrong token.
  expect_the_job_finishes("unauthenticated SETs", kToken, [](Task& chief, int port) {
    const std::string poison = set_request("strata/mwms/rendezvous/0/1", "poisoned") +
                               set_request("strata/mwms/local_replicas/1", "7");
    for (const std::string& opening :
         {std::string(), frame(std::string("\x06", 1) + field("strata-store/1")),
          hello("not-the-token"), hello("")}) {
      strata::UniqueFd attacker = connect_within(port, 20s);
      ASSERT_TRUE(attacker.valid()) << chief.output();
      send_within(attacker.get(), opening + poison, 1s);
    }
  });
}

TEST(FaultInjection, AGiantFrameToTheStoreCostsTheChiefNoMemory) {
  // Peers announce a 1 GiB frame and stream 128 MiB of it: one with no
  // HELLO, one with the token-less HELLO of old, one with a wrong token, and
  // one with the job's token (past the 64 MiB frame limit). Each is dropped
  // at the header, and the chief's peak memory does not grow by what they sent.
  long grew_kb = 0;
  size_t sent = 0;
  expect_the_job_finishes("giant frames", kToken, [&](Task& chief, int port) {
    // Once the store listens (the chief started it), its peak memory so far.
    ASSERT_TRUE(connect_within(port, 20s).valid()) << chief.output();
    const long before = status_kb(chief.pid(), "VmHWM");
    for (const std::string& opening :
         {std::string(), frame(std::string("\x06", 1) + field("strata-store/1")),
          hello("not-the-token"), hello(kToken)}) {
      strata::UniqueFd attacker = connect_within(port, 5s);
      ASSERT_TRUE(attacker.valid());
      std::string bytes = opening;
      bytes.append("\x00\x00\x00\x40", 4);  // a 1 GiB payload announced
      bytes.resize(bytes.size() + (128u << 20), 'x');
      sent += send_within(attacker.get(), bytes, 5s);
    }
    grew_kb = status_kb(chief.pid(), "VmHWM") - before;
  });
  std::printf("giant frames: %zu bytes sent, the chief's peak memory grew by %ld kB\n", sent,
              grew_kb);
  EXPECT_LT(grew_kb, 16 * 1024);
}

TEST(FaultInjection, AWorkerWithAnotherTokenIsRefusedNamingTheToken) {
  const strata::TempDir dir("fault_injection");
  const std::vector<int> ports = strata::cluster::pick_free_ports(2);
  const std::vector<std::string> args{"--timeout", "3", "--steps", "20"};
  Task chief(args, tf_config(ports, "chief"), dir.file("chief.out"), kToken);
  const auto start = Clock::now();
  Task worker(args, tf_config(ports, "worker"), dir.file("worker.out"), "another-token");
  const std::optional<int> worker_status = worker.wait_exit(20s);
  const double detected = seconds_since(start);
  ASSERT_TRUE(worker_status.has_value()) << worker.output();
  std::printf("a worker with another token: refused in %.2f s\n", detected);
  EXPECT_EQ(*worker_status, 1);
  EXPECT_THAT(worker.output(), HasSubstr("error (UNAUTHENTICATED)"));
  EXPECT_THAT(worker.output(), HasSubstr("STRATA_CLUSTER_TOKEN"));
  EXPECT_THAT(worker.output(), ::testing::Not(HasSubstr(kToken)));
  // The chief never met the worker: it fails by its start-up deadline.
  const std::optional<int> chief_status = chief.wait_exit(20s);
  ASSERT_TRUE(chief_status.has_value()) << chief.output();
  EXPECT_EQ(*chief_status, 1) << chief.output();
}

TEST(FaultInjection, WorkersWhoseClustersDifferFailTogetherNamingTheDifference) {
  // The worker's TF_CONFIG lists a second worker the chief's does not have.
  const strata::TempDir dir("fault_injection");
  const std::vector<int> ports = strata::cluster::pick_free_ports(3);
  const std::vector<std::string> args{"--timeout", "30", "--steps", "20"};
  const std::string bigger = "{\"cluster\": {\"chief\": [\"127.0.0.1:" + std::to_string(ports[0]) +
                             "\"], \"worker\": [\"127.0.0.1:" + std::to_string(ports[1]) +
                             "\", \"127.0.0.1:" + std::to_string(ports[2]) +
                             "\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}";
  const auto start = Clock::now();
  Task chief(args, tf_config(ports, "chief"), dir.file("chief.out"));
  Task worker(args, bigger, dir.file("worker.out"));
  const std::optional<int> worker_status = worker.wait_exit(20s);
  const std::optional<int> chief_status = chief.wait_exit(20s);
  const double detected = seconds_since(start);
  ASSERT_TRUE(worker_status.has_value()) << worker.output();
  ASSERT_TRUE(chief_status.has_value()) << chief.output();
  std::printf("clusters that differ: both failed in %.2f s (start-up deadline 30 s)\n", detected);
  EXPECT_LT(detected, 15);
  EXPECT_EQ(*worker_status, 1) << worker.output();
  EXPECT_EQ(*chief_status, 1) << chief.output();
  for (const Task* t : {&chief, &worker}) {
    EXPECT_THAT(t->output(), HasSubstr("error (INVALID_ARGUMENT)"));
    EXPECT_THAT(t->output(), HasSubstr("job 'worker' has 1 tasks in the chief's TF_CONFIG and 2 in "
                                       "/job:worker/task:0's"));
  }
}

// The TCP ports `pid` listens on (its sockets in /proc/<pid>/fd matched with
// the LISTEN entries of /proc/net/tcp and tcp6).
std::set<int> listening_ports(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code link_ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), link_ec).string();
    if (!link_ec && target.rfind("socket:[", 0) == 0)
      inodes.insert(target.substr(8, target.size() - 9));
  }
  std::set<int> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retrans, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retrans >> uid >> timeout >>
          inode;
      if (state != "0A" || !inodes.contains(inode)) continue;  // 0A: LISTEN
      ports.insert(std::stoi(local.substr(local.rfind(':') + 1), nullptr, 16));
    }
  }
  return ports;
}

// Gloo listens on one port per pair while the mesh forms and takes the first
// connection that arrives as the peer, without a handshake. The tasks are
// paused (SIGSTOP) and resumed so that, whichever of them listens for the
// pair, a stray is first in its queue and the real peer second: the listener
// takes the stray, and the peer's connection is reset once the listener
// closes. The job must still finish: the tasks notice and form the mesh again
// on fresh ports. `garbage`: each stray sends 96 bytes of 0xff once
// connected, else it stays idle. The pause can miss the moment a pair
// listens (the mesh formed already): then the trial is repeated, up to eight
// times.
void run_with_gloo_strays(bool garbage) {
  size_t placed = 0;
  for (int trial = 0; trial < 8 && placed == 0; ++trial) {
    const strata::TempDir dir("fault_injection");
    const std::vector<int> ports = strata::cluster::pick_free_ports(2);
    // The Gloo mesh only forms over TCP.
    const std::vector<std::string> args{"--timeout", "20", "--steps", "20", "--shared-memory", "0"};
    const auto start = Clock::now();
    Task chief(args, tf_config(ports, "chief"), dir.file("chief.out"), kToken);
    Task worker(args, tf_config(ports, "worker"), dir.file("worker.out"), kToken);
    std::vector<strata::UniqueFd> strays;
    // Connects a stray to every port `task` listens on but the store's.
    auto stray_into = [&](const Task& task) {
      for (int port : listening_ports(task.pid())) {
        if (port == ports[0]) continue;
        strata::UniqueFd fd = connect_within(port, 100ms);
        if (!fd.valid()) continue;
        if (garbage) {
          const std::string bytes(96, '\xff');
          ::send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
        }
        strays.push_back(std::move(fd));
      }
    };
    {
      strata::cluster::TcpStoreClient spy(
          "127.0.0.1:" + std::to_string(ports[0]),
          {.connect_timeout = 20s, .timeout = 30s, .token = std::string(kToken)});
      // The worker is held once it told the store its host (the last thing it
      // publishes before the mesh): the chief goes on into the mesh, listens
      // for its pair and waits for the worker.
      spy.wait({"strata/mwms/host/1"}, 20s);
      ASSERT_EQ(::kill(worker.pid(), SIGSTOP), 0);
      // Polls until `task` listens on a port besides the store's, or 5 s
      // (the side of a pair that connects never listens).
      auto wait_listening = [&](const Task& task) {
        const auto until = Clock::now() + 5s;
        for (;;) {
          for (int port : listening_ports(task.pid())) {
            if (port != ports[0]) return;
          }
          if (Clock::now() >= until) return;
          std::this_thread::sleep_for(1ms);
        }
      };
      wait_listening(chief);
      // The chief held, a stray into its queue, then the worker runs: 300 ms
      // to connect to the chief behind the stray when the chief listened for
      // their pair, else until the worker listens for it itself (or 5 s).
      ASSERT_EQ(::kill(chief.pid(), SIGSTOP), 0);
      stray_into(chief);
      ASSERT_EQ(::kill(worker.pid(), SIGCONT), 0);
      if (strays.empty()) {
        wait_listening(worker);
      } else {
        std::this_thread::sleep_for(300ms);
      }
      // The same the other way round, for the case where the worker listens.
      ASSERT_EQ(::kill(worker.pid(), SIGSTOP), 0);
      stray_into(worker);
      ASSERT_EQ(::kill(chief.pid(), SIGCONT), 0);
      std::this_thread::sleep_for(300ms);
      ASSERT_EQ(::kill(worker.pid(), SIGCONT), 0);
    }
    placed = strays.size();
    const std::optional<int> worker_status = worker.wait_exit(60s);
    const std::optional<int> chief_status = chief.wait_exit(10s);
    std::printf("%s strays on the Gloo ports (trial %d): %zu strays, the job finished in %.2f s\n",
                garbage ? "noisy" : "idle", trial, placed, seconds_since(start));
    ASSERT_TRUE(worker_status.has_value()) << worker.output();
    ASSERT_TRUE(chief_status.has_value()) << chief.output();
    EXPECT_EQ(*worker_status, 0) << worker.output();
    EXPECT_EQ(*chief_status, 0) << chief.output();
    EXPECT_THAT(worker.output(), HasSubstr("done"));
    EXPECT_THAT(chief.output(), HasSubstr("done"));
  }
  EXPECT_GT(placed, 0u) << "no trial placed a stray while a Gloo pair listened";
}

TEST(FaultInjection, StrayConnectionsToTheGlooPortsDoNotStopTheJob) {
  run_with_gloo_strays(/*garbage=*/false);
  run_with_gloo_strays(/*garbage=*/true);
}

// True when a TCP connection to `host`:`port` is accepted within 2 s.
bool accepts(const std::string& host, int port) {
  strata::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::inet_pton(AF_INET, host.c_str(), &addr.sin_addr), 1) << host;
  return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

TEST(FaultInjection, TheStoreListensOnlyAtTheChiefsTFConfigAddress) {
  // The chief's TF_CONFIG names 127.0.0.2 (an address of the loopback
  // interface): the store answers there and not at 127.0.0.1, the same port
  // on another address of this host; STRATA_BIND_ALL_INTERFACES=1 widens it.
  for (const bool all : {false, true}) {
    const strata::TempDir dir("fault_injection");
    const std::vector<int> ports = strata::cluster::pick_free_ports(2);
    const std::vector<std::string> args{"--timeout", "20", "--steps", "100000"};
    const std::string config =
        "{\"cluster\": {\"chief\": [\"127.0.0.2:" + std::to_string(ports[0]) +
        "\"], \"worker\": [\"127.0.0.1:" + std::to_string(ports[1]) +
        "\"]}, \"task\": {\"type\": \"chief\", " + "\"index\": 0}}";
    if (all) ::setenv("STRATA_BIND_ALL_INTERFACES", "1", 1);
    Task chief(args, config, dir.file("chief.out"));
    ::unsetenv("STRATA_BIND_ALL_INTERFACES");
    bool listening = false;
    for (const auto until = Clock::now() + 20s; !listening && Clock::now() < until;) {
      listening = accepts("127.0.0.2", ports[0]);
      if (!listening) std::this_thread::sleep_for(10ms);
    }
    ASSERT_TRUE(listening) << chief.output();
    EXPECT_EQ(accepts("127.0.0.1", ports[0]), all) << (all ? "every interface" : "one address");
  }
}

// The shared-memory segments /dev/shm holds that process `pid` created
// (ShmCollectives names them /strata-shm-<pid>-<random>).
std::vector<std::string> segments_of(pid_t pid) {
  std::vector<std::string> out;
  const std::string prefix = "strata-shm-" + std::to_string(pid) + "-";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  return out;
}

// Over shared memory a SIGKILLed worker is found by its pid: the chief fails
// at once (well within the collective timeout) naming the task, and no
// segment is left in /dev/shm (none is there while the job runs either: it
// leaves /dev/shm once both processes mapped it).
TEST(FaultInjection, AKilledWorkerOnSharedMemoryIsNamedAndLeavesNoSegment) {
  const strata::TempDir dir("fault_injection");
  const std::vector<int> ports = strata::cluster::pick_free_ports(2);
  const std::vector<std::string> args{"--timeout", "10", "--steps", "100000", "--profile", "1"};
  Task chief(args, tf_config(ports, "chief"), dir.file("chief.out"));
  Task worker(args, tf_config(ports, "worker"), dir.file("worker.out"));
  ASSERT_TRUE(chief.wait_for_output("ready (shared_memory)", 30s)) << chief.output();
  ASSERT_TRUE(worker.wait_for_output("ready (shared_memory)", 30s)) << worker.output();
  // The segment's name goes once every rank has mapped it.
  const auto unlinked_by = Clock::now() + 10s;
  while (!segments_of(chief.pid()).empty() && Clock::now() < unlinked_by) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_THAT(segments_of(chief.pid()), ::testing::IsEmpty());
  ASSERT_EQ(::kill(worker.pid(), SIGKILL), 0);
  const auto killed = Clock::now();
  const std::optional<int> status = chief.wait_exit(10s + 3s);
  const double detected = seconds_since(killed);
  ASSERT_TRUE(status.has_value()) << chief.output();
  std::printf("a killed worker over shared memory: detected in %.2f s (collective timeout 10 s)\n",
              detected);
  EXPECT_LT(detected, 5.0);
  EXPECT_EQ(*status, 1) << chief.output();
  const std::string out = chief.output();
  EXPECT_THAT(out, HasSubstr("error (UNAVAILABLE)"));
  EXPECT_THAT(out, ::testing::ContainsRegex("rank 1 \\(/job:worker/task:0, pid [0-9]+\\) exited "
                                            "before it (entered|finished) it"));
  EXPECT_THAT(segments_of(chief.pid()), ::testing::IsEmpty());
  EXPECT_THAT(segments_of(worker.pid()), ::testing::IsEmpty());
}

// Training steps whose gradients are all-reduced in buckets during the
// backward pass (fault_worker --train 1, the default CommunicationOptions):
// the worker is stopped (SIGSTOP) or killed (SIGKILL, over shared memory)
// while the chief keeps stepping. The chief's replica, waiting for its
// communication thread's reduction, fails with the group's own error naming
// the worker, within the collective timeout, as without the overlap.
void overlapped_reduction_case(const Transport& transport, bool kill_it) {
  const strata::TempDir dir("fault_injection");
  const std::vector<int> ports = strata::cluster::pick_free_ports(2);
  const std::vector<std::string> args =
      with({"--timeout", "2", "--steps", "100000", "--train", "1"}, transport);
  Task chief(args, tf_config(ports, "chief"), dir.file("chief.out"));
  Task worker(args, tf_config(ports, "worker"), dir.file("worker.out"));
  // The first step's sums came from the buckets (two: 256 KiB of the second
  // kernel's gradient, then the first kernel's 32 KiB).
  ASSERT_TRUE(chief.wait_for_output("overlapped (2)", 30s)) << chief.output();
  ASSERT_TRUE(worker.wait_for_output("overlapped (2)", 30s)) << worker.output();
  ASSERT_EQ(::kill(worker.pid(), kill_it ? SIGKILL : SIGSTOP), 0);
  const auto failed = Clock::now();
  const std::optional<int> status = chief.wait_exit(2s + 2s + 3s);
  const double detected = seconds_since(failed);
  if (!kill_it) ::kill(worker.pid(), SIGCONT);
  ASSERT_TRUE(status.has_value()) << chief.output();
  std::printf(
      "a %s worker during overlapped reductions over %s: detected in %.2f s "
      "(collective timeout 2 s)\n",
      kill_it ? "killed" : "stopped", transport.name.c_str(), detected);
  EXPECT_EQ(*status, 1) << chief.output();
  const std::string out = chief.output();
  if (kill_it) {
    EXPECT_THAT(out, HasSubstr("error (UNAVAILABLE)"));
    EXPECT_THAT(out, ::testing::ContainsRegex("rank 1 \\(/job:worker/task:0, pid [0-9]+\\) exited "
                                              "before it (entered|finished) it"));
  } else {
    EXPECT_THAT(out, HasSubstr("error (DEADLINE_EXCEEDED)"));
    EXPECT_THAT(out,
                ::testing::ContainsRegex(
                    "rank 1 \\(/job:worker/task:0\\) never (entered|finished) it within 2000ms"));
  }
}

TEST(FaultInjection, AWorkerStoppedDuringOverlappedGradientReductionsIsNamedWithinTheTimeout) {
  for (const Transport& transport : kTransports) {
    SCOPED_TRACE(transport.name);
    overlapped_reduction_case(transport, /*kill_it=*/false);
  }
}

TEST(FaultInjection, AWorkerKilledDuringOverlappedGradientReductionsIsNamed) {
  overlapped_reduction_case(kTransports.front(), /*kill_it=*/true);
}

// TF_CONFIG of task `type`:`index` in a job of one chief and two workers at `ports`.
std::string tf_config3(const std::vector<int>& ports, const std::string& type, int index) {
  return "{\"cluster\": {\"chief\": [\"127.0.0.1:" + std::to_string(ports[0]) +
         "\"], \"worker\": [\"127.0.0.1:" + std::to_string(ports[1]) +
         "\", \"127.0.0.1:" + std::to_string(ports[2]) + "\"]}, \"task\": {\"type\": \"" + type +
         "\", \"index\": " + std::to_string(index) + "}}";
}

// Three tasks on two (pretended) hosts: the chief and worker 1 on host A,
// worker 0 on host B. Collectives use shared memory within host A and Gloo
// between the chief and worker 0 (the hosts' leaders); every sum is checked.
// Then worker 1 is killed: the chief names it (it shares its memory), worker
// 0 on the other host fails too, within the timeout, naming the chief (the
// leader of the host where the failure happened).
TEST(FaultInjection, WorkersOnTwoHostsUseSharedMemoryWithinAHostAndGlooAcross) {
  const strata::TempDir dir("fault_injection");
  {
    const std::vector<int> ports = strata::cluster::pick_free_ports(3);
    const std::vector<std::string> args{"--timeout", "20", "--steps", "20"};
    Task chief(args, tf_config3(ports, "chief", 0), dir.file("chief.out"), "", "host-a");
    Task worker0(args, tf_config3(ports, "worker", 0), dir.file("worker0.out"), "", "host-b");
    Task worker1(args, tf_config3(ports, "worker", 1), dir.file("worker1.out"), "", "host-a");
    for (Task* t : {&chief, &worker0, &worker1}) {
      const std::optional<int> status = t->wait_exit(60s);
      ASSERT_TRUE(status.has_value()) << t->output();
      EXPECT_EQ(*status, 0) << t->output();
      EXPECT_THAT(t->output(), HasSubstr("ready (shared_memory+gloo)"));
      EXPECT_THAT(t->output(), HasSubstr("done"));
    }
  }
  const std::vector<int> ports = strata::cluster::pick_free_ports(3);
  const std::vector<std::string> args{"--timeout", "5", "--steps", "100000"};
  Task chief(args, tf_config3(ports, "chief", 0), dir.file("chief2.out"), "", "host-a");
  Task worker0(args, tf_config3(ports, "worker", 0), dir.file("worker02.out"), "", "host-b");
  Task worker1(args, tf_config3(ports, "worker", 1), dir.file("worker12.out"), "", "host-a");
  for (Task* t : {&chief, &worker0, &worker1}) {
    ASSERT_TRUE(t->wait_for_output("ready (shared_memory+gloo)", 30s)) << t->output();
  }
  std::this_thread::sleep_for(500ms);
  ASSERT_EQ(::kill(worker1.pid(), SIGKILL), 0);
  const auto killed = Clock::now();
  const std::optional<int> chief_status = chief.wait_exit(5s + 3s);
  const std::optional<int> worker0_status = worker0.wait_exit(5s + 8s);
  std::printf("a killed worker on a host of two: the job failed in %.2f s\n",
              seconds_since(killed));
  ASSERT_TRUE(chief_status.has_value()) << chief.output();
  ASSERT_TRUE(worker0_status.has_value()) << worker0.output();
  EXPECT_EQ(*chief_status, 1);
  EXPECT_EQ(*worker0_status, 1);
  EXPECT_THAT(chief.output(), HasSubstr("error (UNAVAILABLE)"));
  EXPECT_THAT(chief.output(), HasSubstr("(/job:worker/task:1, pid "));
  EXPECT_THAT(worker0.output(), HasSubstr("error ("));
  EXPECT_THAT(worker0.output(), HasSubstr("/job:chief/task:0"));
  std::printf("the chief: %sworker 0: %s", chief.output().c_str(), worker0.output().c_str());
}

}  // namespace
