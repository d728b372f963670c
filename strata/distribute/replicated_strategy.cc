#include "strata/distribute/replicated_strategy.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <map>

#include "strata/base/crc32c.h"
#include "strata/base/errors.h"
#include "strata/collective/local_collectives.h"
#include "strata/core/config.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/internal/gradient_overlap.h"
#include "strata/distribute/internal/merge_barrier.h"
#include "strata/distribute/internal/replica_threads.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/recorder.h"

namespace strata::distribute {

namespace {
// merge_call waits on other replicas' user code between two merge points; a
// failed replica aborts the barrier, so this deadline only catches a replica
// stuck in user code.
constexpr std::chrono::minutes kMergeTimeout{30};
}  // namespace

std::vector<std::string> device_names(const std::vector<const Device*>& devices) {
  std::vector<std::string> names;
  names.reserve(devices.size());
  for (const Device* d : devices) names.push_back(d->name());
  return names;
}

ReplicatedStrategy::ReplicatedStrategy(std::vector<const Device*> devices, int replica_id_offset,
                                       int num_replicas_in_sync,
                                       CommunicationOptions communication_options)
    : devices_(std::move(devices)),
      replica_id_offset_(replica_id_offset),
      num_replicas_in_sync_(num_replicas_in_sync),
      communication_options_(communication_options) {
  validate(communication_options_);
  STRATA_INTERNAL_CHECK(!devices_.empty() && replica_id_offset_ >= 0 &&
                        replica_id_offset_ + num_local_replicas() <= num_replicas_in_sync_);
  if (communication_options_.deterministic_reduction) {
    const int m = communication_options_.deterministic_micro_batches;
    STRATA_CHECK_ARG(m % num_replicas_in_sync_ == 0,
                     "CommunicationOptions: deterministic_reduction needs "
                     "deterministic_micro_batches to be a multiple of the ",
                     num_replicas_in_sync_, " replicas in sync, got ", m,
                     " (a power of two at least the largest replica count to compare)");
    // A micro-batch's forward and backward pass must give the same bits on
    // any replica, whatever its device's thread count.
    config::enable_op_determinism();
  }
  for (int i = 0; i < num_local_replicas(); ++i) {
    contexts_.push_back(std::make_unique<ReplicaContext>(*this, global_replica_id(i), i));
  }
  merge_barrier_ = std::make_unique<internal::MergeBarrier>(num_local_replicas(), kMergeTimeout);
  if (num_local_replicas() == num_replicas_in_sync_) {
    collectives_ = std::make_shared<collective::LocalCollectives>(
        num_local_replicas(),
        collective::CollectiveOptions{
            .timeout = std::chrono::milliseconds(collective_timeout_ms(communication_options_))});
  }
  threads_ = std::make_unique<internal::ReplicaThreads>(
      devices_,
      [this](int replica, const std::exception_ptr& error) { on_replica_failure(replica, error); });
}

ReplicatedStrategy::~ReplicatedStrategy() = default;

void ReplicatedStrategy::set_collectives(std::shared_ptr<collective::Collectives> collectives) {
  STRATA_INTERNAL_CHECK(collectives != nullptr && collectives->size() == num_replicas_in_sync_);
  collectives_ = std::move(collectives);
}

void ReplicatedStrategy::enable_gradient_overlap() {
  STRATA_INTERNAL_CHECK(collectives_ != nullptr && overlaps_.empty());
  // A local replica of a multi-worker group may wait twice the cross-worker
  // timeout inside one call (multi_worker_mirrored_strategy.cc), so a
  // communication thread that finished nothing for longer than that and a
  // margin is stuck.
  const std::chrono::milliseconds timeout(collective_timeout_ms(communication_options_));
  for (int i = 0; i < num_local_replicas(); ++i) {
    overlaps_.push_back(std::make_unique<internal::GradientOverlap>(
        collectives_, global_replica_id(i), *devices_[size_t(i)],
        internal::GradientOverlapOptions{
            .bucket_bytes = communication_options_.gradient_bucket_bytes,
            .stall_timeout = 2 * timeout + std::chrono::seconds(10),
            .owner = str_cat(name(), " replica ", global_replica_id(i))}));
  }
}

std::unique_ptr<GradientSink> ReplicatedStrategy::gradient_sink_in_replica(ReplicaContext& ctx,
                                                                           size_t num_sources) {
  if (overlaps_.empty() || &ctx.strategy() != this) return nullptr;
  return overlaps_.at(size_t(ctx.local_replica_id()))->sink(num_sources);
}

GradientOverlapCounts ReplicatedStrategy::gradient_overlap_counts() const {
  GradientOverlapCounts total;
  for (const auto& o : overlaps_) {
    const GradientOverlapCounts c = o->counts();
    total.buckets += c.buckets;
    total.used += c.used;
    total.discarded += c.discarded;
  }
  return total;
}

void ReplicatedStrategy::on_replica_failure(int local_replica, const std::exception_ptr&) {
  const std::string reason = str_cat("replica ", global_replica_id(local_replica), " failed");
  merge_barrier_->abort(std::make_exception_ptr(AbortedError(reason)));
  if (collectives_) {
    collectives_->abort(reason);
    collectives_need_reset_ = true;
  }
}

int ReplicatedStrategy::deterministic_micro_batches() const {
  return communication_options_.deterministic_reduction
             ? communication_options_.deterministic_micro_batches
             : 0;
}

void ReplicatedStrategy::run_on_replicas(const std::function<void(int)>& body) {
  const int64_t every = communication_options_.check_divergence_every_n_steps;
  const int64_t step = steps_completed_ + 1;
  std::vector<Variable> checked;
  if (every > 0 && num_replicas_in_sync_ > 1 && step % every == 0) {
    checked = live_mirrored_variables();
  }
  // Variables a lazily built layer creates inside this run are checked from
  // the next check on: every worker sees the same list here.
  const bool check = !checked.empty();
  std::vector<Tensor> tables(check ? num_local_replicas() : 0);
  merge_barrier_->reset();
  // Every replica thread is idle between runs, so a group aborted by the last
  // run's failure can be made usable again (a cross-process reset is itself
  // collective, so only after a failure).
  if (collectives_ && collectives_need_reset_) {
    collectives_->reset();
    collectives_need_reset_ = false;
  }
  try {
    threads_->run_all([&](int local) {
      internal::ReplicaModeGuard guard(*contexts_[local]);
      // Layers built lazily inside `run` create their variables here.
      VariableCreatorScope creator([this](const NextVariableCreator& next, VariableArgs args) {
        Variable v = create_variable(next, std::move(args));
        internal::note_variable_created(*this, v);
        return v;
      });
      body(local);
      // The gradient reductions still queued run before anything else uses
      // the group (the fingerprints, the next step's input agreement).
      if (!overlaps_.empty()) overlaps_[size_t(local)]->finish_step();
      if (check) tables[local] = gather_fingerprints(local, checked);
      merge_barrier_->replica_finished(local);
    });
  } catch (...) {
    // The failed replica aborted the group, so the communication threads'
    // queued collectives end at once; the next run resets the group.
    for (const auto& o : overlaps_) o->recover();
    throw;
  }
  steps_completed_ = step;
  if (check) raise_if_diverged(tables.front(), checked, step);
}

std::vector<Variable> ReplicatedStrategy::live_mirrored_variables() {
  MutexLock lock(mirrored_mu_);
  std::erase_if(mirrored_, [](const std::weak_ptr<VariableImpl>& w) { return w.expired(); });
  std::vector<Variable> live;
  live.reserve(mirrored_.size());
  for (const std::weak_ptr<VariableImpl>& w : mirrored_) {
    if (std::shared_ptr<VariableImpl> impl = w.lock()) live.emplace_back(std::move(impl));
  }
  return live;
}

Tensor ReplicatedStrategy::gather_fingerprints(int local, const std::vector<Variable>& variables) {
  std::vector<int64_t> mine;
  mine.reserve(variables.size());
  for (const Variable& v : variables) {
    const Tensor value = distributed_components(v).at(size_t(local)).impl().read();
    uint32_t crc = 0;
    if (value.dtype() == DType::string) {
      for (const std::string& s : value.to_vector<std::string>()) {
        const uint64_t n = s.size();
        crc = crc32c::extend(crc, &n, sizeof n);
        crc = crc32c::extend(crc, s);
      }
    } else {
      crc = crc32c::value(value.raw_data(), value.size_bytes());
    }
    mine.push_back(int64_t{crc});
  }
  const Tensor row = constant(mine, TensorShape({1, int64_t(mine.size())}));
  STRATA_INTERNAL_CHECK(collectives_ != nullptr, name(), ": no collectives to compare replicas");
  return collectives_->all_gather(global_replica_id(local), row);
}

void ReplicatedStrategy::raise_if_diverged(const Tensor& table,
                                           const std::vector<Variable>& variables,
                                           int64_t step) const {
  const std::vector<int64_t> all = table.to_vector<int64_t>();
  const size_t n_vars = variables.size();
  const int replicas = num_replicas_in_sync_;
  STRATA_INTERNAL_CHECK(all.size() == n_vars * size_t(replicas), "fingerprint table of ",
                        all.size(), " entries for ", n_vars, " variables");
  std::string report;
  int diverged = 0;
  for (size_t v = 0; v < n_vars; ++v) {
    // Replicas grouped by fingerprint; the largest group (ties: the one with
    // the lowest replica) first, as the copies that most likely are right.
    std::map<int64_t, std::vector<int>> groups;
    for (int r = 0; r < replicas; ++r) groups[all[size_t(r) * n_vars + v]].push_back(r);
    if (groups.size() == 1) continue;
    std::vector<std::pair<int64_t, std::vector<int>>> ordered(groups.begin(), groups.end());
    std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
      if (a.second.size() != b.second.size()) return a.second.size() > b.second.size();
      return a.second.front() < b.second.front();
    });
    ++diverged;
    report +=
        str_cat("\n  variable '", variables[v].name(), "' (shape ", variables[v].shape(), "):");
    for (size_t g = 0; g < ordered.size(); ++g) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "%08" PRIx32, static_cast<uint32_t>(ordered[g].first));
      const bool one = ordered[g].second.size() == 1;
      report += str_cat(g == 0 ? " " : "; ", one ? "replica " : "replicas ", ordered[g].second,
                        one ? " holds" : " hold", " fingerprint ", hex);
    }
  }
  if (diverged == 0) return;
  throw DataLossError(str_cat(name(), ": the replicas' copies of ", diverged, " of ", n_vars,
                              " mirrored variable", n_vars == 1 ? "" : "s", " differ at step ",
                              step, " (check_divergence_every_n_steps = ",
                              communication_options_.check_divergence_every_n_steps, "):", report));
}

