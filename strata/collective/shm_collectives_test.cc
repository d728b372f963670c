// ShmCollectives: the ranks of one host over a shared-memory segment. Ranks run
// as threads (each with its own object, as processes would) and, for the tests
// that need it, as forked processes. The TensorFlow counterpart is
// tf.distribute.MultiWorkerMirroredStrategy's collective ops
// (tf.raw_ops.CollectiveReduceV2 / CollectiveGatherV2 / CollectiveBcastSendV2)
// between workers of one host; the values below are computed independently in
// the tests.
#include "strata/collective/shm_collectives.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <memory>
#include <thread>

#include "strata/base/file.h"
#include "strata/testing/run_ranks.h"

namespace strata::collective {
namespace {

using testing::caught;
using ::testing::HasSubstr;
using testing::run_ranks;
using testing::run_ranks_ok;
using namespace std::chrono_literals;

// n objects of one group, constructed concurrently (the rendezvous is collective).
std::vector<std::unique_ptr<ShmCollectives>> make_group(int n, ShmOptions options = {}) {
  auto store = std::make_shared<InMemoryStore>();
  std::vector<std::unique_ptr<ShmCollectives>> group(n);
  run_ranks_ok(n,
               [&](int r) { group[r] = std::make_unique<ShmCollectives>(r, n, store, options); });
  return group;
}

bool segment_exists(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

// Rank r's element i: small integers, exact in every dtype.
template <typename T>
T value(int r, int64_t i) {
  return static_cast<T>((r + 1) * (i % 13) - 3 * r);
}

template <typename T>
Tensor input(int r, const TensorShape& shape) {
  std::vector<T> v(shape.num_elements());
  for (size_t i = 0; i < v.size(); ++i) v[i] = value<T>(r, i);
  return constant(v, shape);
}

// The reduction of element i over n ranks, computed directly.
template <typename T>
T reference(ReduceOp op, int n, int64_t i) {
  T acc = value<T>(0, i);
  for (int r = 1; r < n; ++r) {
    const T x = value<T>(r, i);
    if (op == ReduceOp::MAX)
      acc = std::max(acc, x);
    else if (op == ReduceOp::MIN)
      acc = std::min(acc, x);
    else
      acc += x;
  }
  if (op == ReduceOp::MEAN) acc = acc / static_cast<T>(n);  // integers truncate, as TF's Div
  return acc;
}

template <typename T>
void expect_reduced(const Tensor& got, ReduceOp op, int n, const TensorShape& shape) {
  ASSERT_EQ(got.shape(), shape);
  const std::vector<T> v = got.to_vector<T>();
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      ASSERT_NEAR(v[i], reference<T>(op, n, i), 1e-6) << "element " << i;
    } else {
      ASSERT_EQ(v[i], reference<T>(op, n, i)) << "element " << i;
    }
  }
}

// tf.distribute: strategy.reduce / CollectiveReduceV2 over the workers of a host.
TEST(ShmCollectives, AllReduceOfListsMatchesTheReferenceForEveryOpDtypeAndGroupSize) {
  const std::vector<TensorShape> shapes = {{7}, {3, 5}, {}, {0}, {3001}};
  for (int n : {2, 3, 4}) {
    // A 4 KiB slot makes the 12 KiB tensor move in rounds; one_pass_bytes 0
    // takes every call through the reduce-scatter path, the default through both.
    for (size_t one_pass : {size_t{0}, size_t{64} << 10}) {
      auto group = make_group(n, {.timeout = 30s, .slot_bytes = 4096, .one_pass_bytes = one_pass});
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MEAN, ReduceOp::MAX, ReduceOp::MIN}) {
        SCOPED_TRACE(::testing::Message() << n << " ranks, " << op << ", one pass <= " << one_pass);
        std::vector<std::vector<Tensor>> out(n);
        run_ranks_ok(n, [&](int r) {
          std::vector<Tensor> list = {input<float>(r, shapes[0]),  input<int64_t>(r, shapes[1]),
                                      input<double>(r, shapes[2]), input<int32_t>(r, shapes[3]),
                                      input<float>(r, shapes[4]),  input<int32_t>(r, shapes[4])};
          out[r] = group[r]->all_reduce(r, list, op);
        });
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(out[r].size(), 6u);
          expect_reduced<float>(out[r][0], op, n, shapes[0]);
          expect_reduced<int64_t>(out[r][1], op, n, shapes[1]);
          expect_reduced<double>(out[r][2], op, n, shapes[2]);
          expect_reduced<int32_t>(out[r][3], op, n, shapes[3]);
          expect_reduced<float>(out[r][4], op, n, shapes[4]);
          expect_reduced<int32_t>(out[r][5], op, n, shapes[4]);
          // The same bits on every rank.
          EXPECT_EQ(out[r][4].to_vector<float>(), out[0][4].to_vector<float>());
        }
      }
    }
  }
}

