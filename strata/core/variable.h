#pragma once
// Variable: a mutable, named value handle (tf.Variable) over a replaceable
// implementation.
//
//   strata::Variable v(strata::constant(1.f), {.name = "w", .trainable = true,
//                      .synchronization = VariableSynchronization::AUTO,
//                      .aggregation = VariableAggregation::NONE});
//   v.assign_add(strata::constant(2.f));    // in place when no reader holds the old value
//   v.value().item<float>();                // 3
//   {
//     // Every Variable constructed on this thread while `scope` lives goes
//     // through `creator` (how Strategy::scope() makes distributed variables).
//     strata::VariableCreatorScope scope([](const strata::NextVariableCreator& next,
//                                           strata::VariableArgs args) {
//       args.options.name = "prefix/" + args.options.name;
//       return next(std::move(args));
//     });
//   }
//
// A Variable is a cheap handle: copies share one VariableImpl (the same
// variable). The default implementation (LocalVariableImpl) holds one buffer
// on the device that was current at creation. Other layers provide other
// implementations (the distribute layer's MirroredVariable and
// SyncOnReadVariable) by pushing a VariableCreatorScope whose creator returns
// `Variable(std::make_shared<TheirImpl>(...))`.
//
// Reads report themselves to this thread's VariableAccessObservers (a running
// GradientTape registers one, so trainable variables read under a tape are
// watched automatically).
//
// Thread-safety: a Variable is thread-safe. LocalVariableImpl serialises
// assignments and reads under a mutex; a read returns an immutable Tensor that
// holds either the whole old or the whole new value, never a mix: an
// assignment writes in place only while no Tensor returned by a read still
// shares the buffer, and otherwise writes a fresh buffer (copy-on-write).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "strata/core/dtype.h"
#include "strata/core/tensor.h"
#include "strata/core/tensor_shape.h"

namespace strata {

// tf.VariableSynchronization; the values match VariableDef in variable.proto.
enum class VariableSynchronization : int { AUTO = 0, NONE = 1, ON_WRITE = 2, ON_READ = 3 };
// tf.VariableAggregation; the values match VariableDef in variable.proto.
enum class VariableAggregation : int { NONE = 0, SUM = 1, MEAN = 2, ONLY_FIRST_REPLICA = 3 };

std::string_view variable_synchronization_name(VariableSynchronization s) noexcept;
std::string_view variable_aggregation_name(VariableAggregation a) noexcept;

struct VariableOptions {
  std::string name = "Variable";                 // TF's default name
  std::optional<bool> trainable = std::nullopt;  // default: synchronization != ON_READ (TF)
  VariableSynchronization synchronization = VariableSynchronization::AUTO;
  VariableAggregation aggregation = VariableAggregation::NONE;
};

// What a variable creator receives: the initial value and the options.
struct VariableArgs {
  Tensor initial_value;
  VariableOptions options;
};

// The implementation behind a Variable handle. Implementations must be
// thread-safe. assign* take a value already checked for shape and dtype by
// the handle; they return nothing (reads give the new value).
class VariableImpl {
 public:
  virtual ~VariableImpl() = default;
  // The current value (for a distributed variable: the value seen in the
  // current replica or cross-replica context).
  virtual Tensor read() const = 0;
  virtual void assign(const Tensor& value) = 0;
  virtual void assign_add(const Tensor& delta) = 0;
  virtual void assign_sub(const Tensor& delta) = 0;
  // Rewrites the value in place (see Variable::update_in_place). The default
  // reads the value, lets `fn` rewrite a private copy and assigns it, which
  // keeps the implementation's assign semantics; implementations holding one
  // buffer override it to let `fn` write that buffer directly.
  virtual void update_in_place(const std::function<void(void* data)>& fn);
  virtual const std::string& name() const = 0;
  virtual const TensorShape& shape() const = 0;
  virtual DType dtype() const = 0;
  virtual const std::string& device() const = 0;
  virtual bool trainable() const = 0;
  virtual VariableSynchronization synchronization() const = 0;
  virtual VariableAggregation aggregation() const = 0;
  // TF's repr; the default is a plain variable's:
  // "<tf.Variable 'name:0' shape=() dtype=float32, numpy=1.0>".
  virtual std::string repr() const;
};

// The default implementation: one value on one device, guarded by a mutex.
// `args.options.trainable` must already be resolved (Variable does it).
std::shared_ptr<VariableImpl> make_local_variable_impl(const VariableArgs& args);

class Variable {
 public:
  // An empty handle (defined() == false); any other use raises FailedPreconditionError.
  Variable() = default;
  // Creates a variable through this thread's variable-creator stack (the
  // default creator makes a LocalVariableImpl on the current device).
  // InvalidArgumentError if `initial_value` is undefined or the options'
  // enums are out of range.
  explicit Variable(const Tensor& initial_value, VariableOptions options = {});
  // Wraps an implementation (what creators return).
  explicit Variable(std::shared_ptr<VariableImpl> impl);