Variable ReplicatedStrategy::create_variable(const NextVariableCreator&, VariableArgs args) {
  args = internal::check_distributed_variable_args(std::move(args));
  ReplicaContext* ctx = in_cross_replica_context() ? nullptr : get_replica_context();
  if (ctx != nullptr && &ctx->strategy() == this && num_local_replicas() > 1) {
    return ctx->merge_call(
        [this](Strategy& strategy, const PerReplica<VariableArgs>& all) {
          Variable v = internal::make_distributed_variable(strategy, all.values().front());
          initialize_distributed_variable(v);
          if (is_mirrored_variable(v)) {
            MutexLock lock(mirrored_mu_);
            mirrored_.push_back(v.impl_ptr());
          }
          return v;
        },
        args);
  }
  // A multi-worker strategy broadcasts the new variable through the group:
  // the replica's queued gradient reductions go first.
  if (ctx != nullptr && &ctx->strategy() == this && !overlaps_.empty()) {
    overlaps_.at(size_t(ctx->local_replica_id()))->drain();
  }
  Variable v = internal::make_distributed_variable(*this, args);
  initialize_distributed_variable(v);
  if (is_mirrored_variable(v)) {
    MutexLock lock(mirrored_mu_);
    mirrored_.push_back(v.impl_ptr());
  }
  return v;
}

