#include "strata/collective/shm_collectives.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <new>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "strata/base/cpu_relax.h"
#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/base/thread_annotations.h"
#include "strata/collective/internal/adopted_lock.h"
#include "strata/collective/internal/buffer_pool.h"
#include "strata/collective/internal/reduce.h"
#include "strata/collective/internal/signature.h"

namespace strata::collective {

using internal::CallSignature;
using internal::CollectiveKind;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kWho = "ShmCollectives";
constexpr uint64_t kMagic = 0x5354524154415348ull;  // "STRATASH"
constexpr size_t kDescBytes = 224;
constexpr size_t kFailureBytes = 2048;
constexpr size_t kProgressBytes = 512;
// How often a sleeping rank checks whether the ranks it waits for still exist.
constexpr auto kLivenessInterval = std::chrono::milliseconds(100);
// Pause instructions a waiting rank spins at least (a pause takes 10 to 140
// cycles depending on the processor: 128 took 3.1 us on the benchmark machine).
constexpr int kPauses = 128;
// A spinning rank reads the clock every this many pauses ...
constexpr int kPausesPerCheck = 8;
// ... and takes a gap longer than this between two readings for the scheduler
// having run another thread on its core.
constexpr auto kPreempted = std::chrono::microseconds(30);
// How long a rank that lost its core while spinning spins the short burst alone.
constexpr auto kContendedFor = std::chrono::milliseconds(250);

// Lock-free atomics are address-free, so they work between processes mapping the
// same memory at different addresses.
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// The part of the segment every rank reads: geometry, the wake word, the failure.
struct alignas(64) SegmentHeader {
  uint64_t magic;
  int32_t size;
  uint64_t slot_bytes;
  alignas(64) std::atomic<uint32_t> wake;  // the futex word: bumped by every post
  std::atomic<uint32_t> sleepers;          // ranks inside FUTEX_WAIT (or about to be)
  // The first failure of the group: 0 none, 1 being written, 2 written.
  alignas(64) std::atomic<uint32_t> failure_state;
  int32_t failure_code;
  uint32_t failure_length;
  char failure[kFailureBytes];
};

// Text that one rank writes while others may read it (a failure report
// reading a late rank's call description or progress): stored and loaded in
// atomic words, so a reader racing a writer gets torn text at worst, which the
// reader detects (see CallHeader and RankControl) and drops. The writer stores
// with release order, so whatever it stored before (the odd sequence number,
// the new call number) is seen by a reader that sees any of the new words; the
// reader loads with acquire order, so its check of the sequence number or the
// call number afterwards cannot move before the copy. (Fences would do the
// same with relaxed words, but ThreadSanitizer does not model fences.)
template <size_t kBytes>
struct SharedText {
  std::atomic<uint32_t> length;
  uint64_t words[kBytes / 8];