TEST(ShmCollectives, FloatMeanMatchesHandComputedValues) {
  auto group = make_group(2);
  const std::vector<std::vector<float>> in = {{1, 2, 3}, {4, 5, 7}};
  std::vector<std::vector<float>> mean(2);
  run_ranks_ok(2, [&](int r) {
    mean[r] = group[r]->all_reduce(r, constant(in[r]), ReduceOp::MEAN).to_vector<float>();
  });
  EXPECT_EQ(mean[0], (std::vector<float>{2.5, 3.5, 5}));
  EXPECT_EQ(mean[1], mean[0]);
}

// Floats whose sum depends on the order of the additions: magnitudes from
// 1e-3 to 1e3 and both signs.
float order_sensitive(int r, int64_t i) {
  const uint32_t h = static_cast<uint32_t>(i) * 2654435761u + static_cast<uint32_t>(r) * 40503u;
  const float mantissa = static_cast<float>(h % 100003) / 100003.f - 0.5f;
  return mantissa * std::pow(10.f, static_cast<float>(int((h >> 17) % 7) - 3));
}

// tf.distribute's all-reduce gives every replica the same value; here every
// rank gets the bits of ((x0 + x1) + x2) + ..., the sum in rank order, whatever
// rank reduced the element (one pass, or reduce-scatter in rounds).
TEST(ShmCollectives, EveryRankGetsTheBitsOfTheSumInRankOrder) {
  const int64_t count = 5000;  // 20000 bytes: five rounds of a 4 KiB slot
  for (int n : {2, 3, 4}) {
    std::vector<float> in_order(count), reversed(count);
    for (int64_t i = 0; i < count; ++i) {
      float forward = order_sensitive(0, i), backward = order_sensitive(n - 1, i);
      for (int r = 1; r < n; ++r) {
        forward += order_sensitive(r, i);
        backward += order_sensitive(n - 1 - r, i);
      }
      in_order[i] = forward;
      reversed[i] = backward;
    }
    // The data tells the orders apart (with 3 or more ranks), so a rank that
    // summed in another order would fail below.
    if (n > 2) {
      ASSERT_NE(in_order, reversed);
    }
    for (size_t one_pass : {size_t{0}, size_t{64} << 10}) {
      SCOPED_TRACE(::testing::Message() << n << " ranks, one pass <= " << one_pass);
      auto group = make_group(n, {.timeout = 30s, .slot_bytes = 4096, .one_pass_bytes = one_pass});
      std::vector<std::vector<float>> out(n);
      run_ranks_ok(n, [&](int r) {
        std::vector<float> mine(count);
        for (int64_t i = 0; i < count; ++i) mine[i] = order_sensitive(r, i);
        out[r] = group[r]->all_reduce(r, constant(mine), ReduceOp::SUM).to_vector<float>();
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(out[r].size(), size_t(count));
        for (int64_t i = 0; i < count; ++i) {
          ASSERT_EQ(std::bit_cast<uint32_t>(out[r][i]), std::bit_cast<uint32_t>(in_order[i]))
              << "rank " << r << ", element " << i;
        }
      }
    }
  }
}

// tf.raw_ops.CollectiveGatherV2: concatenation along axis 0 in rank order.
TEST(ShmCollectives, AllGatherConcatenatesUnequalPartsInRankOrder) {
  for (int n : {2, 3, 4}) {
    auto group = make_group(n, {.timeout = 30s, .slot_bytes = 4096});
    std::vector<Tensor> out(n);
    // Rank r contributes (r * 700 + 1) rows of 3 int64: more than a slot for r >= 1.
    run_ranks_ok(n, [&](int r) {
      out[r] = group[r]->all_gather(r, input<int64_t>(r, {r * 700 + 1, 3}));
    });
    int64_t rows = 0;
    for (int r = 0; r < n; ++r) rows += r * 700 + 1;
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(out[r].shape(), TensorShape({rows, 3}));
      const std::vector<int64_t> v = out[r].to_vector<int64_t>();
      size_t at = 0;
      for (int p = 0; p < n; ++p) {
        for (int64_t i = 0; i < (p * 700 + 1) * 3; ++i, ++at) {
          ASSERT_EQ(v[at], value<int64_t>(p, i)) << "rank " << r << " part " << p;
        }
      }
    }
  }
}