std::vector<Tensor> ReplicatedStrategy::all_reduce_in_replica(ReplicaContext& ctx, ReduceOp op,
                                                              const std::vector<Tensor>& values) {
  if (num_replicas_in_sync_ == 1) return values;
  if (!collectives_) return Strategy::all_reduce_in_replica(ctx, op, values);
  const int rank = ctx.replica_id_in_sync_group();
  if (!overlaps_.empty()) {
    internal::GradientOverlap& overlap = *overlaps_.at(size_t(ctx.local_replica_id()));
    const ScopedStepPhase wait(StepPhase::kCollectiveWait);
    if (std::optional<std::vector<Tensor>> early = overlap.take(values, op == ReduceOp::SUM)) {
      return *std::move(early);
    }
    overlap.drain();
  }
  {
    // Under a step profile the barrier's time is this replica's wait for the
    // slowest peer; what follows, every peer present, is the transfer.
    const ScopedStepPhase wait(StepPhase::kCollectiveWait);
    if (wait.active()) collectives_->barrier(rank);
  }
  ScopedStepPhase transfer(StepPhase::kCollectiveTransfer);
  if (communication_options_.deterministic_reduction) {
    return deterministic_all_reduce(rank, op, values);
  }
  const collective::ReduceOp cop = to_collective(op);
  const int64_t pack_limit = communication_options_.bytes_per_pack;
  if (pack_limit == 0) return collectives_->all_reduce(rank, values, cop);
  std::vector<Tensor> out;
  out.reserve(values.size());
  size_t begin = 0;
  while (begin < values.size()) {
    size_t end = begin;
    int64_t bytes = 0;
    // Greedy packs in order; every replica computes the same split from the same shapes.
    while (end < values.size() &&
           (end == begin || bytes + int64_t(values[end].size_bytes()) <= pack_limit)) {
      bytes += int64_t(values[end].size_bytes());
      ++end;
    }
    std::vector<Tensor> pack(values.begin() + begin, values.begin() + end);
    for (Tensor& t : collectives_->all_reduce(rank, pack, cop)) out.push_back(std::move(t));
    begin = end;
  }
  return out;
}

