#pragma once
// What a training loop needs of tf.distribute.experimental.coordinator's
// ClusterCoordinator, without naming the strategy behind it. A strategy whose
// extended().should_use_with_coordinator() is true (ParameterServerStrategy)
// trains by scheduling closures on remote workers instead of strategy.run on
// local replicas; extended().make_coordinator() gives the coordinator.
//
//   sd::StrategyExtended& extended = strategy.extended();
//   if (extended.should_use_with_coordinator()) {
//     std::unique_ptr<sd::Coordinator> coordinator = extended.make_coordinator();
//     sd::PerWorkerIterator it = coordinator->create_per_worker_iterator("make_data");
//     for (int step = 0; step < 100; ++step)
//       coordinator->schedule_closure("train_step", {w, it});   // returns at once
//     coordinator->join();                                       // every closure finished
//   }
//
// Closures and dataset functions are named: C++ functions cannot travel, so
// every process registers them under the same names (the parameter-server
// target's function registry). The concrete coordinator
// (strata/distribute/ps/cluster_coordinator.h) states the failure handling.
//
// Thread-safety: as the concrete coordinator (thread-safe); normally driven by
// the one training thread.

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/core/variable.h"

namespace strata::distribute {

// An iterator over a per-worker dataset: each worker iterates its own copy.
class PerWorkerIterator {
 public:
  int64_t id() const noexcept { return id_; }
  const std::string& dataset_function() const noexcept { return dataset_function_; }

 private:
  friend class PerWorkerDataset;
  PerWorkerIterator(int64_t id, std::string fn) : id_(id), dataset_function_(std::move(fn)) {}
  int64_t id_;
  std::string dataset_function_;
};

// tf.distribute.experimental.coordinator.PerWorkerValues: one value per
// worker, in worker order. As an argument of a scheduled closure, the function
// running on worker w gets values()[w], as TF passes each worker its own
// component. A per-worker iterator (PerWorkerIterator, what
// `iter(per_worker_dataset)` returns) is the other per-worker argument.
// schedule raises InvalidArgumentError when the count is not the number of
// workers.
class PerWorkerValues {
 public:
  explicit PerWorkerValues(std::vector<Tensor> values) : values_(std::move(values)) {}
  const std::vector<Tensor>& values() const noexcept { return values_; }

 private:
  std::vector<Tensor> values_;
};

// One argument of a scheduled closure: a tensor, a variable of the strategy
// (passed by reference: the worker reads and updates it where it lives), a
// per-worker iterator, or per-worker values.
using ClosureArgument = std::variant<Tensor, Variable, PerWorkerIterator, PerWorkerValues>;

class Coordinator {
 public:
  virtual ~Coordinator() = default;

  // The workers closures run on.
  virtual int num_workers() const = 0;
  // A fresh iterator, on every worker, over the registered dataset function
  // `dataset_function` called there with InputContext(#workers, worker
  // index). NotFoundError when it is not registered in this process.
  virtual PerWorkerIterator create_per_worker_iterator(const std::string& dataset_function) = 0;
  // Queues the registered function `function` with `args` and returns at
  // once; its error, if any, is raised by a later schedule_closure or join.
  // NotFoundError for an unregistered name.
  virtual void schedule_closure(const std::string& function, std::vector<ClosureArgument> args) = 0;
  // Blocks until every scheduled closure finished; raises the first error.
  virtual void join() = 0;
};

}  // namespace strata::distribute