  bool defined() const noexcept { return impl_ != nullptr; }

  // The current value; reported to this thread's VariableAccessObservers
  // (TF records a ReadVariableOp on the tape). read_value() is the same read.
  Tensor value() const;
  Tensor read_value() const { return value(); }

  // InvalidArgumentError naming the variable and both shapes (or dtypes) when
  // `value` does not match. assign_add/assign_sub require a numeric dtype.
  void assign(const Tensor& value) const;
  void assign_add(const Tensor& delta) const;
  void assign_sub(const Tensor& delta) const;
  // Lets `fn` rewrite the value in place: `fn(data)` gets the variable's
  // shape().num_elements() elements of dtype() (row-major), holding the
  // current value, and overwrites them with the new one; afterwards reads
  // give the new value. What an in-place training kernel (TF's
  // ResourceApplyAdam) writes through, with no temporary of the variable's
  // size. A plain variable runs `fn` under its lock on its own buffer (on a
  // fresh copy while a Tensor returned by an earlier read still shares the
  // buffer, so such tensors keep the old value); a MirroredVariable in replica
  // context with aggregation NONE forwards to the replica's component; other
  // implementations rewrite a copy and assign it. `fn` must not touch this
  // variable (it would deadlock) nor keep `data`; updates of several
  // variables may nest (lock them in the same order everywhere). If `fn`
  // throws, the value may be partly rewritten. InvalidArgumentError for a
  // string variable.
  void update_in_place(const std::function<void(void* data)>& fn) const;

  const std::string& name() const { return impl().name(); }
  const TensorShape& shape() const { return impl().shape(); }
  DType dtype() const { return impl().dtype(); }
  const std::string& device() const { return impl().device(); }
  bool trainable() const { return impl().trainable(); }
  VariableSynchronization synchronization() const { return impl().synchronization(); }
  VariableAggregation aggregation() const { return impl().aggregation(); }

  // The implementation (identity of the variable: two handles are the same
  // variable iff they share it).
  const std::shared_ptr<VariableImpl>& impl_ptr() const noexcept { return impl_; }
  VariableImpl& impl() const;
  bool is_same(const Variable& other) const noexcept { return impl_ == other.impl_; }

  // TF's repr (see VariableImpl::repr); "<tf.Variable (empty handle)>" when empty.
  std::string to_string() const;

 private:
  void check_compatible(const Tensor& value, const char* who) const;

  std::shared_ptr<VariableImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Variable& v);

// --- the variable-creator stack (tf.variable_creator_scope) -------------------
// Calls the next creator down the stack (the default creator at the bottom).
using NextVariableCreator = std::function<Variable(VariableArgs)>;
using VariableCreator = std::function<Variable(const NextVariableCreator& next, VariableArgs args)>;

// Pushes `creator` on this thread's creator stack for the scope's lifetime.
// The innermost creator runs first; it may change the args, call `next`, wrap
// or replace the result. Scopes nest strictly. Thread-local: replica threads
// push their own.
class VariableCreatorScope {
 public:
  explicit VariableCreatorScope(VariableCreator creator);
  ~VariableCreatorScope();
  VariableCreatorScope(const VariableCreatorScope&) = delete;
  VariableCreatorScope& operator=(const VariableCreatorScope&) = delete;
};

// --- variable-access observers (part of the tape's thread-local context) ------
// Receives every Variable::value() on the thread while registered.
class VariableAccessObserver {
 public:
  virtual ~VariableAccessObserver() = default;
  virtual void variable_accessed(const Variable& variable, const Tensor& value) = 0;
};

// Registers `observer` on this thread for the scope's lifetime (GradientTape
// holds one while it records). Scopes nest strictly.
class VariableAccessObserverScope {
 public:
  explicit VariableAccessObserverScope(VariableAccessObserver& observer);
  ~VariableAccessObserverScope();
  VariableAccessObserverScope(const VariableAccessObserverScope&) = delete;
  VariableAccessObserverScope& operator=(const VariableAccessObserverScope&) = delete;

 private:
  VariableAccessObserver* observer_;
};

}  // namespace strata