Tensor ReplicatedStrategy::all_gather_rows_in_replica(ReplicaContext& ctx, const Tensor& row) {
  STRATA_CHECK_ARG(row.rank() == 2 && row.shape().dim(0) == 1, name(),
                   ": all_gather_rows_in_replica: expected one row of shape [1, columns], got ",
                   row.shape());
  if (num_replicas_in_sync_ == 1) return row;
  if (!collectives_) return ctx.all_gather(row, 0);
  if (!overlaps_.empty()) overlaps_.at(size_t(ctx.local_replica_id()))->drain();
  const ScopedStepPhase transfer(StepPhase::kCollectiveTransfer);
  return collectives_->all_gather(ctx.replica_id_in_sync_group(), row);
}

Tensor ReplicatedStrategy::reduce_scatter_rows_in_replica(ReplicaContext& ctx, const Tensor& rows) {
  STRATA_CHECK_ARG(rows.rank() == 2 && rows.shape().dim(0) == num_replicas_in_sync_, name(),
                   ": reduce_scatter_rows_in_replica: expected ", num_replicas_in_sync_,
                   " rows of shape [", num_replicas_in_sync_, ", columns], got ", rows.shape());
  if (num_replicas_in_sync_ == 1) return rows;
  const int rank = ctx.replica_id_in_sync_group();
  if (!collectives_ || communication_options_.deterministic_reduction) {
    // The all-reduce sums every row; this replica keeps its own.
    const Tensor sum = all_reduce_in_replica(ctx, ReduceOp::SUM, {rows}).front();
    return sum.slice_rows(rank, rank + 1);
  }
  // The group serves one call at a time: queued gradient reductions go first.
  if (!overlaps_.empty()) overlaps_.at(size_t(ctx.local_replica_id()))->drain();
  {
    const ScopedStepPhase wait(StepPhase::kCollectiveWait);
    if (wait.active()) collectives_->barrier(rank);
  }
  const ScopedStepPhase transfer(StepPhase::kCollectiveTransfer);
  return collectives_->reduce_scatter(rank, rows, collective::ReduceOp::SUM);
}

