#pragma once
// Where the time of training steps goes, per replica and per worker, and who
// is slow: input wait, forward, gradient, apply, and collective time split
// into the wait for the slowest peer and the transfer itself. TensorFlow leaves
// this to its profiler's traces; Strata keeps the totals and names stragglers.
//
//   std::shared_ptr<StepProfiler> p = strategy.enable_step_profile();
//   model->fit(x, y, {...});                  // Keras's fit records every phase
//   StepProfileReport report = gather_step_profile(strategy);   // every worker calls it
//   std::cout << report.table();
//   for (const Straggler& s : report.stragglers) std::cout << s.describe() << "\n";
//
// A custom training loop marks its phases itself:
//
//   strategy.run([&](const Tensor& x) {
//     ScopedStepPhase forward(StepPhase::kForward);
//     ...
//   }, batch);
//
// Phases are exclusive: a phase entered inside another (the collectives inside
// apply) pauses the outer one, so no time counts twice. The collective split
// costs one barrier per all-reduce while profiling is on (the replicas'
// all-reduces and the cross-worker sums of the driving thread, such as the
// input's end-of-data agreement): the time spent in it is the wait for the
// slowest peer, the all-reduce after it is the transfer. With profiling off a
// phase scope costs a lookup of the current strategy.
//
// Thread-safety: each replica thread adds to its own replica's totals; input
// time, added by the thread driving the strategy, goes to every local replica.
// Totals are atomics, read with snapshot() at any time.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strata::distribute {

class Strategy;

enum class StepPhase : int {
  kInput = 0,           // waiting for the next batch
  kForward,             // the model's forward pass and the loss
  kGradient,            // the tape's backward pass
  kApply,               // the optimizer's update (its collectives excluded)
  kCollectiveWait,      // blocked until the slowest peer arrives
  kCollectiveTransfer,  // the collective itself, every peer present
};
inline constexpr int kNumStepPhases = 6;

// "input", "forward", "gradient", "apply", "collective_wait", "collective_transfer".
std::string_view step_phase_name(StepPhase phase) noexcept;

// Seconds spent in each phase (indexed by StepPhase).
using PhaseSeconds = std::array<double, kNumStepPhases>;

class StepProfiler {
 public:
  explicit StepProfiler(int num_local_replicas);

  int num_local_replicas() const noexcept { return static_cast<int>(totals_.size()); }
  void add(int local_replica, StepPhase phase, std::chrono::nanoseconds elapsed);
  // Input is drawn once for all local replicas: every one of them waited.
  void add_to_every_replica(StepPhase phase, std::chrono::nanoseconds elapsed);
  void count_step() { steps_.fetch_add(1, std::memory_order_relaxed); }
  int64_t steps() const { return steps_.load(std::memory_order_relaxed); }

  // Each local replica's totals so far.
  std::vector<PhaseSeconds> snapshot() const;

  // What the replicas are doing now, for reports of a hang: "step 42, phase
  // input" (the thread driving the strategy) or "step 42, replica 0 in
  // forward, replica 1 in collective_wait". Any thread may ask.
  std::string activity() const;

  // ScopedStepPhase's bookkeeping of the phase each replica is in (slot
  // num_local_replicas() is the thread driving the strategy): enter returns
  // the phase it replaces (-1: none), for leave to put back.
  int enter(int slot, StepPhase phase);
  void leave(int slot, int previous);

 private:
  using Totals = std::array<std::atomic<int64_t>, kNumStepPhases>;  // nanoseconds
  std::vector<Totals> totals_;
  std::vector<std::atomic<int>> current_;  // per slot: a StepPhase, or -1
  std::atomic<int64_t> steps_{0};
};

// Times the enclosing block as `phase` of the calling thread's replica when
// its strategy profiles, and does nothing when it does not. In cross-replica
// context (the thread driving the current strategy: drawing the next batch)
// the time counts for every local replica, since each of them waits for it.
class ScopedStepPhase {
 public:
  explicit ScopedStepPhase(StepPhase phase);
  ~ScopedStepPhase();
  ScopedStepPhase(const ScopedStepPhase&) = delete;
  ScopedStepPhase& operator=(const ScopedStepPhase&) = delete;
  // Whether this scope records (its strategy profiles).
  bool active() const noexcept { return profiler_ != nullptr; }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr int kEveryReplica = -1;
  // The profiler's slot for the phase bookkeeping.
  int slot() const noexcept {
    return local_replica_ == kEveryReplica ? profiler_->num_local_replicas() : local_replica_;
  }
  StepProfiler* profiler_ = nullptr;
  int local_replica_ = 0;
  StepPhase phase_;
  Clock::time_point start_;
  std::chrono::nanoseconds paused_for_{0};
  int replaced_phase_ = -1;  // the slot's phase before this one
  ScopedStepPhase* outer_ = nullptr;
  Clock::time_point paused_at_;
};

// One replica's totals in a report.
struct ReplicaStepTimes {
  int worker = 0;   // the worker (task index) the replica runs on
  int replica = 0;  // global replica id
  PhaseSeconds seconds{};
  // Input + forward + gradient + apply: the time it was not waiting on peers.
  double busy() const;
};

// A worker (or, on one worker, a replica) slower than the others' median by
// more than StepProfileReport::kStragglerThreshold in busy time.
struct Straggler {
  std::string who;  // "worker 1" or "replica 3"
  double busy_seconds = 0;
  double median_busy_seconds = 0;
  StepPhase dominant_phase = StepPhase::kInput;  // the phase furthest above its median
  // "worker 1 is 2.31x the median busy time (0.52 s vs 0.23 s); most of it in input"
  std::string describe() const;
};

struct StepProfileReport {
  static constexpr double kStragglerThreshold = 0.2;  // 20% above the median

  int64_t steps = 0;
  int num_workers = 1;
  std::vector<ReplicaStepTimes> replicas;  // every replica of every worker, by global id
  std::vector<Straggler> stragglers;

  // A worker's totals: each phase's maximum over its replicas (they run in
  // parallel, so the slowest one is the worker's time).
  PhaseSeconds worker_seconds(int worker) const;
  // The per-replica table, then one line per worker and the stragglers.
  std::string table() const;
};

// Builds the report from every replica's totals. Collective under a
// multi-worker strategy (every worker calls it, in cross-replica context, and
// every worker gets the whole report); FailedPreconditionError when `strategy`
// does not profile.
StepProfileReport gather_step_profile(Strategy& strategy);

// The report of given totals (`replicas` of every worker): stragglers among
// the workers when there are several, else among the replicas.
StepProfileReport make_step_profile_report(std::vector<ReplicaStepTimes> replicas, int64_t steps);

}  // namespace strata::distribute
