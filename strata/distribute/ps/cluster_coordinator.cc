#include "strata/distribute/ps/cluster_coordinator.h"

#include <deque>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/distribute/ps/function_registry.h"
#include "strata/distribute/ps/internal/remote_variable.h"
#include "strata/distribute/ps/internal/rpc.h"
#include "strata/distribute/sharded_variable.h"

namespace strata::distribute {

namespace pi = ps::internal;
using Clock = std::chrono::steady_clock;

}  // namespace strata::distribute

namespace strata::distribute::ps::internal {

// An error carried from a coordinator thread to the caller: its code and
// message, raised as a fresh exception on the thread that reports it. (An
// exception object shared between threads would be freed by whichever thread
// drops the last exception_ptr, a hand-off ThreadSanitizer cannot see through
// the uninstrumented C++ runtime.)
struct ErrorRecord {
  ErrorCode code = ErrorCode::UNKNOWN;
  std::string message;

  [[noreturn]] void raise() const { throw_error(code, message); }
};

struct RemoteValueState {
  explicit RemoteValueState(std::chrono::milliseconds bound) : wait_bound(bound) {}
  const std::chrono::milliseconds wait_bound;
  mutable Mutex mu;
  mutable CondVar cv;
  bool ready STRATA_GUARDED_BY(mu) = false;
  std::vector<Tensor> results STRATA_GUARDED_BY(mu);
  std::optional<ErrorRecord> error STRATA_GUARDED_BY(mu);

  void set_results(std::vector<Tensor> r) {
    MutexLock lock(mu);
    results = std::move(r);
    ready = true;
    cv.notify_all();
  }
  void set_error(ErrorRecord e) {
    MutexLock lock(mu);
    error = std::move(e);
    ready = true;
    cv.notify_all();
  }
};

std::vector<Tensor> remote_value_results(const std::shared_ptr<RemoteValueState>& state,
                                         std::optional<std::chrono::milliseconds> timeout) {
  STRATA_CHECK(FAILED_PRECONDITION, state != nullptr,
               "RemoteValue::fetch: an empty RemoteValue (not returned by schedule)");
  RemoteValueState& s = *state;
  const std::chrono::milliseconds bound = timeout.value_or(s.wait_bound);
  MutexLock lock(s.mu);
  STRATA_CHECK(DEADLINE_EXCEEDED,
               s.cv.wait_for(s.mu, bound, [&]() STRATA_REQUIRES(s.mu) { return s.ready; }),
               "RemoteValue::fetch: the closure did not finish within ", bound.count(), " ms");
  if (s.error) s.error->raise();
  return s.results;
}

bool remote_value_ready(const std::shared_ptr<RemoteValueState>& state) {
  if (!state) return false;
  MutexLock lock(state->mu);
  return state->ready;
}

Tensor single_result(std::vector<Tensor> results) {
  STRATA_CHECK_ARG(results.size() == 1,
                   "RemoteValue<Tensor>: expected the function to return one tensor, got ",
                   results.size());
  return std::move(results.front());
}

}  // namespace strata::distribute::ps::internal

namespace strata::distribute {

PerWorkerIterator PerWorkerDataset::iter() const {
  return PerWorkerIterator(next_id_->fetch_add(1), dataset_function_);
}

namespace {

struct Closure {
  std::string function;
  std::vector<pi::WireArg> args;
  std::vector<PerWorkerIterator> iterators;  // created on a worker before the closure runs there
  // PerWorkerValues arguments: (argument index, one value per worker).
  std::vector<std::pair<size_t, std::vector<Tensor>>> per_worker;
  std::shared_ptr<pi::RemoteValueState> value;
  int attempts = 0;
};

// gRPC statuses that mean the worker itself is gone or hung (TF retries these).
bool is_worker_failure(ErrorCode code) {
  return code == ErrorCode::UNAVAILABLE || code == ErrorCode::CANCELLED ||
         code == ErrorCode::DEADLINE_EXCEEDED;
}

pi::ErrorRecord make_error(ErrorCode code, std::string message) {
  return pi::ErrorRecord{.code = code, .message = std::move(message)};
}

}  // namespace

struct ClusterCoordinator::State {
  ClusterCoordinatorOptions options;
  std::vector<std::string> workers;
  std::chrono::milliseconds rpc_timeout;