std::shared_ptr<const std::vector<std::vector<Tensor>>> ReplicatedStrategy::exchange_in_process(
    ReplicaContext& ctx, const std::vector<Tensor>& values) {
  using Exchanged = std::vector<std::vector<Tensor>>;
  const std::shared_ptr<void> all =
      merge_replicas(ctx.local_replica_id(), &values, [](const std::vector<const void*>& payloads) {
        auto out = std::make_shared<Exchanged>();
        out->reserve(payloads.size());
        for (const void* p : payloads) out->push_back(*static_cast<const std::vector<Tensor>*>(p));
        return std::static_pointer_cast<void>(out);
      });
  return std::static_pointer_cast<const Exchanged>(all);
}

std::vector<Tensor> ReplicatedStrategy::deterministic_all_reduce(
    int rank, ReduceOp op, const std::vector<Tensor>& values) {
  // Internal arithmetic: ReplicaContext::all_reduce records the reduction's
  // gradient itself.
  const RecordingPause pause;
  std::vector<Tensor> out(values.size());
  std::map<DType, std::vector<size_t>> floating;  // by dtype, in a fixed order
  std::vector<size_t> exact;
  for (size_t i = 0; i < values.size(); ++i) {
    const DType d = values[i].dtype();
    (d == DType::float32 || d == DType::float64 ? floating[d] : exact).push_back(i);
  }
  for (const auto& [dtype, indices] : floating) {
    std::vector<Tensor> rows;
    std::vector<int64_t> sizes;
    for (size_t i : indices) {
      sizes.push_back(values[i].num_elements());
      rows.push_back(strata::reshape(values[i], {1, sizes.back()}));
    }
    const Tensor packed = rows.size() == 1 ? rows.front() : strata::concat(rows, 1);
    const std::vector<Tensor> gathered = strata::unstack(collectives_->all_gather(rank, packed), 0);
    Tensor sum = pairwise_sum(gathered);
    if (op == ReduceOp::MEAN) {
      sum =
          strata::divide(sum, strata::cast(strata::constant(double(num_replicas_in_sync_)), dtype));
    }
    const std::vector<Tensor> parts =
        indices.size() == 1 ? std::vector<Tensor>{sum} : strata::split(sum, sizes, 0);
    for (size_t j = 0; j < indices.size(); ++j) {
      out[indices[j]] = strata::reshape(parts[j], values[indices[j]].shape().dims());
    }
  }
  if (!exact.empty()) {
    std::vector<Tensor> rest;
    rest.reserve(exact.size());
    for (size_t i : exact) rest.push_back(values[i]);
    rest = collectives_->all_reduce(rank, rest, to_collective(op));
    for (size_t j = 0; j < exact.size(); ++j) out[exact[j]] = rest[j];
  }
  return out;
}

std::shared_ptr<void> ReplicatedStrategy::merge_replicas(int local_replica, const void* payload,
                                                         const MergeFn& merge) {
  // The merge function may use the group (a new variable's broadcast): no
  // replica's gradient reduction may still be queued then.
  if (!overlaps_.empty()) overlaps_.at(size_t(local_replica))->drain();
  return merge_barrier_->arrive(local_replica, payload, merge);
}

}  // namespace strata::distribute
