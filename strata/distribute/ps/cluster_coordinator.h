#pragma once
// tf.distribute.experimental.coordinator.ClusterCoordinator (spec §9): the
// chief's scheduler of closures on the workers of a ParameterServerStrategy.
//
//   sd::ClusterCoordinator coordinator(strategy);
//   auto per_worker = coordinator.create_per_worker_dataset("make_data");  // registered name
//   auto iterator = per_worker.iter();
//   std::vector<sd::RemoteValue<Tensor>> losses;
//   for (int step = 0; step < 100; ++step)
//     losses.push_back(coordinator.schedule("train_step", {w, b, iterator}));  // at once
//   coordinator.join();                            // every closure finished
//   Tensor loss = losses.back().fetch();           // the closure's result (also get())
//
// schedule(name, args) checks that `name` is registered in this process
// (NotFoundError otherwise), queues the closure and returns its RemoteValue at
// once. One thread per worker takes the next queued closure whenever its worker
// is free (at most one RPC in flight per worker, as TF), so closures run on
// any free worker, in no particular order.
//
// Failures:
//   - A worker that cannot be reached (gRPC UNAVAILABLE / CANCELLED by its
//     shutdown / DEADLINE_EXCEEDED) has its closure put back at the head of the
//     queue for another worker: execution is at-least-once. The worker's
//     thread then pings it (every ping_interval) and takes closures again once
//     it answers; its per-worker iterators are re-created on the restarted
//     task. A closure is attempted at most max_attempts times; when every
//     worker has been unreachable for worker_unavailable_timeout the
//     coordinator fails with UnavailableError.
//   - A closure whose worker reports it could not reach a ps fails the
//     coordinator with UnavailableError naming the ps (no recovery, as TF:
//     restart from a checkpoint).
//   - Any other closure error (the function raised) is not retried.
//   The first such error is raised by the next schedule / join / done, which
//   then clears it; queued closures are cancelled (their RemoteValues raise
//   CancelledError). Closures already running finish.
//
// Thread-safety: thread-safe; schedule/join/done are normally called by the
// one training thread. Destruction cancels queued and in-flight closures and
// joins the worker threads.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/core/variable.h"
#include "strata/distribute/coordinator.h"
#include "strata/distribute/ps/parameter_server_strategy.h"

namespace strata::distribute {

struct ClusterCoordinatorOptions {
  std::chrono::milliseconds closure_timeout{300000};            // deadline of each closure RPC
  int max_attempts = 16;                                        // per closure (worker failures)
  std::chrono::milliseconds worker_unavailable_timeout{60000};  // every worker down this long
  std::chrono::milliseconds ping_interval{200};                 // probing an unreachable worker
};

namespace ps::internal {
// The shared state of a scheduled closure's result (cluster_coordinator.cc).
struct RemoteValueState;
// Blocks until the closure finished (at most `timeout`, default the
// coordinator's bound on a closure) and returns its result tensors or
// re-throws its error. FailedPreconditionError for a null state.
std::vector<Tensor> remote_value_results(const std::shared_ptr<RemoteValueState>& state,
                                         std::optional<std::chrono::milliseconds> timeout);
bool remote_value_ready(const std::shared_ptr<RemoteValueState>& state);
// The one tensor of `results`; InvalidArgumentError naming the count otherwise.
Tensor single_result(std::vector<Tensor> results);
}  // namespace ps::internal

// The result of a scheduled closure (tf.distribute.experimental.coordinator.RemoteValue).
// A registered function returns a list of tensors: RemoteValue<> (that is
// RemoteValue<std::vector<Tensor>>) gives the list; RemoteValue<Tensor> the
// one tensor of a function that returns one (InvalidArgumentError naming the
// count otherwise). schedule returns a RemoteValue<>, which converts to either:
//   sd::RemoteValue<Tensor> loss = coordinator.schedule("train_step", {it});
//   loss.fetch();   // TF's fetch(); get() is the same (Strata's tensors are host values)
// A cheap, thread-safe handle.
template <typename T = std::vector<Tensor>>
class RemoteValue {
  static_assert(std::is_same_v<T, Tensor> || std::is_same_v<T, std::vector<Tensor>>,
                "RemoteValue<T>: T is Tensor or std::vector<Tensor>");