  Mutex mu;
  CondVar cv;  // queue, in-flight count, errors, stopping
  std::deque<std::shared_ptr<Closure>> queue STRATA_GUARDED_BY(mu);
  int inflight STRATA_GUARDED_BY(mu) = 0;
  std::optional<pi::ErrorRecord> error STRATA_GUARDED_BY(mu);
  bool stopping STRATA_GUARDED_BY(mu) = false;
  int64_t worker_failures STRATA_GUARDED_BY(mu) = 0;
  std::vector<bool> worker_up STRATA_GUARDED_BY(mu);
  std::optional<Clock::time_point> all_down_since STRATA_GUARDED_BY(mu);

  std::vector<std::unique_ptr<pi::RpcCancellation>> cancellations;  // one per worker
  std::vector<std::jthread> threads;

  // Records the first non-retryable error and cancels the queued closures.
  void fail_locked(const pi::ErrorRecord& e, const std::string& why) STRATA_REQUIRES(mu) {
    if (!error) error = e;
    for (auto& c : queue)
      c->value->set_error(make_error(ErrorCode::CANCELLED,
                                     str_cat("closure '", c->function, "' was cancelled: ", why)));
    queue.clear();
    cv.notify_all();
  }

  void set_worker_up(int w, bool up) STRATA_REQUIRES(mu) {
    worker_up[w] = up;
    bool any_up = false;
    for (bool u : worker_up) any_up = any_up || u;
    if (any_up) {
      all_down_since.reset();
      return;
    }
    const Clock::time_point now = Clock::now();
    if (!all_down_since) all_down_since = now;
    if (now - *all_down_since > options.worker_unavailable_timeout && !queue.empty()) {
      const std::string why = str_cat("no worker has been reachable for ",
                                      options.worker_unavailable_timeout.count(), " ms");
      fail_locked(make_error(ErrorCode::UNAVAILABLE, str_cat("ClusterCoordinator: ", why)), why);
    }
  }

  void run_worker(int w) {
    auto client = pi::TaskClient::get(workers[w]);
    std::set<int64_t> iterators_here;  // per-worker iterators made on this worker incarnation
    std::optional<int64_t> incarnation;
    bool up = true;
    for (;;) {
      if (!up) {
        try {
          const pi::PingInfo info =
              client->ping(std::max(options.ping_interval, std::chrono::milliseconds(500)));
          if (incarnation != info.incarnation) iterators_here.clear();
          incarnation = info.incarnation;
          up = true;
          MutexLock lock(mu);
          set_worker_up(w, true);
        } catch (const Error&) {
          MutexLock lock(mu);
          set_worker_up(w, false);
          if (cv.wait_for(mu, options.ping_interval,
                          [&]() STRATA_REQUIRES(mu) { return stopping; }))
            return;
          continue;
        }
      }
      std::shared_ptr<Closure> closure;
      {
        MutexLock lock(mu);
        // Idle until there is a closure to run: not a wait on a result, so no deadline.
        cv.wait(mu, [&]() STRATA_REQUIRES(mu) { return stopping || !queue.empty(); });
        if (stopping) return;
        closure = std::move(queue.front());
        queue.pop_front();
        ++inflight;
      }
      if (!incarnation) {
        // Learn the worker's incarnation, so a restart is noticed later.
        try {
          incarnation = client->ping(rpc_timeout).incarnation;
        } catch (const Error&) {
        }
      }
      std::optional<pi::ErrorRecord> failure;  // non-retryable
      bool retry = false;
      try {
        for (const PerWorkerIterator& it : closure->iterators) {
          if (iterators_here.contains(it.id())) continue;
          client->create_iterator(it.id(), it.dataset_function(), static_cast<int>(workers.size()),
                                  w, rpc_timeout);
          iterators_here.insert(it.id());
        }
        std::vector<pi::WireArg> args = closure->args;
        for (const auto& [index, values] : closure->per_worker) args[index] = values[w];
        pi::ClosureOutcome outcome = client->run_closure(
            closure->function, args, options.closure_timeout, cancellations[w].get());
        if (outcome.code == ErrorCode::OK) {
          closure->value->set_results(std::move(outcome.results));
        } else if (!outcome.failed_ps.empty()) {
          failure =
              make_error(ErrorCode::UNAVAILABLE,
                         str_cat("ps task at ", outcome.failed_ps, " is unavailable (closure '",
                                 closure->function, "' on worker ", w, "): ", outcome.message));
        } else {
          failure = make_error(outcome.code, str_cat(outcome.message, " (closure '",
                                                     closure->function, "' on worker ", w, ")"));
        }
      } catch (const Error& e) {
        if (cancellations[w]->cancelled()) {
          failure = make_error(ErrorCode::CANCELLED,
                               str_cat("closure '", closure->function,
                                       "' was cancelled: the ClusterCoordinator was destroyed"));
        } else if (is_worker_failure(e.code())) {
          up = false;
          iterators_here.clear();
          if (closure->attempts + 1 < options.max_attempts) {
            retry = true;
          } else {
            failure =
                make_error(e.code(), str_cat("closure '", closure->function, "' failed on ",
                                             options.max_attempts, " attempts; last: ", e.what()));
          }
        } else {
          failure = make_error(e.code(), e.what());
        }
      }
      MutexLock lock(mu);
      --inflight;
      if (!up) {
        ++worker_failures;
        set_worker_up(w, false);
      }
      if (retry) {
        ++closure->attempts;
        if (stopping || error) {
          closure->value->set_error(make_error(
              ErrorCode::CANCELLED, str_cat("closure '", closure->function, "' was cancelled")));
        } else {
          queue.push_front(std::move(closure));  // at-least-once: another worker runs it
        }
      } else if (failure) {
        closure->value->set_error(*failure);
        fail_locked(*failure, str_cat("an earlier closure failed: ", failure->message));
      }
      cv.notify_all();
    }
  }

