#pragma once
// The function registry of ParameterServerStrategy: C++ functions cannot be
// shipped over the wire, so a closure names a function registered in every
// process of the job (the same program runs everywhere, as TF's).
//
//   std::vector<strata::Tensor> train_step(const sd::ps::FunctionArgs& args) {
//     const strata::Variable& w = args.variable(0);      // lives on a ps task
//     strata::data::Element batch = args.iterator(1).get_next();
//     ...                                               // reads/updates go to the ps
//     return {loss};
//   }
//   STRATA_REGISTER_FUNCTION(train_step, train_step);
//   STRATA_REGISTER_DATASET_FUNCTION(make_data, [](const sd::InputContext& ctx) { ... });
//   coordinator.schedule("train_step", {w, per_worker_iterator});
//
// A function receives its arguments as typed values (Tensor, Variable,
// per-worker Iterator) and returns tensors (the RemoteValue's result).
// Thread-safety: registration and lookup are thread-safe; a function may run on
// several threads at once (one per concurrent closure) and must allow it.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/core/variable.h"
#include "strata/data/dataset.h"
#include "strata/distribute/input_context.h"

namespace strata::distribute {
class ShardedVariable;
}  // namespace strata::distribute

namespace strata::distribute::ps {

// The arguments of one closure, as the function sees them on its worker.
class FunctionArgs {
 public:
  using Value = std::variant<Tensor, Variable, data::Iterator*>;
  FunctionArgs(std::string function, std::vector<Value> values)
      : function_(std::move(function)), values_(std::move(values)) {}

  size_t size() const noexcept { return values_.size(); }
  // The i-th argument as a tensor / variable / per-worker iterator;
  // InvalidArgumentError naming the function, the index and the actual kind
  // when it is out of range or of another kind.
  const Tensor& tensor(size_t i) const;
  const Variable& variable(size_t i) const;
  // A partitioned variable argument (the strategy's variable_partitioner
  // split it): its shards, each a handle to its own ps.
  ShardedVariable sharded_variable(size_t i) const;
  data::Iterator& iterator(size_t i) const;

 private:
  const Value& at(size_t i, const char* kind) const;

  std::string function_;
  std::vector<Value> values_;
};

using RegisteredFunction = std::function<std::vector<Tensor>(const FunctionArgs&)>;
using DatasetFunction = std::function<data::Dataset(const InputContext&)>;

// Process-wide registry. add_* with an empty name or an existing name is
// InvalidArgumentError / AlreadyExistsError; find_* return nullptr when absent.
class FunctionRegistry {
 public:
  static FunctionRegistry& global();

  void add_function(const std::string& name, RegisteredFunction fn);
  void add_dataset_function(const std::string& name, DatasetFunction fn);
  std::shared_ptr<const RegisteredFunction> find_function(const std::string& name) const;
  std::shared_ptr<const DatasetFunction> find_dataset_function(const std::string& name) const;
  // NotFoundError ("<kind> '<name>' is not registered (STRATA_REGISTER_...)") when absent.
  std::shared_ptr<const RegisteredFunction> function(const std::string& name) const;
  std::shared_ptr<const DatasetFunction> dataset_function(const std::string& name) const;

 private:
  FunctionRegistry() = default;
  struct State;
  State& state() const;
};

// tf.distribute.coordinator.experimental_get_current_worker_index: the index
// of the worker running the current closure; FailedPreconditionError outside
// a closure.
int current_worker_index();

namespace internal {
// True while this thread runs a closure (inside a CurrentWorkerScope).
bool in_closure() noexcept;

// RAII: marks this thread as running a closure on worker `index`.
class CurrentWorkerScope {
 public:
  explicit CurrentWorkerScope(int index);
  ~CurrentWorkerScope();
  CurrentWorkerScope(const CurrentWorkerScope&) = delete;
  CurrentWorkerScope& operator=(const CurrentWorkerScope&) = delete;

 private:
  int outer_;
};

struct FunctionRegistrar {
  FunctionRegistrar(const char* name, RegisteredFunction fn) {
    FunctionRegistry::global().add_function(name, std::move(fn));
  }
};
struct DatasetFunctionRegistrar {
  DatasetFunctionRegistrar(const char* name, DatasetFunction fn) {
    FunctionRegistry::global().add_dataset_function(name, std::move(fn));
  }
};
}  // namespace internal

}  // namespace strata::distribute::ps

// Registers `fn` (callable as std::vector<Tensor>(const FunctionArgs&)) under
// the name `name` (an identifier) at static-initialisation time. Use it in the
// program's own translation units (a static library's unreferenced object
// would be dropped by the linker).
#define STRATA_REGISTER_FUNCTION(name, fn) \
  static const ::strata::distribute::ps::internal::FunctionRegistrar strata_ps_fn_##name(#name, fn)
#define STRATA_REGISTER_DATASET_FUNCTION(name, fn)                                               \
  static const ::strata::distribute::ps::internal::DatasetFunctionRegistrar strata_ps_ds_##name( \
      #name, fn)