 public:
  RemoteValue() = default;
  explicit RemoteValue(std::shared_ptr<ps::internal::RemoteValueState> state)
      : state_(std::move(state)) {}
  // The same closure's result seen as another T.
  template <typename U>
  RemoteValue(const RemoteValue<U>& other)  // NOLINT(google-explicit-constructor)
      : state_(other.state_) {}

  // Blocks until the closure finished; its result, or its error re-thrown
  // (CancelledError if it was cancelled). Waits at most `timeout`
  // (DeadlineExceededError), default: the coordinator's bound on a closure.
  // FailedPreconditionError for an empty RemoteValue (not returned by schedule).
  T fetch(std::chrono::milliseconds timeout) const { return convert(results(timeout)); }
  T fetch() const { return convert(results(std::nullopt)); }
  // TF's get(): the result as a tensor on the coordinator; the same as fetch().
  T get(std::chrono::milliseconds timeout) const { return fetch(timeout); }
  T get() const { return fetch(); }
  // True once the closure succeeded, failed or was cancelled.
  bool is_ready() const { return ps::internal::remote_value_ready(state_); }

 private:
  template <typename>
  friend class RemoteValue;
  std::vector<Tensor> results(std::optional<std::chrono::milliseconds> timeout) const {
    return ps::internal::remote_value_results(state_, timeout);
  }
  static T convert(std::vector<Tensor> results) {
    if constexpr (std::is_same_v<T, Tensor>) {
      return ps::internal::single_result(std::move(results));
    } else {
      return results;
    }
  }

  std::shared_ptr<ps::internal::RemoteValueState> state_;
};

// What create_per_worker_dataset returns: iter() makes a fresh iterator on
// every worker (created on a worker before the first closure that uses it runs there).
class PerWorkerDataset {
 public:
  PerWorkerIterator iter() const;
  const std::string& dataset_function() const noexcept { return dataset_function_; }

 private:
  friend class ClusterCoordinator;
  PerWorkerDataset(std::string fn, std::shared_ptr<std::atomic<int64_t>> next_id)
      : dataset_function_(std::move(fn)), next_id_(std::move(next_id)) {}
  std::string dataset_function_;
  std::shared_ptr<std::atomic<int64_t>> next_id_;
};

class ClusterCoordinator final : public Coordinator {
 public:
  explicit ClusterCoordinator(ParameterServerStrategy& strategy,
                              ClusterCoordinatorOptions options = {});
  ~ClusterCoordinator() override;
  ClusterCoordinator(const ClusterCoordinator&) = delete;
  ClusterCoordinator& operator=(const ClusterCoordinator&) = delete;

  // Queues fn(args) and returns at once. NotFoundError for an unregistered
  // name; InvalidArgumentError for a Variable not created under a
  // ParameterServerStrategy; raises a pending coordinator error (see above).
  // A PerWorkerValues argument gives the function on worker w its w-th
  // value (InvalidArgumentError unless it has one value per worker).
  RemoteValue<> schedule(const std::string& function, std::vector<ClosureArgument> args = {});
  // Blocks until every scheduled closure finished (or was cancelled); raises
  // the first error since the last raise.
  void join() override;
  // Whether every scheduled closure finished; raises a pending error.
  bool done();
  // RemoteValue::fetch of each.
  std::vector<Tensor> fetch(const RemoteValue<>& value);
  Tensor fetch(const RemoteValue<Tensor>& value);
  std::vector<std::vector<Tensor>> fetch(const std::vector<RemoteValue<>>& values);
  std::vector<Tensor> fetch(const std::vector<RemoteValue<Tensor>>& values);
  // TF's create_per_worker_dataset with a registered dataset function (called
  // on each worker with InputContext(#workers, worker index)); NotFoundError
  // when it is not registered here.
  PerWorkerDataset create_per_worker_dataset(const std::string& dataset_function);

  ParameterServerStrategy& strategy() const noexcept { return *strategy_; }

  // The Coordinator interface (coordinator.h): the strategy's workers,
  // create_per_worker_dataset(fn).iter(), and schedule without its RemoteValue.
  int num_workers() const override;
  PerWorkerIterator create_per_worker_iterator(const std::string& dataset_function) override;
  void schedule_closure(const std::string& function, std::vector<ClosureArgument> args) override;
  // Closure attempts that failed because their worker was unreachable (retried).
  int64_t worker_failures() const;

 private:
  struct State;
  ParameterServerStrategy* strategy_;
  std::shared_ptr<std::atomic<int64_t>> next_iterator_id_;
  std::unique_ptr<State> state_;
};

}  // namespace strata::distribute
