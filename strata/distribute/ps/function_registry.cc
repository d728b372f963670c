#include "strata/distribute/ps/function_registry.h"

#include <map>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/distribute/sharded_variable.h"

namespace strata::distribute::ps {

namespace {
const char* kind_name(const FunctionArgs::Value& v) {
  switch (v.index()) {
    case 0: return "Tensor";
    case 1: return "Variable";
    default: return "Iterator";
  }
}
}  // namespace

const FunctionArgs::Value& FunctionArgs::at(size_t i, const char* kind) const {
  STRATA_CHECK_ARG(i < values_.size(), "function '", function_, "': expected an argument ", i, " (",
                   kind, "), got ", values_.size(), " arguments");
  return values_[i];
}

const Tensor& FunctionArgs::tensor(size_t i) const {
  const Value& v = at(i, "Tensor");
  STRATA_CHECK_ARG(std::holds_alternative<Tensor>(v), "function '", function_,
                   "': expected argument ", i, " to be a Tensor, got a ", kind_name(v));
  return std::get<Tensor>(v);
}

const Variable& FunctionArgs::variable(size_t i) const {
  const Value& v = at(i, "Variable");
  STRATA_CHECK_ARG(std::holds_alternative<Variable>(v), "function '", function_,
                   "': expected argument ", i, " to be a Variable, got a ", kind_name(v));
  return std::get<Variable>(v);
}

ShardedVariable FunctionArgs::sharded_variable(size_t i) const {
  const Variable& v = variable(i);
  std::optional<ShardedVariable> sharded = ShardedVariable::from_variable(v);
  STRATA_CHECK_ARG(sharded.has_value(), "function '", function_, "': expected argument ", i,
                   " to be a partitioned (sharded) variable, got ", v.to_string());
  return *sharded;
}

data::Iterator& FunctionArgs::iterator(size_t i) const {
  const Value& v = at(i, "Iterator");
  STRATA_CHECK_ARG(std::holds_alternative<data::Iterator*>(v), "function '", function_,
                   "': expected argument ", i, " to be a per-worker Iterator, got a ",
                   kind_name(v));
  return *std::get<data::Iterator*>(v);
}

namespace {
thread_local int t_worker_index = -1;
}  // namespace

int current_worker_index() {
  STRATA_CHECK(FAILED_PRECONDITION, t_worker_index >= 0,
               "current_worker_index: not inside a closure scheduled by a ClusterCoordinator");
  return t_worker_index;
}

bool internal::in_closure() noexcept { return t_worker_index >= 0; }

internal::CurrentWorkerScope::CurrentWorkerScope(int index) : outer_(t_worker_index) {
  t_worker_index = index;
}
internal::CurrentWorkerScope::~CurrentWorkerScope() { t_worker_index = outer_; }

struct FunctionRegistry::State {
  mutable Mutex mu;
  std::map<std::string, std::shared_ptr<const RegisteredFunction>> functions STRATA_GUARDED_BY(mu);
  std::map<std::string, std::shared_ptr<const DatasetFunction>> dataset_functions
      STRATA_GUARDED_BY(mu);
};

FunctionRegistry& FunctionRegistry::global() {
  static FunctionRegistry registry;
  return registry;
}

FunctionRegistry::State& FunctionRegistry::state() const {
  // Function-local so registrars in other translation units can run first.
  static State s;
  return s;
}

void FunctionRegistry::add_function(const std::string& name, RegisteredFunction fn) {
  STRATA_CHECK_ARG(!name.empty(), "FunctionRegistry: expected a non-empty function name");
  STRATA_CHECK_ARG(fn != nullptr, "FunctionRegistry: function '", name, "' is empty");
  State& s = state();
  MutexLock lock(s.mu);
  STRATA_CHECK(ALREADY_EXISTS, !s.functions.contains(name), "FunctionRegistry: function '", name,
               "' is already registered");
  s.functions.emplace(name, std::make_shared<const RegisteredFunction>(std::move(fn)));
}

void FunctionRegistry::add_dataset_function(const std::string& name, DatasetFunction fn) {
  STRATA_CHECK_ARG(!name.empty(), "FunctionRegistry: expected a non-empty dataset function name");
  STRATA_CHECK_ARG(fn != nullptr, "FunctionRegistry: dataset function '", name, "' is empty");
  State& s = state();
  MutexLock lock(s.mu);
  STRATA_CHECK(ALREADY_EXISTS, !s.dataset_functions.contains(name),
               "FunctionRegistry: dataset function '", name, "' is already registered");
  s.dataset_functions.emplace(name, std::make_shared<const DatasetFunction>(std::move(fn)));
}

std::shared_ptr<const RegisteredFunction> FunctionRegistry::find_function(
    const std::string& name) const {
  State& s = state();
  MutexLock lock(s.mu);
  auto it = s.functions.find(name);
  return it == s.functions.end() ? nullptr : it->second;
}

std::shared_ptr<const DatasetFunction> FunctionRegistry::find_dataset_function(
    const std::string& name) const {
  State& s = state();
  MutexLock lock(s.mu);
  auto it = s.dataset_functions.find(name);
  return it == s.dataset_functions.end() ? nullptr : it->second;
}

std::shared_ptr<const RegisteredFunction> FunctionRegistry::function(
    const std::string& name) const {
  auto fn = find_function(name);
  STRATA_CHECK(NOT_FOUND, fn != nullptr, "function '", name,
               "' is not registered in this process (STRATA_REGISTER_FUNCTION(", name, ", ...))");
  return fn;
}

std::shared_ptr<const DatasetFunction> FunctionRegistry::dataset_function(
    const std::string& name) const {
  auto fn = find_dataset_function(name);
  STRATA_CHECK(NOT_FOUND, fn != nullptr, "dataset function '", name,
               "' is not registered in this process (STRATA_REGISTER_DATASET_FUNCTION(", name,
               ", ...))");
  return fn;
}

}  // namespace strata::distribute::ps