// tf.raw_ops.CollectiveBcastSendV2 / RecvV2.
TEST(ShmCollectives, BroadcastCopiesTheRootsTensorToEveryRank) {
  for (int n : {2, 3, 4}) {
    auto group = make_group(n, {.timeout = 30s, .slot_bytes = 4096});
    const int root = n - 1;
    std::vector<Tensor> out(n);
    run_ranks_ok(n,
                 [&](int r) { out[r] = group[r]->broadcast(r, input<double>(r, {2001}), root); });
    const std::vector<double> expected = input<double>(root, {2001}).to_vector<double>();
    for (int r = 0; r < n; ++r) EXPECT_EQ(out[r].to_vector<double>(), expected) << "rank " << r;
  }
}

// tf.distribute's reduce-scatter (CollectiveReduceScatterV2): block r to rank r.
TEST(ShmCollectives, ReduceScatterGivesEachRankItsBlockOfTheSum) {
  for (int n : {2, 3, 4}) {
    auto group = make_group(n, {.timeout = 30s, .slot_bytes = 4096});
    const int64_t rows = n * 401;
    std::vector<Tensor> out(n);
    run_ranks_ok(n, [&](int r) {
      out[r] = group[r]->reduce_scatter(r, input<float>(r, {rows, 2}), ReduceOp::SUM);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(out[r].shape(), TensorShape({401, 2}));
      const std::vector<float> v = out[r].to_vector<float>();
      for (int64_t i = 0; i < 802; ++i)
        ASSERT_EQ(v[i], reference<float>(ReduceOp::SUM, n, r * 802 + i)) << "rank " << r;
    }
  }
}

TEST(ShmCollectives, ReduceScatterRefusesADimensionNotDivisibleOnEveryRank) {
  auto group = make_group(2);
  auto errors = run_ranks(
      2, [&](int r) { group[r]->reduce_scatter(r, input<float>(r, {3}), ReduceOp::SUM); });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(caught(errors[r]).code, ErrorCode::INVALID_ARGUMENT);
  run_ranks_ok(2, [&](int r) { group[r]->barrier(r); });  // still usable
}

TEST(ShmCollectives, BarrierReturnsOnlyOnceEveryRankArrived) {
  auto group = make_group(3);
  std::atomic<int> arrived = 0;
  std::vector<int> seen(3);
  run_ranks_ok(3, [&](int r) {
    if (r == 2) std::this_thread::sleep_for(100ms);
    arrived.fetch_add(1);
    group[r]->barrier(r);
    seen[r] = arrived.load();
  });
  EXPECT_EQ(seen, (std::vector<int>{3, 3, 3}));
}

TEST(ShmCollectives, MismatchedCallsFailOnEveryRankNamingBothSides) {
  auto group = make_group(2);
  auto errors = run_ranks(
      2, [&](int r) { group[r]->all_reduce(r, input<float>(r, {r == 0 ? 2 : 3}), ReduceOp::SUM); });
  for (int r = 0; r < 2; ++r) {
    const auto c = caught(errors[r]);
    EXPECT_EQ(c.code, ErrorCode::FAILED_PRECONDITION) << c.message;
    EXPECT_THAT(c.message, HasSubstr("collective schedules differ"));
    EXPECT_THAT(c.message, HasSubstr("all_reduce(SUM, [float32[2]])"));
    EXPECT_THAT(c.message, HasSubstr("all_reduce(SUM, [float32[3]])"));
  }
  // The group stays usable.
  std::vector<std::vector<float>> out(2);
  run_ranks_ok(2, [&](int r) {
    out[r] =
        group[r]->all_reduce(r, constant<float>({1.f * r, 2}), ReduceOp::SUM).to_vector<float>();
  });
  EXPECT_EQ(out[1], (std::vector<float>{1, 4}));
}

// As GlooCollectives: with rank names, a timeout names the late rank by its
// task and says what it was last heard doing (its last completed collective
// and its activity, published into the segment every progress_interval).
TEST(ShmCollectives, ATimeoutNamesTheLateTaskAndWhatItWasLastDoing) {
  auto group = make_group(2, {.timeout = 400ms,
                              .rendezvous_timeout = 30s,
                              .rank_names = {"/job:chief/task:0", "/job:worker/task:0"},
                              .progress_interval = 20ms});
  // The progress thread asks for the activity, then publishes it: once it has
  // asked twice, the first answer is in the segment.
  std::atomic<int> asked{0};
  group[1]->set_activity([&asked] {
    asked.fetch_add(1);
    return std::string("step 3, phase input");
  });
  run_ranks_ok(2, [&](int r) { group[r]->all_reduce(r, constant<float>({1, 2}), ReduceOp::SUM); });
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (asked.load() < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_GE(asked.load(), 2) << "rank 1 never published its progress";
  const auto c = caught(run_ranks(1, [&](int) { group[0]->barrier(0); })[0]);
  EXPECT_EQ(c.code, ErrorCode::DEADLINE_EXCEEDED) << c.message;
  EXPECT_THAT(c.message,
              HasSubstr("collective #2 barrier(): rank 1 (/job:worker/task:0) never entered it "
                        "within 400ms (reported by rank 0 (/job:chief/task:0)); rank 1 "
                        "(/job:worker/task:0) was last heard from "));
  EXPECT_THAT(c.message,
              ::testing::ContainsRegex("s before: completed collective #1 all_reduce\\(SUM, "
                                       "\\[float32\\[2\\]\\]\\); step 3, phase input$"));
  group[1]->set_activity(nullptr);
  EXPECT_THAT(caught(run_ranks(1,
                               [&](int) {
                                 ShmCollectives(0, 2, std::make_shared<InMemoryStore>(),
                                                {.rank_names = {"a"}});
                               })[0])
                  .message,
              HasSubstr("expected ShmOptions.rank_names to name all 2 ranks, got 1 names"));
}

TEST(ShmCollectives, TimeoutNamesTheRankThatNeverEnteredOnEveryRankUntilReset) {
  auto group = make_group(3, {.timeout = 300ms, .rendezvous_timeout = 30s});
  const auto start = std::chrono::steady_clock::now();
  auto errors = run_ranks(2, [&](int r) { group[r]->barrier(r); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  for (int r = 0; r < 2; ++r) {
    const auto c = caught(errors[r]);
    EXPECT_EQ(c.code, ErrorCode::DEADLINE_EXCEEDED) << c.message;
    EXPECT_THAT(c.message,
                HasSubstr("collective #1 barrier(): rank 2 never entered it within 300ms"));
  }
  // The late rank gets the same verdict; so do later calls.
  EXPECT_EQ(caught(run_ranks(1, [&](int) { group[2]->barrier(2); })[0]).code,
            ErrorCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(caught(run_ranks(1, [&](int) { group[0]->barrier(0); })[0]).code,
            ErrorCode::DEADLINE_EXCEEDED);
  run_ranks_ok(3, [&](int r) { group[r]->reset(); });
  std::vector<std::vector<int32_t>> out(3);
  run_ranks_ok(3, [&](int r) {
    out[r] = group[r]->all_reduce(r, constant<int32_t>({r}), ReduceOp::SUM).to_vector<int32_t>();
  });
  EXPECT_EQ(out[2], std::vector<int32_t>{3});
}

TEST(ShmCollectives, AbortWakesAWaitingRankOfAnotherObject) {
  auto group = make_group(2, {.timeout = 60s});
  const auto start = std::chrono::steady_clock::now();
  std::jthread aborter([&] {
    std::this_thread::sleep_for(100ms);
    group[1]->abort("replica 1 failed: out of data");
  });
  auto errors =
      run_ranks(1, [&](int) { group[0]->all_reduce(0, constant<float>({1}), ReduceOp::SUM); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  const auto c = caught(errors[0]);
  EXPECT_EQ(c.code, ErrorCode::ABORTED);
  EXPECT_EQ(c.message, "replica 1 failed: out of data");
  aborter.join();
  EXPECT_EQ(caught(run_ranks(1, [&](int) { group[1]->barrier(1); })[0]).code, ErrorCode::ABORTED);
}

TEST(ShmCollectives, RefusesACallerThatIsNotThisObjectsRank) {
  auto group = make_group(2);
  EXPECT_EQ(caught(run_ranks(1, [&](int) { group[0]->barrier(1); })[0]).code,
            ErrorCode::INVALID_ARGUMENT);
}

TEST(ShmCollectives, TheSegmentLeavesDevShmOnceEveryRankMappedIt) {
  auto group = make_group(2);
  const std::string name = group[0]->segment_name();
  ASSERT_FALSE(name.empty());
  EXPECT_FALSE(segment_exists(name)) << name;
}

// ---- processes ----

// A store that processes of one host share through a directory (each key a
// file written atomically); enough for the rendezvous of forked ranks.
class DirStore : public Store {
 public:
  explicit DirStore(std::string dir) : dir_(std::move(dir)), owner_(::getpid()) {}
  ~DirStore() override {
    if (::getpid() == owner_) std::filesystem::remove_all(dir_);
  }
  void set(const std::string& key, const Bytes& value, Milliseconds) override {
    write_file_atomically(path(key), std::string_view(value.data(), value.size()));
  }
  Bytes get(const std::string& key, Milliseconds timeout) override {
    wait({key}, timeout);
    return to_bytes(read_file(path(key)));
  }
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!check(keys, timeout)) {
      if (aborted_) throw AbortedError("DirStore aborted");
      if (std::chrono::steady_clock::now() >= until)
        throw DeadlineExceededError(
            str_cat("DirStore: keys missing after ", timeout.count(), "ms"));
      std::this_thread::sleep_for(1ms);
    }
  }
  int64_t add(const std::string& key, int64_t delta, Milliseconds) override {
    const int fd = ::open(path("lock").c_str(), O_CREAT | O_RDWR, 0600);
    ::flock(fd, LOCK_EX);
    Bytes value = file_exists(path(key)) ? to_bytes(read_file(path(key))) : Bytes{};
    const int64_t result = strata::internal::add_to_counter("DirStore", key, value, delta);
    write_file_atomically(path(key), std::string_view(value.data(), value.size()));
    ::close(fd);  // releases the lock
    return result;
  }
  bool check(const std::vector<std::string>& keys, Milliseconds) override {
    return std::all_of(keys.begin(), keys.end(),
                       [&](const std::string& k) { return file_exists(path(k)); });
  }
  void abort() override { aborted_ = true; }
  Milliseconds timeout() const override { return 30s; }

 private:
  std::string path(std::string key) const {
    std::replace(key.begin(), key.end(), '/', '_');
    return dir_ + "/" + key;
  }
  const std::string dir_;
  const pid_t owner_;  // forked children leave the directory to the process that made it
  std::atomic<bool> aborted_ = false;
};

std::shared_ptr<Store> dir_store() {
  static int made = 0;
  const std::string dir = str_cat(std::filesystem::temp_directory_path().string(),
                                  "/shm_collectives_test.", ::getpid(), ".", made++);
  std::filesystem::remove_all(dir);
  make_dirs(dir);
  return std::make_shared<DirStore>(dir);
}

// Runs `child` in a forked process (its return value is the exit status).
pid_t fork_child(const std::function<int()>& child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int status = 1;
    try {
      status = child();
    } catch (...) {
      status = 2;
    }
    ::_exit(status);
  }
  return pid;
}

int wait_status(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(ShmCollectives, TwoProcessesAllReduce) {
  const std::shared_ptr<Store> store = dir_store();
  const ShmOptions options{.timeout = 30s, .slot_bytes = 1 << 16};
  const int64_t n = 100003;  // > one slot: several rounds
  const pid_t child = fork_child([&] {
    ShmCollectives group(1, 2, store, options);
    const std::vector<float> v =
        group.all_reduce(1, input<float>(1, {n}), ReduceOp::SUM).to_vector<float>();
    for (int64_t i = 0; i < n; ++i)
      if (v[i] != reference<float>(ReduceOp::SUM, 2, i)) return 3;
    return 0;
  });
  ASSERT_GT(child, 0);
  ShmCollectives group(0, 2, store, options);
  EXPECT_FALSE(segment_exists(group.segment_name()));
  const Tensor out = group.all_reduce(0, input<float>(0, {n}), ReduceOp::SUM);
  expect_reduced<float>(out, ReduceOp::SUM, 2, {n});
  const int status = wait_status(child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

TEST(ShmCollectives, ASigkilledPeerFailsTheSurvivorWithinItsTimeoutNamingTheRank) {
  const std::shared_ptr<Store> store = dir_store();
  const ShmOptions options{.timeout = 5s, .rendezvous_timeout = 30s};
  const pid_t child = fork_child([&] {
    ShmCollectives group(1, 2, store, options);
    group.barrier(1);
    ::raise(SIGKILL);  // dies without entering the next collective
    return 0;
  });
  ASSERT_GT(child, 0);
  std::string name;
  {
    ShmCollectives group(0, 2, store, options);
    name = group.segment_name();
    group.barrier(0);
    const auto start = std::chrono::steady_clock::now();
    auto errors =
        run_ranks(1, [&](int) { group.all_reduce(0, constant<float>({1}), ReduceOp::SUM); });
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s + 2s);
    const auto c = caught(errors[0]);
    // The survivor notices the exit (the child is a zombie until reaped) well
    // before its timeout.
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
    EXPECT_EQ(c.code, ErrorCode::UNAVAILABLE) << c.message;
    EXPECT_THAT(c.message,
                HasSubstr(str_cat("rank 1 (pid ", child, ") exited before it entered it")));
    EXPECT_THAT(c.message, HasSubstr("collective #2 all_reduce(SUM, [float32[1]])"));
  }
  const int status = wait_status(child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  EXPECT_FALSE(segment_exists(name)) << name;
}

TEST(ShmCollectives, KillingTheCreatingRankInTheMiddleOfLargeCallsFailsTheSurvivor) {
  const std::shared_ptr<Store> store = dir_store();
  const ShmOptions options{.timeout = 10s, .rendezvous_timeout = 30s, .slot_bytes = 1 << 16};
  const int64_t n = 1 << 20;  // 4 MiB: 64 rounds per call
  const pid_t child = fork_child([&] {
    ShmCollectives group(0, 2, store, options);  // rank 0 creates the segment
    const Tensor mine = input<float>(0, {n});
    for (;;) group.all_reduce(0, mine, ReduceOp::SUM);
    return 0;
  });
  ASSERT_GT(child, 0);
  std::string name;
  {
    ShmCollectives group(1, 2, store, options);
    name = group.segment_name();
    const Tensor mine = input<float>(1, {n});
    group.all_reduce(1, mine, ReduceOp::SUM);  // the pair works
    std::jthread killer([&] {
      std::this_thread::sleep_for(200ms);
      ::kill(child, SIGKILL);
    });
    const auto start = std::chrono::steady_clock::now();
    auto errors = run_ranks(1, [&](int) {
      for (;;) group.all_reduce(1, mine, ReduceOp::SUM);
    });
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    const auto c = caught(errors[0]);
    EXPECT_EQ(c.code, ErrorCode::UNAVAILABLE) << c.message;
    EXPECT_THAT(c.message, HasSubstr(str_cat("rank 0 (pid ", child, ") exited before it")));
  }
  const int status = wait_status(child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  EXPECT_FALSE(segment_exists(name)) << name;
}

}  // namespace
}  // namespace strata::collective