  void store(std::string_view text) {
    const size_t n = std::min(text.size(), kBytes);
    for (size_t w = 0; w * 8 < n; ++w) {
      uint64_t word = 0;
      std::memcpy(&word, text.data() + w * 8, std::min<size_t>(8, n - w * 8));
      std::atomic_ref<uint64_t>(words[w]).store(word, std::memory_order_release);
    }
    length.store(static_cast<uint32_t>(n), std::memory_order_release);
  }
  std::string load() const {
    const size_t n = std::min<size_t>(length.load(std::memory_order_acquire), kBytes);
    std::string out(n, '\0');
    for (size_t w = 0; w * 8 < n; ++w) {
      const uint64_t word = std::atomic_ref<uint64_t>(const_cast<uint64_t&>(words[w]))
                                .load(std::memory_order_acquire);
      std::memcpy(out.data() + w * 8, &word, std::min<size_t>(8, n - w * 8));
    }
    return out;
  }
};

// What a rank says about its current call (one per step parity). `call` is
// stored before the rest is rewritten for a new call and `ready` after, so a
// reader that finds ready == call == c before and after copying holds call c's
// description.
struct CallHeader {
  std::atomic<uint64_t> call;
  std::atomic<uint64_t> ready;
  uint64_t hash;
  int64_t dim0;  // all_gather: this rank's dimension 0
  uint64_t description_hash;
  SharedText<kDescBytes> description;
};

// One rank's control lines.
struct alignas(64) RankControl {
  std::atomic<int32_t> pid;
  alignas(64) std::atomic<uint64_t> posted;   // last step whose data and header are in place
  alignas(64) std::atomic<uint64_t> reduced;  // last step whose share of the result is in place
  alignas(64) CallHeader header[2];
  // What the failure reports say about this rank: the last call it completed,
  // and its progress (a sequence lock, odd while being written): when it was
  // last published (steady clock, shared by the processes of a host) and what
  // ShmCollectives::set_activity returned then.
  alignas(64) std::atomic<uint64_t> completed;
  // ShmCollectives::set_away_until (steady clock ns; 0: not away).
  std::atomic<int64_t> away_until_ns;
  std::atomic<uint64_t> progress_seq;
  std::atomic<int64_t> progress_ns;
  SharedText<kProgressBytes> progress;
};

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

struct Layout {
  size_t controls, data, total;
  Layout(int size, size_t slot) {
    controls = round_up(sizeof(SegmentHeader), 64);
    data = round_up(controls + size * sizeof(RankControl), 4096);
    total = data + 2 * size_t(size) * slot;
  }
};

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

// True when process `pid` has exited (gone, or a zombie its parent has not reaped).
bool process_exited(int32_t pid) {
  if (pid <= 0 || pid == ::getpid()) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat(str_cat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state == 'Z' || state == 'X';
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// The mapping of one segment.
struct Mapping {
  void* base = nullptr;
  size_t length = 0;
  SegmentHeader* header = nullptr;
  RankControl* controls = nullptr;
  std::byte* data = nullptr;
  size_t slot = 0;

  std::byte* slot_of(int rank, uint64_t step) const {
    return data + (2 * size_t(rank) + (step & 1)) * slot;
  }
  ~Mapping() {
    if (base != nullptr) ::munmap(base, length);
  }
};

}  // namespace

struct internal::ShmState {
  ShmState(int r, int n, std::shared_ptr<Store> s, ShmOptions o)
      : rank(r),
        size(n),
        store(std::move(s)),
        options(std::move(o)),
        slot(round_up(std::max<size_t>(options.slot_bytes, 4096), 4096)),
        pool(std::make_shared<internal::BufferPool>()) {}

  const int rank;
  const int size;
  const std::shared_ptr<Store> store;
  const ShmOptions options;
  const size_t slot;
  const std::shared_ptr<internal::BufferPool> pool;

  Mutex call_mu;  // serialises calls and reset()
  uint64_t calls STRATA_GUARDED_BY(call_mu) = 0;
  uint64_t step STRATA_GUARDED_BY(call_mu) = 0;

  Mutex mu;
  // Replaced only with both call_mu and mu held; calls read it holding call_mu.
  std::shared_ptr<Mapping> map STRATA_GUARDED_BY(mu);
  uint64_t epoch STRATA_GUARDED_BY(mu) = 0;
  std::string name STRATA_GUARDED_BY(mu);
  // A failure while no segment is mapped (a failed reset, or abort() then).
  ErrorCode local_code STRATA_GUARDED_BY(mu) = ErrorCode::OK;
  std::string local_failure STRATA_GUARDED_BY(mu);

  // Progress published for the peers' failure reports (publish_progress).
  Mutex progress_mu;
  std::function<std::string()> activity STRATA_GUARDED_BY(progress_mu);
  bool stopping STRATA_GUARDED_BY(progress_mu) = false;
  CondVar progress_cv;
  // Publishes while the group lives (started after the first rendezvous,
  // joined by stop_progress before anything it reads goes).
  std::thread progress_thread;

  // "rank 2" or, with rank names, "rank 2 (/job:worker/task:2)".
  std::string rank_name(int r) const {
    return options.rank_names.empty() ? str_cat("rank ", r)
                                      : str_cat("rank ", r, " (", options.rank_names[r], ")");
  }
  // "rank 1 (pid 4242)" or "rank 1 (/job:worker/task:1, pid 4242)".
  std::string name_with_pid(int r, int32_t pid) const {
    return options.rank_names.empty()
               ? str_cat("rank ", r, " (pid ", pid, ")")
               : str_cat("rank ", r, " (", options.rank_names[r], ", pid ", pid, ")");
  }
  // "rank 1", "rank 1 and rank 2", "rank 1, rank 2 and rank 3".
  std::string names(const std::vector<int>& ranks) const {
    std::string out;
    for (size_t i = 0; i < ranks.size(); ++i) {
      out += i == 0 ? "" : (i + 1 == ranks.size() ? " and " : ", ");
      out += rank_name(ranks[i]);
    }
    return out;
  }

  std::shared_ptr<Mapping> snapshot() {
    MutexLock lock(mu);
    return map;
  }

  // Writes this rank's progress (now, and what `activity` says) into the segment.
  void publish_progress() {
    std::string text;
    {
      MutexLock lock(progress_mu);
      if (activity) text = activity();
    }
    const std::shared_ptr<Mapping> m = snapshot();
    if (m == nullptr) return;
    RankControl& mine = m->controls[rank];
    const uint64_t seq = mine.progress_seq.load(std::memory_order_relaxed);
    mine.progress_seq.store(seq + 1, std::memory_order_relaxed);
    mine.progress_ns.store(steady_ns(), std::memory_order_release);
    mine.progress.store(text);
    mine.progress_seq.store(seq + 2, std::memory_order_release);
  }
  void publish_progress_until_stopped() {
    for (;;) {
      publish_progress();
      MutexLock lock(progress_mu);
      if (progress_cv.wait_until(progress_mu, Clock::now() + options.progress_interval,
                                 [this]() STRATA_REQUIRES(progress_mu) { return stopping; }))
        return;
    }
  }
  void stop_progress() {
    {
      MutexLock lock(progress_mu);
      stopping = true;
    }
    progress_cv.notify_all();
    if (progress_thread.joinable()) progress_thread.join();
  }

  // What rank `p` was last doing, for a verdict naming it: "; rank 1 was last
  // heard from 1.2 s before: completed collective #4 all_reduce(SUM,
  // [float32[]]); step 7, phase input", or "" when it never published its
  // progress (or the text changed under every attempt to read it).
  std::string last_heard(const Mapping& m, int p) const {
    const RankControl& c = m.controls[p];
    for (int attempt = 0; attempt < 8; ++attempt) {
      const uint64_t seq = c.progress_seq.load(std::memory_order_acquire);
      if (seq & 1) {
        std::this_thread::yield();
        continue;
      }
      const int64_t stamp = c.progress_ns.load(std::memory_order_acquire);
      const std::string activity_text = c.progress.load();
      if (c.progress_seq.load(std::memory_order_relaxed) != seq) continue;
      if (seq == 0) return "";
      char ago[32];
      std::snprintf(ago, sizeof(ago), "%.1f", double(steady_ns() - stamp) / 1e9);
      std::string out = str_cat("; ", rank_name(p), " was last heard from ", ago,
                                " s before: ", completed_text(c));
      if (!activity_text.empty()) out += str_cat("; ", activity_text);
      return out;
    }
    return "";
  }

  // "completed collective #4 all_reduce(SUM, [float32[]])" (the description
  // while the rank's header still holds it), or "completed no collective yet".
  static std::string completed_text(const RankControl& c) {
    const uint64_t done = c.completed.load(std::memory_order_acquire);
    if (done == 0) return "completed no collective yet";
    for (const CallHeader& h : c.header) {
      if (h.ready.load(std::memory_order_acquire) != done) continue;
      std::string d = h.description.load();
      if (h.call.load(std::memory_order_relaxed) == done) {
        return str_cat("completed collective #", done, " ", d);
      }
    }
    return str_cat("completed collective #", done);
  }

  std::chrono::milliseconds rendezvous_timeout() const {
    return options.rendezvous_timeout.count() > 0 ? options.rendezvous_timeout : options.timeout;
  }

  std::shared_ptr<Mapping> current() {
    MutexLock lock(mu);
    if (local_code != ErrorCode::OK) throw_error(local_code, local_failure);
    STRATA_CHECK(FAILED_PRECONDITION, map != nullptr, kWho, " rank ", rank,
                 ": no segment is mapped");
    return map;
  }

  // ---- the shared failure ----

  [[noreturn]] static void throw_shared(const Mapping& m) {
    SegmentHeader& h = *m.header;
    // A writer finishes within microseconds; bound the wait all the same.
    const auto until = Clock::now() + std::chrono::seconds(1);
    while (h.failure_state.load(std::memory_order_acquire) != 2 && Clock::now() < until)
      std::this_thread::yield();
    if (h.failure_state.load(std::memory_order_acquire) != 2) {
      throw InternalError(str_cat(kWho, ": a rank began to record a failure and never finished"));
    }
    throw_error(static_cast<ErrorCode>(h.failure_code),
                std::string(h.failure, std::min<size_t>(h.failure_length, kFailureBytes)));
  }

  static void check_failure(const Mapping& m) {
    if (m.header->failure_state.load(std::memory_order_acquire) != 0) throw_shared(m);
  }

  // Records `message` as the group's failure unless one is recorded already; wakes every rank.
  static void record(const Mapping& m, ErrorCode code, const std::string& message) {
    SegmentHeader& h = *m.header;
    uint32_t expected = 0;
    if (h.failure_state.compare_exchange_strong(expected, 1)) {
      h.failure_code = static_cast<int32_t>(code);
      h.failure_length = static_cast<uint32_t>(std::min(message.size(), kFailureBytes));
      std::memcpy(h.failure, message.data(), h.failure_length);
      h.failure_state.store(2, std::memory_order_release);
    }
    wake_all(m);
  }

  [[noreturn]] static void fail(const Mapping& m, ErrorCode code, const std::string& message) {
    record(m, code, message);
    throw_shared(m);
  }

  // ---- posting and waiting ----

  // Wakes the ranks sleeping on the futex, if any. Every change a sleeper
  // waits for (a counter, the failure) is stored with sequential consistency
  // before this reads `sleepers`, and a sleeper counts itself in `sleepers`
  // before it reads them (sequentially consistent too): either this sees the
  // sleeper and bumps the word, which makes its FUTEX_WAIT return at once or
  // wakes it, or the sleeper sees the change and does not sleep. A post
  // nobody sleeps on costs no write to the shared header.
  static void wake_all(const Mapping& m) {
    if (m.header->sleepers.load() == 0) return;
    m.header->wake.fetch_add(1);
    futex(&m.header->wake, FUTEX_WAKE, INT_MAX, nullptr);
  }

  void post(const Mapping& m, std::atomic<uint64_t> RankControl::*counter, uint64_t s) const {
    (m.controls[rank].*counter).store(s);
    wake_all(m);
  }

  bool all_at(const Mapping& m, std::atomic<uint64_t> RankControl::*counter, uint64_t s,
              std::memory_order order = std::memory_order_acquire) const {
    for (int p = 0; p < size; ++p) {
      if ((m.controls[p].*counter).load(order) < s) return false;
    }
    return true;
  }

  std::vector<int> missing(const Mapping& m, std::atomic<uint64_t> RankControl::*counter,
                           uint64_t s) const {
    std::vector<int> out;
    for (int p = 0; p < size; ++p) {
      if ((m.controls[p].*counter).load(std::memory_order_acquire) < s) out.push_back(p);
    }
    return out;
  }

  // Adaptive spinning (wait_all): how long the next wait may spin past the
  // burst, and until when it spins the burst alone (it lost its core while
  // spinning).
  std::chrono::nanoseconds spin_budget STRATA_GUARDED_BY(call_mu) = options.spin;
  Clock::time_point contended_until STRATA_GUARDED_BY(call_mu){};

  // Waits until every rank's `counter` reached step `s`; `what` describes the
  // call for the verdicts ("collective #3 barrier()"), `entering` whether the
  // missing ranks have not entered the call yet.
  //
  // Two stages. First the rank spins on pause instructions, reading the clock
  // every few of them: at least kPauses (about 3 us, long enough to catch a
  // peer that is about to post), then up to the spin budget. A gap in the
  // clock readings means the rank lost its core to another thread for that
  // long: every core is taken, and spinning only steals time from the others
  // (the peer among them). The rank then stops spinning, and for
  // kContendedFor spins the short burst alone. (It never yields: under load a
  // yield can put it behind every runnable thread for milliseconds, while a
  // thread woken from a futex is scheduled promptly.) Then it sleeps on the
  // futex until a post, a failure, the next liveness check or the deadline.
  // The budget adapts: halved (down to a quarter of ShmOptions::spin) after a
  // wait that spun it out and slept anyway, doubled (up to ShmOptions::spin)
  // after one that spinning past the burst caught.
  void wait_all(const Mapping& m, std::atomic<uint64_t> RankControl::*counter, uint64_t s,
                Clock::time_point deadline, const std::function<std::string()>& what, bool entering)
      STRATA_REQUIRES(call_mu) {
    if (all_at(m, counter, s)) return;
    if (options.spin.count() > 0) {
      auto now = Clock::now();
      const bool contended = now < contended_until;
      const auto spin_until = now + (contended ? std::chrono::nanoseconds(0) : spin_budget);
      for (int i = 1;; ++i) {
        cpu_relax();
        if (all_at(m, counter, s)) {
          if (i > kPauses) {
            spin_budget = std::min<std::chrono::nanoseconds>(options.spin, spin_budget * 2);
          }
          return;
        }
        if (i % kPausesPerCheck != 0) continue;
        check_failure(m);
        const auto t = Clock::now();
        if (t - now > kPreempted) {
          contended_until = t + kContendedFor;
          break;
        }
        now = t;
        if (i >= kPauses && t >= spin_until) {
          if (!contended) {
            spin_budget = std::max<std::chrono::nanoseconds>(options.spin / 4, spin_budget / 2);
          }
          break;
        }
      }
    }
    auto next_liveness = Clock::now() + kLivenessInterval;
    for (;;) {
      SegmentHeader& h = *m.header;
      h.sleepers.fetch_add(1);
      const uint32_t word = h.wake.load();
      const bool ready = all_at(m, counter, s, std::memory_order_seq_cst);
      const bool failed = h.failure_state.load() != 0;
      const auto now = Clock::now();
      if (!ready && !failed && now < deadline) {
        const auto sleep = std::min(deadline, next_liveness) - now;
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(sleep).count();
        timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
        futex(&h.wake, FUTEX_WAIT, word, &ts);  // EAGAIN, EINTR and timeouts all re-check
      }
      h.sleepers.fetch_sub(1);
      if (all_at(m, counter, s)) return;
      check_failure(m);
      const auto after = Clock::now();
      if (after >= next_liveness) {
        next_liveness = after + kLivenessInterval;
        for (int p : missing(m, counter, s)) {
          const int32_t pid = m.controls[p].pid.load();
          if (process_exited(pid)) {
            fail(m, ErrorCode::UNAVAILABLE,
                 str_cat(kWho, ": ", what(), ": ", name_with_pid(p, pid), " exited before it ",
                         entering ? "entered" : "finished", " it (reported by ", rank_name(rank),
                         ")", last_heard(m, p)));
          }
        }
      }
      if (after >= deadline) {
        const std::vector<int> late = missing(m, counter, s);
        if (late.empty()) return;
        // Late ranks that are all away on a bounded step elsewhere get until
        // its end (then, or when that step fails, the verdict is theirs).
        int64_t away = INT64_MAX;
        for (int p : late) away = std::min(away, m.controls[p].away_until_ns.load());
        if (away > steady_ns()) {
          deadline = Clock::time_point(std::chrono::nanoseconds(away));
          continue;
        }
        std::string heard;
        for (int p : late) heard += last_heard(m, p);
        fail(m, ErrorCode::DEADLINE_EXCEEDED,
             str_cat(kWho, ": ", what(), ": ", names(late), " never ",
                     entering ? "entered" : "finished", " it within ", options.timeout.count(),
                     "ms (reported by ", rank_name(rank), ")", heard));
      }
    }
  }

  // ---- rendezvous ----

  void connect() STRATA_REQUIRES(call_mu) {
    uint64_t e;
    {
      MutexLock lock(mu);
      e = epoch;
    }
    const auto limit = rendezvous_timeout();
    const auto deadline = Clock::now() + limit;
    auto left = [&] {
      return std::max(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
          std::chrono::milliseconds(1));
    };
    const std::string keys = str_cat(options.prefix, "/", e, "/");
    const Layout layout(size, slot);
    auto m = std::make_shared<Mapping>();
    m->length = layout.total;
    m->slot = slot;
    std::string segment;
    const std::string me = str_cat(kWho, " rank ", rank, ": rendezvous ");
    if (rank == 0) {
      std::random_device random;
      segment = str_cat("/strata-shm-", ::getpid(), "-", std::hex, random(), random());
      const int fd = ::shm_open(segment.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0) {
        throw UnavailableError(
            str_cat(me, "cannot create shared memory ", segment, ": ", std::strerror(errno)));
      }
      const bool sized = ::ftruncate(fd, static_cast<off_t>(layout.total)) == 0;
      const int size_errno = errno;
      void* base = sized ? ::mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                         : MAP_FAILED;
      const int map_errno = errno;
      ::close(fd);
      if (base == MAP_FAILED) {
        ::shm_unlink(segment.c_str());
        throw UnavailableError(str_cat(me, "cannot ", sized ? "map" : "size", " shared memory ",
                                       segment, " of ", layout.total,
                                       " bytes: ", std::strerror(sized ? map_errno : size_errno)));
      }
      m->base = base;
      auto* h = new (base) SegmentHeader{};
      h->magic = kMagic;
      h->size = size;
      h->slot_bytes = slot;
      for (int p = 0; p < size; ++p)
        new (static_cast<std::byte*>(base) + layout.controls + p * sizeof(RankControl))
            RankControl{};
    } else {
      segment = to_string(store->get(keys + "segment", left()));
      const int fd = ::shm_open(segment.c_str(), O_RDWR, 0);
      if (fd < 0) {
        throw UnavailableError(
            str_cat(me, "cannot open shared memory ", segment, ": ", std::strerror(errno)));
      }
      struct stat st {};
      const bool ok = ::fstat(fd, &st) == 0 && size_t(st.st_size) == layout.total;
      void* base = ok ? ::mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                      : MAP_FAILED;
      const int map_errno = errno;
      ::close(fd);
      if (!ok) {
        throw FailedPreconditionError(str_cat(me, "shared memory ", segment, " has ", st.st_size,
                                              " bytes, expected ", layout.total,
                                              " (do the ranks agree on size and slot_bytes?)"));
      }
      if (base == MAP_FAILED) {
        throw UnavailableError(
            str_cat(me, "cannot map shared memory ", segment, ": ", std::strerror(map_errno)));
      }
      m->base = base;
    }
    m->header = static_cast<SegmentHeader*>(m->base);
    m->controls =
        reinterpret_cast<RankControl*>(static_cast<std::byte*>(m->base) + layout.controls);
    m->data = static_cast<std::byte*>(m->base) + layout.data;
    STRATA_CHECK(
        FAILED_PRECONDITION,
        m->header->magic == kMagic && m->header->size == size && m->header->slot_bytes == slot, me,
        "shared memory ", segment, " was made for another group");
    m->controls[rank].pid.store(::getpid());
    if (rank == 0) {
      try {
        store->set(keys + "segment", to_bytes(segment), left());
        std::vector<std::string> mapped;
        for (int p = 1; p < size; ++p) mapped.push_back(str_cat(keys, "mapped/", p));
        if (!mapped.empty()) store->wait(mapped, left());
      } catch (const Error& err) {
        ::shm_unlink(segment.c_str());
        throw_error(err.code(), str_cat(me, "failed after ", limit.count(), "ms: ", err.what()));
      }
      ::shm_unlink(segment.c_str());  // every rank maps it: nothing outlives the processes
    } else {
      store->set(str_cat(keys, "mapped/", rank), to_bytes("1"), left());
    }
    MutexLock lock(mu);
    map = std::move(m);
    name = segment;
    step = 0;
    calls = 0;
    if (local_code == ErrorCode::ABORTED) record(*map, local_code, local_failure);
  }

  // ---- one call ----

  // Starts the header round of a call: takes the next step and writes this
  // rank's header for it (the description only when the call differs from the
  // last one of this parity). Returns the step.
  uint64_t enter(const Mapping& m, const CallSignature& sig, int64_t dim0, uint64_t call)
      STRATA_REQUIRES(call_mu) {
    const uint64_t s = ++step;
    CallHeader& mine = m.controls[rank].header[s & 1];
    const uint64_t hash = sig.hash();
    // Before the description's words, which are stored with release order (a
    // failure report that sees new words sees the new call number too).
    mine.call.store(call, std::memory_order_relaxed);
    mine.hash = hash;
    mine.dim0 = dim0;
    if (mine.description_hash != hash || mine.description.length.load() == 0) {
      mine.description.store(sig.to_string());
      mine.description_hash = hash;
    }
    mine.ready.store(call, std::memory_order_release);
    return s;
  }

  static std::string description(const CallHeader& h) { return h.description.load(); }

  void check_headers(const Mapping& m, uint64_t s, uint64_t call,
                     std::vector<const CallHeader*>& headers) const {
    headers.resize(size);
    const CallHeader& mine = m.controls[rank].header[s & 1];
    for (int p = 0; p < size; ++p) headers[p] = &m.controls[p].header[s & 1];
    for (int p = 0; p < size; ++p) {
      const CallHeader& h = *headers[p];
      if (h.call.load(std::memory_order_relaxed) == call && h.hash == mine.hash) continue;
      // Ranks named after their tasks are workers (as GlooCollectives says).
      const bool workers = !options.rank_names.empty();
      throw FailedPreconditionError(str_cat(
          kWho, ": collective schedules differ across ",
          workers ? "workers: this worker, " : "ranks: this rank, ", rank_name(rank),
          ", issued collective #", call, " ", description(mine), " but ", rank_name(p),
          " issued collective #", h.call.load(std::memory_order_relaxed), " ", description(h)));
    }
  }
};

namespace {

// One dtype's share of an all_reduce list, packed in list order.
struct PackGroup {
  DType dtype;
  int64_t total = 0;  // elements
  size_t offset = 0;  // bytes into the packed stream (64-byte aligned)
  size_t bytes = 0;
  std::shared_ptr<Buffer> buffer = nullptr;
};

struct Packing {
  std::vector<PackGroup> groups;
  std::vector<std::pair<size_t, int64_t>> where;  // per tensor: group, element offset
  size_t bytes = 0;
};

Packing pack(const std::vector<Tensor>& tensors) {
  Packing p;
  p.where.resize(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    const DType d = tensors[t].dtype();
    auto it = std::find_if(p.groups.begin(), p.groups.end(),
                           [d](const PackGroup& g) { return g.dtype == d; });
    if (it == p.groups.end()) {
      p.groups.push_back(PackGroup{.dtype = d});
      it = p.groups.end() - 1;
    }
    p.where[t] = {static_cast<size_t>(it - p.groups.begin()), it->total};
    it->total += tensors[t].num_elements();
  }
  for (PackGroup& g : p.groups) {
    g.offset = p.bytes;
    g.bytes = g.total * dtype_size(g.dtype);
    p.bytes += round_up(g.bytes, 64);
  }
  return p;
}

// Calls fn(begin, length) for the part of [a, a + n) inside [lo, hi).
template <typename Fn>
void overlap(size_t a, size_t n, size_t lo, size_t hi, Fn&& fn) {
  const size_t b = std::max(a, lo), e = std::min(a + n, hi);
  if (b < e) fn(b, e - b);
}

bool reducible_list(const std::vector<Tensor>& tensors) {
  return std::all_of(tensors.begin(), tensors.end(), [](const Tensor& t) {
    return t.defined() && internal::is_reducible(t.dtype());
  });
}

}  // namespace

std::string shm_host_identity() {
  if (const char* forced = std::getenv("STRATA_HOST_ID"); forced != nullptr && *forced != '\0') {
    return forced;
  }
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  struct stat shm {};
  if (::stat("/dev/shm", &shm) != 0) shm = {};
  return str_cat(host, " boot ", boot.empty() ? std::string("?") : boot, " shm ", shm.st_dev, ":",
                 shm.st_ino, " uid ", ::geteuid());
}

ShmCollectives::ShmCollectives(int rank, int size, std::shared_ptr<Store> store,
                               ShmOptions options) {
  STRATA_CHECK_ARG(size >= 1, kWho, ": expected size >= 1, got ", size);
  STRATA_CHECK_ARG(rank >= 0 && rank < size, kWho, ": expected a rank in [0, ", size, "), got ",
                   rank);
  STRATA_CHECK_ARG(store != nullptr, kWho, ": expected a Store, got nullptr");
  STRATA_CHECK_ARG(options.timeout.count() > 0, kWho, ": expected ShmOptions.timeout > 0, got ",
                   options.timeout.count(), "ms");
  STRATA_CHECK_ARG(options.rendezvous_timeout.count() >= 0, kWho,
                   ": expected ShmOptions.rendezvous_timeout >= 0, got ",
                   options.rendezvous_timeout.count(), "ms");
  STRATA_CHECK_ARG(options.rank_names.empty() || options.rank_names.size() == size_t(size), kWho,
                   ": expected ShmOptions.rank_names to name all ", size, " ranks, got ",
                   options.rank_names.size(), " names");
  STRATA_CHECK_ARG(options.progress_interval.count() >= 0, kWho,
                   ": expected ShmOptions.progress_interval >= 0, got ",
                   options.progress_interval.count(), "ms");
  state_ = std::make_unique<internal::ShmState>(rank, size, std::move(store), std::move(options));
  {
    MutexLock call_lock(state_->call_mu);
    state_->connect();
  }
  internal::ShmState& s = *state_;
  if (s.options.progress_interval.count() > 0 && size > 1) {
    s.progress_thread = std::thread([&s] { s.publish_progress_until_stopped(); });
  }
}

ShmCollectives::~ShmCollectives() { state_->stop_progress(); }

void ShmCollectives::set_activity(std::function<std::string()> activity) {
  MutexLock lock(state_->progress_mu);
  state_->activity = std::move(activity);
}

int ShmCollectives::rank() const { return state_->rank; }
int ShmCollectives::size() const { return state_->size; }

std::string ShmCollectives::segment_name() const {
  MutexLock lock(state_->mu);
  return state_->name;
}

namespace {

// The common frame of a call: checks the rank, takes the call lock, maps
// failures, numbers the call. `body(m, call, deadline)` does the rest.
template <typename Body>
auto run_call(internal::ShmState& s, int rank, Body&& body) {
  STRATA_CHECK_ARG(rank == s.rank, kWho, ": this object is rank ", s.rank, ", called as rank ",
                   rank);
  MutexLock call_lock(s.call_mu);
  const std::shared_ptr<Mapping> m = s.current();
  internal::ShmState::check_failure(*m);
  const uint64_t call = ++s.calls;
  const auto deadline = Clock::now() + s.options.timeout;
  auto result = body(*m, call, deadline);
  m->controls[s.rank].completed.store(call, std::memory_order_release);
  return result;
}

}  // namespace

namespace {

// Bytes reduced at a time before the block is copied on (stays in the L1/L2
// cache between the two).
constexpr size_t kReduceChunk = size_t{32} << 10;
// Calls whose data exceeds this write their results with streaming stores:
// the results would not stay in the cache anyway, and writing around it
// spares reading every output line from memory before it is overwritten.
constexpr size_t kStreamingBytes = size_t{8} << 20;

// memcpy, with streaming (non-temporal) stores for `streaming`. Call
// stream_fence() before the stored bytes are handed on.
void copy_out(std::byte* dst, const std::byte* src, size_t n, bool streaming) {
#if defined(__x86_64__)
  if (streaming && n >= 256) {
    const size_t head = (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16;
    std::memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
    }
    std::memcpy(dst + i, src + i, n - i);
    return;
  }
#endif
  (void)streaming;
  std::memcpy(dst, src, n);
}

void stream_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

// all_reduce and reduce_scatter (whose result holds every block): the packed
// list moves in rounds of one slot.
std::vector<Tensor> reduce_call(internal::ShmState& s, int rank, const CallSignature& sig,
                                const std::vector<Tensor>& tensors, ReduceOp op) {
  return run_call(s, rank, [&](const Mapping& m, uint64_t call, Clock::time_point deadline) {
    s.call_mu.assert_held();  // run_call holds it
    const bool valid = reducible_list(tensors);
    Packing p = valid ? pack(tensors) : Packing{};
    const auto what = [&] { return str_cat("collective #", call, " ", sig.to_string()); };
    const size_t rounds = std::max<size_t>(1, (p.bytes + s.slot - 1) / s.slot);
    const bool one_pass = p.bytes <= s.options.one_pass_bytes;
    const bool streaming = p.bytes > kStreamingBytes;
    for (PackGroup& g : p.groups) g.buffer = internal::BufferPool::get(s.pool, g.dtype, g.total);
    std::vector<const CallHeader*> headers;
    std::vector<const void*> ins(s.size);
    // Calls fn(group, x, input, n) for the bytes [x, x + n) of the packed
    // stream inside [a, b) that tensor data covers, `input` pointing at this
    // rank's bytes of them (in its tensors; the padding between groups is skipped).
    auto each_piece = [&](size_t a, size_t b, auto&& fn) {
      for (size_t t = 0; t < tensors.size(); ++t) {
        PackGroup& g = p.groups[p.where[t].first];
        const size_t start = g.offset + p.where[t].second * dtype_size(g.dtype);
        overlap(start, tensors[t].size_bytes(), a, b, [&](size_t x, size_t n) {
          fn(g, x, static_cast<const std::byte*>(tensors[t].raw_data()) + (x - start), n);
        });
      }
    };
    auto output = [](PackGroup& g, size_t x) {
      return static_cast<std::byte*>(g.buffer->data()) + (x - g.offset);
    };
    for (size_t k = 0; k < rounds; ++k) {
      const size_t lo = k * s.slot, hi = std::min(p.bytes, lo + s.slot);
      const uint64_t step = k == 0 ? s.enter(m, sig, 0, call) : ++s.step;
      std::byte* mine = m.slot_of(s.rank, step);
      // Blocks of the round: rank r reduces [block(r), block(r + 1)).
      const size_t part = one_pass ? hi - lo : round_up((hi - lo + s.size - 1) / s.size, 64);
      auto block = [&](int r) { return std::min(hi, lo + r * part); };
      auto copy_in = [&](size_t a, size_t b) {
        each_piece(a, b, [&](PackGroup&, size_t x, const std::byte* in, size_t n) {
          std::memcpy(mine + (x - lo), in, n);
        });
      };
      if (one_pass) {
        copy_in(lo, hi);
      } else {
        // The other ranks' blocks only: this rank reduces its own block from
        // its tensors and writes the result where its input would have been.
        copy_in(lo, block(s.rank));
        copy_in(block(s.rank + 1), hi);
      }
      s.post(m, &RankControl::posted, step);
      s.wait_all(m, &RankControl::posted, step, deadline, what, k == 0);
      if (k == 0) {
        s.check_headers(m, step, call, headers);
        sig.validate(kWho, s.size);
      }
      // Every element is reduced over the ranks in rank order (reduce_n), by
      // exactly one rank, so every rank holds the same bits.
      if (one_pass) {
        // Small data: every rank reduces all of it straight from the slots.
        for (PackGroup& g : p.groups) {
          overlap(g.offset, g.bytes, lo, hi, [&](size_t x, size_t n) {
            for (int r = 0; r < s.size; ++r) ins[r] = m.slot_of(r, step) + (x - lo);
            const size_t esize = dtype_size(g.dtype);
            internal::reduce_n(g.dtype, op, output(g, x), ins, static_cast<int64_t>(n / esize),
                               s.size);
          });
        }
        continue;
      }
      // Reduce-scatter: this rank's block, from its own tensors and the other
      // ranks' slots, into its slot (for them) and its result.
      each_piece(block(s.rank), block(s.rank + 1),
                 [&](PackGroup& g, size_t x, const std::byte* in, size_t n) {
                   const size_t esize = dtype_size(g.dtype);
                   for (size_t c = 0; c < n; c += kReduceChunk) {
                     const size_t len = std::min(kReduceChunk, n - c);
                     for (int r = 0; r < s.size; ++r) {
                       ins[r] = r == s.rank ? in + c : m.slot_of(r, step) + (x + c - lo);
                     }
                     internal::reduce_n(g.dtype, op, mine + (x + c - lo), ins,
                                        static_cast<int64_t>(len / esize), s.size);
                     copy_out(output(g, x + c), mine + (x + c - lo), len, streaming);
                   }
                 });
      s.post(m, &RankControl::reduced, step);
      s.wait_all(m, &RankControl::reduced, step, deadline, what, false);
      // All-gather: the other ranks' reduced blocks from their slots.
      for (int r = 0; r < s.size; ++r) {
        if (r == s.rank) continue;
        const std::byte* theirs = m.slot_of(r, step);
        for (PackGroup& g : p.groups) {
          overlap(g.offset, g.bytes, block(r), block(r + 1), [&](size_t x, size_t n) {
            copy_out(output(g, x), theirs + (x - lo), n, streaming);
          });
        }
      }
    }
    if (streaming) stream_fence();
    std::vector<Tensor> out;
    out.reserve(tensors.size());
    for (size_t t = 0; t < tensors.size(); ++t) {
      out.push_back(Tensor::from_buffer(p.groups[p.where[t].first].buffer, tensors[t].shape(),
                                        p.where[t].second, &tensors[t].placement()));
    }
    return out;
  });
}

}  // namespace

std::vector<Tensor> ShmCollectives::all_reduce(int rank, const std::vector<Tensor>& tensors,
                                               ReduceOp op) {
  return reduce_call(*state_, rank, CallSignature::of(CollectiveKind::all_reduce, op, -1, tensors),
                     tensors, op);
}

Tensor ShmCollectives::reduce_scatter(int rank, const Tensor& tensor, ReduceOp op) {
  internal::ShmState& s = *state_;
  const std::vector<Tensor> list{tensor};
  const std::vector<Tensor> whole = reduce_call(
      s, rank, CallSignature::of(CollectiveKind::reduce_scatter, op, -1, list), list, op);
  // This rank's block views the result, which holds every block.
  const int64_t rows = tensor.shape().dim(0) / s.size;
  const int64_t block = tensor.num_elements() / s.size;
  return Tensor::from_buffer(whole[0].buffer(), tensor.shape().with_dim(0, rows), s.rank * block,
                             &tensor.placement());
}

Tensor ShmCollectives::all_gather(int rank, const Tensor& tensor) {
  internal::ShmState& s = *state_;
  const auto sig = CallSignature::of(CollectiveKind::all_gather, ReduceOp::SUM, -1, {&tensor, 1});
  return run_call(s, rank, [&](const Mapping& m, uint64_t call, Clock::time_point deadline) {
    s.call_mu.assert_held();  // run_call holds it
    const bool valid = tensor.defined() && is_numeric(tensor.dtype()) && tensor.rank() >= 1;
    const int64_t dim0 = valid ? tensor.shape().dim(0) : 0;
    const auto what = [&] { return str_cat("collective #", call, " ", sig.to_string()); };
    std::vector<const CallHeader*> headers;
    const uint64_t first = s.enter(m, sig, dim0, call);
    const size_t my_bytes = valid ? tensor.size_bytes() : 0;
    const auto* src = valid ? static_cast<const std::byte*>(tensor.raw_data()) : nullptr;
    auto fill = [&](uint64_t step, size_t lo) {
      if (lo < my_bytes)
        std::memcpy(m.slot_of(s.rank, step), src + lo, std::min(s.slot, my_bytes - lo));
    };
    fill(first, 0);
    s.post(m, &RankControl::posted, first);
    s.wait_all(m, &RankControl::posted, first, deadline, what, true);
    s.check_headers(m, first, call, headers);
    sig.validate(kWho, s.size);
    const int64_t row = tensor.shape().removed(0).num_elements();
    const size_t esize = dtype_size(tensor.dtype());
    std::vector<size_t> bytes(s.size), offsets(s.size);
    int64_t rows = 0;
    size_t most = 0;
    for (int r = 0; r < s.size; ++r) {
      STRATA_CHECK(DATA_LOSS, headers[r]->dim0 >= 0, kWho, ": corrupt dim0 from rank ", r);
      offsets[r] = rows * row * esize;
      bytes[r] = headers[r]->dim0 * row * esize;
      rows += headers[r]->dim0;
      most = std::max(most, bytes[r]);
    }
    const TensorShape shape = tensor.shape().with_dim(0, rows);
    auto buffer = internal::BufferPool::get(s.pool, tensor.dtype(), shape.num_elements());
    auto* out = static_cast<std::byte*>(buffer->data());
    const size_t rounds = std::max<size_t>(1, (most + s.slot - 1) / s.slot);
    uint64_t step = first;
    for (size_t k = 0; k < rounds; ++k) {
      const size_t lo = k * s.slot;
      if (k > 0) {
        step = ++s.step;
        fill(step, lo);
        s.post(m, &RankControl::posted, step);
        s.wait_all(m, &RankControl::posted, step, deadline, what, false);
      }
      for (int r = 0; r < s.size; ++r) {
        if (lo < bytes[r])
          std::memcpy(out + offsets[r] + lo, m.slot_of(r, step), std::min(s.slot, bytes[r] - lo));
      }
    }
    return Tensor::from_buffer(buffer, shape, 0, &tensor.placement());
  });
}

Tensor ShmCollectives::broadcast(int rank, const Tensor& tensor, int root) {
  internal::ShmState& s = *state_;
  const auto sig = CallSignature::of(CollectiveKind::broadcast, ReduceOp::SUM, root, {&tensor, 1});
  return run_call(s, rank, [&](const Mapping& m, uint64_t call, Clock::time_point deadline) {
    s.call_mu.assert_held();  // run_call holds it
    const bool valid = tensor.defined() && is_numeric(tensor.dtype());
    const size_t bytes = valid ? tensor.size_bytes() : 0;
    const auto what = [&] { return str_cat("collective #", call, " ", sig.to_string()); };
    std::vector<const CallHeader*> headers;
    const size_t rounds = std::max<size_t>(1, (bytes + s.slot - 1) / s.slot);
    std::shared_ptr<Buffer> buffer;
    for (size_t k = 0; k < rounds; ++k) {
      const size_t lo = k * s.slot, n = bytes > lo ? std::min(s.slot, bytes - lo) : 0;
      const uint64_t step = k == 0 ? s.enter(m, sig, 0, call) : ++s.step;
      if (s.rank == root && n > 0)
        std::memcpy(m.slot_of(s.rank, step), static_cast<const std::byte*>(tensor.raw_data()) + lo,
                    n);
      s.post(m, &RankControl::posted, step);
      s.wait_all(m, &RankControl::posted, step, deadline, what, k == 0);
      if (k == 0) {
        s.check_headers(m, step, call, headers);
        sig.validate(kWho, s.size);
        buffer = internal::BufferPool::get(s.pool, tensor.dtype(), tensor.num_elements());
      }
      if (n > 0)
        std::memcpy(static_cast<std::byte*>(buffer->data()) + lo, m.slot_of(root, step), n);
    }
    return Tensor::from_buffer(buffer, tensor.shape(), 0, &tensor.placement());
  });
}

void ShmCollectives::barrier(int rank) {
  internal::ShmState& s = *state_;
  const auto sig = CallSignature::of(CollectiveKind::barrier, ReduceOp::SUM, -1, {});
  run_call(s, rank, [&](const Mapping& m, uint64_t call, Clock::time_point deadline) {
    s.call_mu.assert_held();  // run_call holds it
    std::vector<const CallHeader*> headers;
    const uint64_t step = s.enter(m, sig, 0, call);
    s.post(m, &RankControl::posted, step);
    s.wait_all(
        m, &RankControl::posted, step, deadline,
        [&] { return str_cat("collective #", call, " ", sig.to_string()); }, true);
    s.check_headers(m, step, call, headers);
    return 0;
  });
}

void ShmCollectives::fail(const Error& error) {
  internal::ShmState& s = *state_;
  MutexLock lock(s.mu);
  if (s.map != nullptr) {
    internal::ShmState::record(*s.map, error.code(), error.what());
  } else if (s.local_code == ErrorCode::OK) {
    s.local_code = error.code();
    s.local_failure = error.what();
  }
}

void ShmCollectives::set_away_until(std::chrono::steady_clock::time_point until) {
  const std::shared_ptr<Mapping> m = state_->snapshot();
  if (m == nullptr) return;
  const int64_t ns =
      until == std::chrono::steady_clock::time_point{}
          ? 0
          : std::chrono::duration_cast<std::chrono::nanoseconds>(until.time_since_epoch()).count();
  m->controls[state_->rank].away_until_ns.store(ns);
}

void ShmCollectives::abort(const std::string& reason) {
  internal::ShmState& s = *state_;
  MutexLock lock(s.mu);
  if (s.map != nullptr) {
    internal::ShmState::record(*s.map, ErrorCode::ABORTED, reason);
  } else if (s.local_code == ErrorCode::OK) {
    s.local_code = ErrorCode::ABORTED;
    s.local_failure = reason;
  }
}

void ShmCollectives::reset() {
  internal::ShmState& s = *state_;
  STRATA_CHECK(FAILED_PRECONDITION, s.call_mu.try_lock(), kWho,
               "::reset: expected no call in progress on rank ", s.rank);
  const internal::AdoptedLock call_lock(s.call_mu);
  std::shared_ptr<Mapping> old;
  {
    MutexLock lock(s.mu);
    old = std::move(s.map);
    s.local_code = ErrorCode::OK;
    s.local_failure.clear();
    ++s.epoch;
  }
  old.reset();
  try {
    s.connect();
  } catch (const Error& err) {
    MutexLock lock(s.mu);
    if (s.local_code == ErrorCode::OK) {
      s.local_code = err.code();
      s.local_failure = err.what();
    }
    throw;
  }
}

}  // namespace strata::collective