  // Raises (and clears) the pending error.
  void raise_locked() STRATA_REQUIRES(mu) {
    if (!error) return;
    const pi::ErrorRecord e = std::move(*error);
    error.reset();
    e.raise();
  }
};

ClusterCoordinator::ClusterCoordinator(ParameterServerStrategy& strategy,
                                       ClusterCoordinatorOptions options)
    : strategy_(&strategy),
      next_iterator_id_(std::make_shared<std::atomic<int64_t>>(0)),
      state_(std::make_unique<State>()) {
  STRATA_CHECK_ARG(options.closure_timeout.count() > 0,
                   "ClusterCoordinatorOptions.closure_timeout must be > 0, got ",
                   options.closure_timeout.count(), " ms");
  STRATA_CHECK_ARG(options.max_attempts >= 1,
                   "ClusterCoordinatorOptions.max_attempts must be >= 1, got ",
                   options.max_attempts);
  STRATA_CHECK_ARG(options.ping_interval.count() > 0,
                   "ClusterCoordinatorOptions.ping_interval must be > 0, got ",
                   options.ping_interval.count(), " ms");
  State& s = *state_;
  s.options = options;
  s.workers = strategy.worker_targets();
  s.rpc_timeout = strategy.rpc_timeout();
  s.worker_up.assign(s.workers.size(), true);
  for (size_t w = 0; w < s.workers.size(); ++w)
    s.cancellations.push_back(std::make_unique<pi::RpcCancellation>());
  for (size_t w = 0; w < s.workers.size(); ++w)
    s.threads.emplace_back([&s, w] { s.run_worker(static_cast<int>(w)); });
}

ClusterCoordinator::~ClusterCoordinator() {
  State& s = *state_;
  {
    MutexLock lock(s.mu);
    s.stopping = true;
    for (auto& c : s.queue)
      c->value->set_error(make_error(
          ErrorCode::CANCELLED, str_cat("closure '", c->function,
                                        "' was cancelled: the ClusterCoordinator was destroyed")));
    s.queue.clear();
    s.cv.notify_all();
  }
  for (auto& c : s.cancellations) c->cancel();
  s.threads.clear();  // joins
}

RemoteValue<> ClusterCoordinator::schedule(const std::string& function,
                                           std::vector<ClosureArgument> args) {
  State& s = *state_;
  {
    MutexLock lock(s.mu);
    s.raise_locked();
  }
  ps::FunctionRegistry::global().function(function);  // NotFoundError on the chief, at once
  auto closure = std::make_shared<Closure>();
  closure->function = function;
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto* t = std::get_if<Tensor>(&args[i])) {
      STRATA_CHECK_ARG(t->defined(), "ClusterCoordinator.schedule('", function, "'): argument ", i,
                       " is an undefined Tensor");
      closure->args.emplace_back(*t);
    } else if (auto* v = std::get_if<Variable>(&args[i]); v != nullptr && is_sharded_variable(*v)) {
      const ShardedVariable sharded = *ShardedVariable::from_variable(*v);
      pi::ShardedVariableInfo wire{sharded.name(), {}};
      for (const Variable& shard : sharded.variables()) {
        const pi::RemoteVariableInfo* info = pi::remote_variable_info(shard);
        STRATA_CHECK_ARG(info != nullptr, "ClusterCoordinator.schedule('", function,
                         "'): argument ", i, " is a ShardedVariable whose shard ", shard.name(),
                         " was not created under ParameterServerStrategy.scope()");
        wire.shards.push_back(*info);
      }
      closure->args.emplace_back(std::move(wire));
    } else if (v != nullptr) {
      const pi::RemoteVariableInfo* info = pi::remote_variable_info(*v);
      STRATA_CHECK_ARG(
          info != nullptr, "ClusterCoordinator.schedule('", function, "'): argument ", i,
          " is a Variable not created under ParameterServerStrategy.scope(): ", v->to_string());
      closure->args.emplace_back(*info);
    } else if (auto* it = std::get_if<PerWorkerIterator>(&args[i])) {
      closure->args.emplace_back(pi::IteratorRef{it->id()});
      closure->iterators.push_back(*it);
    } else {
      const auto& per_worker = std::get<PerWorkerValues>(args[i]);
      STRATA_CHECK_ARG(per_worker.values().size() == s.workers.size(),
                       "ClusterCoordinator.schedule('", function, "'): argument ", i,
                       " is a PerWorkerValues of ", per_worker.values().size(),
                       " values; expected one per worker (", s.workers.size(), ")");
      for (size_t w = 0; w < per_worker.values().size(); ++w) {
        STRATA_CHECK_ARG(per_worker.values()[w].defined(), "ClusterCoordinator.schedule('",
                         function, "'): argument ", i, " has an undefined Tensor for worker ", w);
      }
      closure->args.emplace_back(per_worker.values().front());  // replaced per worker
      closure->per_worker.emplace_back(i, per_worker.values());
    }
  }
  const auto bound = s.options.closure_timeout * s.options.max_attempts +
                     s.options.worker_unavailable_timeout + s.rpc_timeout;
  closure->value = std::make_shared<pi::RemoteValueState>(
      std::chrono::duration_cast<std::chrono::milliseconds>(bound));
  RemoteValue<> value(closure->value);
  MutexLock lock(s.mu);
  s.queue.push_back(std::move(closure));
  s.cv.notify_all();
  return value;
}

