#include "strata/distribute/step_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/distribute/strategy.h"

namespace strata::distribute {
namespace {

// The innermost phase being timed on this thread (nested phases pause it).
thread_local ScopedStepPhase* t_innermost_phase = nullptr;

constexpr std::array<StepPhase, 4> kBusyPhases = {StepPhase::kInput, StepPhase::kForward,
                                                  StepPhase::kGradient, StepPhase::kApply};

double median(std::vector<double> values) {
  STRATA_INTERNAL_CHECK(!values.empty());
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double busy_of(const PhaseSeconds& s) {
  double busy = 0;
  for (StepPhase p : kBusyPhases) busy += s[static_cast<int>(p)];
  return busy;
}

// Stragglers among `groups` (one PhaseSeconds per worker or per replica).
std::vector<Straggler> find_stragglers(
    const std::vector<std::pair<std::string, PhaseSeconds>>& groups) {
  std::vector<Straggler> out;
  if (groups.size() < 2) return out;
  std::vector<double> busy;
  std::array<std::vector<double>, kNumStepPhases> by_phase;
  for (const auto& [who, s] : groups) {
    busy.push_back(busy_of(s));
    for (int p = 0; p < kNumStepPhases; ++p) by_phase[p].push_back(s[p]);
  }
  const double median_busy = median(busy);
  PhaseSeconds median_phase{};
  for (int p = 0; p < kNumStepPhases; ++p) median_phase[p] = median(by_phase[p]);
  for (size_t i = 0; i < groups.size(); ++i) {
    if (busy[i] <= median_busy * (1 + StepProfileReport::kStragglerThreshold)) continue;
    Straggler s{
        .who = groups[i].first, .busy_seconds = busy[i], .median_busy_seconds = median_busy};
    double excess = -1;
    for (StepPhase p : kBusyPhases) {
      const double e = groups[i].second[static_cast<int>(p)] - median_phase[static_cast<int>(p)];
      if (e > excess) {
        excess = e;
        s.dominant_phase = p;
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string seconds_cell(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%10.3f", s);
  return buf;
}

}  // namespace

std::string_view step_phase_name(StepPhase phase) noexcept {
  switch (phase) {
    case StepPhase::kInput: return "input";
    case StepPhase::kForward: return "forward";
    case StepPhase::kGradient: return "gradient";
    case StepPhase::kApply: return "apply";
    case StepPhase::kCollectiveWait: return "collective_wait";
    case StepPhase::kCollectiveTransfer: return "collective_transfer";
  }
  return "unknown";
}

StepProfiler::StepProfiler(int num_local_replicas)
    : totals_(static_cast<size_t>(std::max(num_local_replicas, 1))), current_(totals_.size() + 1) {
  for (std::atomic<int>& c : current_) c.store(-1, std::memory_order_relaxed);
  STRATA_CHECK_ARG(num_local_replicas >= 1, "StepProfiler: num_local_replicas must be >= 1, got ",
                   num_local_replicas);
  for (Totals& t : totals_) {
    for (std::atomic<int64_t>& v : t) v.store(0, std::memory_order_relaxed);
  }
}

void StepProfiler::add(int local_replica, StepPhase phase, std::chrono::nanoseconds elapsed) {
  STRATA_INTERNAL_CHECK(local_replica >= 0 && local_replica < num_local_replicas());
  totals_[static_cast<size_t>(local_replica)][static_cast<size_t>(phase)].fetch_add(
      elapsed.count(), std::memory_order_relaxed);
}

void StepProfiler::add_to_every_replica(StepPhase phase, std::chrono::nanoseconds elapsed) {
  for (int r = 0; r < num_local_replicas(); ++r) add(r, phase, elapsed);
}

std::vector<PhaseSeconds> StepProfiler::snapshot() const {
  std::vector<PhaseSeconds> out(totals_.size());
  for (size_t r = 0; r < totals_.size(); ++r) {
    for (size_t p = 0; p < size_t{kNumStepPhases}; ++p) {
      out[r][p] = double(totals_[r][p].load(std::memory_order_relaxed)) * 1e-9;
    }
  }
  return out;
}

int StepProfiler::enter(int slot, StepPhase phase) {
  return current_.at(static_cast<size_t>(slot))
      .exchange(static_cast<int>(phase), std::memory_order_relaxed);
}

void StepProfiler::leave(int slot, int previous) {
  current_.at(static_cast<size_t>(slot)).store(previous, std::memory_order_relaxed);
}

std::string StepProfiler::activity() const {
  std::string out = str_cat("step ", steps());
  const int driver = current_.back().load(std::memory_order_relaxed);
  if (driver >= 0) out += str_cat(", phase ", step_phase_name(static_cast<StepPhase>(driver)));
  bool any = driver >= 0;
  for (int r = 0; r < num_local_replicas(); ++r) {
    const int p = current_[static_cast<size_t>(r)].load(std::memory_order_relaxed);
    if (p < 0) continue;
    out += str_cat(", replica ", r, " in ", step_phase_name(static_cast<StepPhase>(p)));
    any = true;
  }
  if (!any) out += ", between phases";
  return out;
}

ScopedStepPhase::ScopedStepPhase(StepPhase phase) : phase_(phase) {
  ReplicaContext* ctx = in_cross_replica_context() ? nullptr : get_replica_context();
  Strategy& strategy = ctx != nullptr ? ctx->strategy() : get_strategy();
  profiler_ = strategy.step_profiler();
  if (profiler_ == nullptr) return;
  // Cross-replica time (drawing the next batch for every replica) holds up
  // every local replica.
  local_replica_ = ctx != nullptr ? ctx->local_replica_id() : kEveryReplica;
  replaced_phase_ = profiler_->enter(slot(), phase_);
  start_ = Clock::now();
  outer_ = std::exchange(t_innermost_phase, this);
  if (outer_ != nullptr) outer_->paused_at_ = start_;
}

ScopedStepPhase::~ScopedStepPhase() {
  if (profiler_ == nullptr) return;
  const Clock::time_point now = Clock::now();
  const std::chrono::nanoseconds elapsed = now - start_ - paused_for_;
  if (local_replica_ == kEveryReplica) {
    profiler_->add_to_every_replica(phase_, elapsed);
  } else {
    profiler_->add(local_replica_, phase_, elapsed);
  }
  t_innermost_phase = outer_;
  if (outer_ != nullptr) outer_->paused_for_ += now - outer_->paused_at_;
  profiler_->leave(slot(), replaced_phase_);
}

double ReplicaStepTimes::busy() const { return busy_of(seconds); }

std::string Straggler::describe() const {
  char ratio[64];
  std::snprintf(ratio, sizeof(ratio), "%.2fx the median busy time (%.3f s vs %.3f s)",
                median_busy_seconds > 0 ? busy_seconds / median_busy_seconds : 0.0, busy_seconds,
                median_busy_seconds);
  return str_cat(who, " is ", ratio, "; most of it in ", step_phase_name(dominant_phase));
}

PhaseSeconds StepProfileReport::worker_seconds(int worker) const {
  PhaseSeconds out{};
  for (const ReplicaStepTimes& r : replicas) {
    if (r.worker != worker) continue;
    for (int p = 0; p < kNumStepPhases; ++p) out[p] = std::max(out[p], r.seconds[p]);
  }
  return out;
}

std::string StepProfileReport::table() const {
  std::string out = str_cat("Step profile: ", steps, " steps, seconds per phase\n");
  // Short column names; the JSON and the messages use step_phase_name.
  out += "worker  replica      input    forward   gradient      apply  coll_wait  coll_xfer\n";
  for (const ReplicaStepTimes& r : replicas) {
    char lead[32];
    std::snprintf(lead, sizeof(lead), "%6d  %7d", r.worker, r.replica);
    out += lead;
    for (double s : r.seconds) {
      out += ' ';
      out += seconds_cell(s);
    }
    out += '\n';
  }
  if (stragglers.empty()) {
    out += "No straggler: every ";
    out += num_workers > 1 ? "worker" : "replica";
    out += " is within 20% of the median busy time.\n";
  }
  for (const Straggler& s : stragglers) out += "Straggler: " + s.describe() + "\n";
  return out;
}

StepProfileReport make_step_profile_report(std::vector<ReplicaStepTimes> replicas, int64_t steps) {
  StepProfileReport report;
  report.steps = steps;
  std::sort(
      replicas.begin(), replicas.end(),
      [](const ReplicaStepTimes& a, const ReplicaStepTimes& b) { return a.replica < b.replica; });
  report.replicas = std::move(replicas);
  std::map<int, int> workers;
  for (const ReplicaStepTimes& r : report.replicas) ++workers[r.worker];
  report.num_workers = static_cast<int>(workers.size());
  std::vector<std::pair<std::string, PhaseSeconds>> groups;
  if (report.num_workers > 1) {
    for (const auto& [w, n] : workers) {
      groups.emplace_back(str_cat("worker ", w), report.worker_seconds(w));
    }
  } else {
    for (const ReplicaStepTimes& r : report.replicas) {
      groups.emplace_back(str_cat("replica ", r.replica), r.seconds);
    }
  }
  report.stragglers = find_stragglers(groups);
  return report;
}

StepProfileReport gather_step_profile(Strategy& strategy) {
  StepProfiler* profiler = strategy.step_profiler();
  STRATA_CHECK(FAILED_PRECONDITION, profiler != nullptr, strategy.name(),
               ": no step profile to gather; call enable_step_profile() before training");
  const std::vector<PhaseSeconds> local = profiler->snapshot();
  const int worker = strategy.extended().task_id();
  // One row per local replica: worker, global replica id, steps, the phases.
  constexpr int kColumns = 3 + kNumStepPhases;
  std::vector<Tensor> rows;
  for (int r = 0; r < strategy.num_local_replicas(); ++r) {
    std::vector<double> row = {double(worker), double(strategy.global_replica_id(r)),
                               double(profiler->steps())};
    row.insert(row.end(), local[static_cast<size_t>(r)].begin(),
               local[static_cast<size_t>(r)].end());
    rows.push_back(constant(row, TensorShape({1, kColumns})));
  }
  const Tensor all = strategy.num_replicas_in_sync() == 1
                         ? rows.front()
                         : strategy.gather(PerReplica<Tensor>(rows), 0);
  const std::vector<double> values = all.to_vector<double>();
  std::vector<ReplicaStepTimes> replicas;
  int64_t steps = 0;
  for (size_t i = 0; i + kColumns <= values.size(); i += kColumns) {
    ReplicaStepTimes r{.worker = int(values[i]), .replica = int(values[i + 1])};
    steps = std::max(steps, int64_t(values[i + 2]));
    for (int p = 0; p < kNumStepPhases; ++p) r.seconds[p] = values[i + 3 + size_t(p)];
    replicas.push_back(r);
  }
  return make_step_profile_report(std::move(replicas), steps);
}

}  // namespace strata::distribute