void ClusterCoordinator::join() {
  State& s = *state_;
  MutexLock lock(s.mu);
  // Bounded: each closure ends by its deadline, its attempts, or the
  // all-workers-unavailable timeout, which cancels the queue.
  s.cv.wait(s.mu, [&]() STRATA_REQUIRES(s.mu) {
    return s.stopping || (s.queue.empty() && s.inflight == 0);
  });
  s.raise_locked();
}

bool ClusterCoordinator::done() {
  State& s = *state_;
  MutexLock lock(s.mu);
  s.raise_locked();
  return s.queue.empty() && s.inflight == 0;
}

std::vector<Tensor> ClusterCoordinator::fetch(const RemoteValue<>& value) { return value.fetch(); }

Tensor ClusterCoordinator::fetch(const RemoteValue<Tensor>& value) { return value.fetch(); }

std::vector<std::vector<Tensor>> ClusterCoordinator::fetch(
    const std::vector<RemoteValue<>>& values) {
  std::vector<std::vector<Tensor>> out;
  out.reserve(values.size());
  for (const RemoteValue<>& v : values) out.push_back(v.fetch());
  return out;
}

std::vector<Tensor> ClusterCoordinator::fetch(const std::vector<RemoteValue<Tensor>>& values) {
  std::vector<Tensor> out;
  out.reserve(values.size());
  for (const RemoteValue<Tensor>& v : values) out.push_back(v.fetch());
  return out;
}

PerWorkerDataset ClusterCoordinator::create_per_worker_dataset(
    const std::string& dataset_function) {
  ps::FunctionRegistry::global().dataset_function(dataset_function);  // NotFoundError at once
  return PerWorkerDataset(dataset_function, next_iterator_id_);
}

int64_t ClusterCoordinator::worker_failures() const {
  MutexLock lock(state_->mu);
  return state_->worker_failures;
}

int ClusterCoordinator::num_workers() const { return strategy_->num_workers(); }

PerWorkerIterator ClusterCoordinator::create_per_worker_iterator(
    const std::string& dataset_function) {
  return create_per_worker_dataset(dataset_function).iter();
}

void ClusterCoordinator::schedule_closure(const std::string& function,
                                          std::vector<ClosureArgument> args) {
  schedule(function, std::move(args));
}

}  // namespace strata::distribute
