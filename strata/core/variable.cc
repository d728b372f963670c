#include "strata/core/variable.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/allocator.h"

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/base/str_cat.h"
#include "strata/core/device.h"

namespace strata {

namespace {

// Two of the documented thread-local contexts: the variable-creator stack and
// the variable-access observers (the latter belongs to the tape stack).
thread_local std::vector<VariableCreator> t_creators;
thread_local std::vector<VariableAccessObserver*> t_observers;

// out[i] = a[i] + sign * b[i] over `n` elements of numeric dtype `d`.
void add_into(DType d, void* out, const void* a, const void* b, int64_t n, int sign) {
  dispatch_numeric(d, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw UnimplementedError("Variable.assign_add: bool variables cannot be added to");
    } else {
      T* o = static_cast<T*>(out);
      const T* x = static_cast<const T*>(a);
      const T* y = static_cast<const T*>(b);
      if (sign > 0) {
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(x[i] + y[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(x[i] - y[i]);
      }
    }
  });
}

class LocalVariableImpl final : public VariableImpl {
 public:
  explicit LocalVariableImpl(const VariableArgs& args)
      : name_(args.options.name),
        shape_(args.initial_value.shape()),
        dtype_(args.initial_value.dtype()),
        device_(&current_device()),
        trainable_(args.options.trainable.value_or(true)),
        synchronization_(args.options.synchronization),
        aggregation_(args.options.aggregation) {
    // Own a private copy so that in-place updates never touch the caller's tensor.
    buffer_ = copy_of(args.initial_value);
  }

  Tensor read() const override {
    MutexLock lock(mu_);
    return Tensor::from_buffer(buffer_, shape_, 0, device_);
  }

  void assign(const Tensor& value) override {
    std::shared_ptr<Buffer> fresh;
    {
      MutexLock lock(mu_);
      if (dtype_ != DType::string && buffer_.use_count() == 1) {
        // No reader holds the buffer: overwrite it in place.
        std::memcpy(buffer_->data(), value.raw_data(), value.size_bytes());
        return;
      }
    }
    // Copy outside the lock, then publish (readers keep the old buffer).
    fresh = copy_of(value);
    MutexLock lock(mu_);
    buffer_ = std::move(fresh);
  }

  void assign_add(const Tensor& delta) override { update(delta, +1); }
  void assign_sub(const Tensor& delta) override { update(delta, -1); }

  void update_in_place(const std::function<void(void*)>& fn) override {
    MutexLock lock(mu_);
    if (buffer_.use_count() == 1) {
      fn(buffer_->data());
      return;
    }
    // A reader holds the old value: rewrite a fresh copy, then publish it.
    auto fresh = Buffer::allocate(dtype_, shape_.num_elements());
    std::memcpy(fresh->data(), buffer_->data(), fresh->size_bytes());
    fn(fresh->data());
    buffer_ = std::move(fresh);
  }

  const std::string& name() const override { return name_; }
  const TensorShape& shape() const override { return shape_; }
  DType dtype() const override { return dtype_; }
  const std::string& device() const override { return device_->name(); }
  bool trainable() const override { return trainable_; }
  VariableSynchronization synchronization() const override { return synchronization_; }
  VariableAggregation aggregation() const override { return aggregation_; }

 private:
  static std::shared_ptr<Buffer> copy_of(const Tensor& t) {
    auto buf = Buffer::allocate(t.dtype(), t.num_elements());
    if (t.dtype() == DType::string) {
      auto* dst = reinterpret_cast<std::string*>(buf->data());
      const auto* src = t.data<std::string>();
      std::copy(src, src + t.num_elements(), dst);
    } else {
      std::memcpy(buf->data(), t.raw_data(), t.size_bytes());
    }
    return buf;
  }

  void update(const Tensor& delta, int sign) {
    const int64_t n = shape_.num_elements();
    MutexLock lock(mu_);
    if (buffer_.use_count() == 1) {
      add_into(dtype_, buffer_->data(), buffer_->data(), delta.raw_data(), n, sign);
      return;
    }
    // A reader holds the old value: write old + delta into a fresh buffer.
    // Done under the lock so that concurrent assign_adds are never lost.
    auto fresh = Buffer::allocate(dtype_, n);
    add_into(dtype_, fresh->data(), buffer_->data(), delta.raw_data(), n, sign);
    buffer_ = std::move(fresh);
  }

  const std::string name_;
  const TensorShape shape_;
  const DType dtype_;
  const Device* const device_;
  const bool trainable_;
  const VariableSynchronization synchronization_;
  const VariableAggregation aggregation_;

  mutable Mutex mu_;
  std::shared_ptr<Buffer> buffer_ STRATA_GUARDED_BY(mu_);
};

Variable create_at(int level, VariableArgs args) {
  if (level < 0) return Variable(make_local_variable_impl(args));
  // Copy the creator: it may push scopes (and reallocate the stack) while it runs.
  VariableCreator creator = t_creators[level];
  NextVariableCreator next = [level](VariableArgs a) { return create_at(level - 1, std::move(a)); };
  Variable v = creator(next, std::move(args));
  STRATA_CHECK(
      FAILED_PRECONDITION, v.defined(),
      "VariableCreatorScope: expected the creator to return a variable, got an empty handle");
  return v;
}

}  // namespace

std::string_view variable_synchronization_name(VariableSynchronization s) noexcept {
  switch (s) {
    case VariableSynchronization::AUTO: return "AUTO";
    case VariableSynchronization::NONE: return "NONE";
    case VariableSynchronization::ON_WRITE: return "ON_WRITE";
    case VariableSynchronization::ON_READ: return "ON_READ";
  }
  return "?";
}

std::string_view variable_aggregation_name(VariableAggregation a) noexcept {
  switch (a) {
    case VariableAggregation::NONE: return "NONE";
    case VariableAggregation::SUM: return "SUM";
    case VariableAggregation::MEAN: return "MEAN";
    case VariableAggregation::ONLY_FIRST_REPLICA: return "ONLY_FIRST_REPLICA";
  }
  return "?";
}

std::shared_ptr<VariableImpl> make_local_variable_impl(const VariableArgs& args) {
  STRATA_CHECK_ARG(args.initial_value.defined(), "Variable(", args.options.name,
                   "): expected an initial value, got an empty tensor");
  return std::make_shared<LocalVariableImpl>(args);
}

Variable::Variable(const Tensor& initial_value, VariableOptions options) {
  STRATA_CHECK_ARG(initial_value.defined(), "Variable(", options.name,
                   "): expected an initial value, got an empty tensor");
  const int sync = static_cast<int>(options.synchronization);
  STRATA_CHECK_ARG(sync >= 0 && sync <= 3, "Invalid variable synchronization mode: ", sync,
                   " for variable: ", options.name);
  const int agg = static_cast<int>(options.aggregation);
  STRATA_CHECK_ARG(agg >= 0 && agg <= 3, "Invalid variable aggregation mode: ", agg,
                   " for variable: ", options.name);
  if (!options.trainable.has_value()) {
    // TF: ON_READ variables (metrics, batch-norm statistics) are not trainable by default.
    options.trainable = options.synchronization != VariableSynchronization::ON_READ;
  }
  *this = create_at(static_cast<int>(t_creators.size()) - 1,
                    VariableArgs{initial_value, std::move(options)});
}

std::string VariableImpl::repr() const {
  const Tensor v = read();
  return str_cat("<tf.Variable '", name(), ":0' shape=", shape_repr(shape()),
                 " dtype=", dtype_name(dtype()), ", numpy=", v.values_string(), ">");
}

std::string Variable::to_string() const {
  return impl_ ? impl_->repr() : std::string("<tf.Variable (empty handle)>");
}

std::ostream& operator<<(std::ostream& os, const Variable& v) { return os << v.to_string(); }

Variable::Variable(std::shared_ptr<VariableImpl> impl) : impl_(std::move(impl)) {
  STRATA_CHECK_ARG(impl_ != nullptr, "Variable: expected an implementation, got nullptr");
}

VariableImpl& Variable::impl() const {
  STRATA_CHECK(FAILED_PRECONDITION, impl_ != nullptr,
               "Variable: expected a variable, got an empty (default-constructed) handle");
  return *impl_;
}

Tensor Variable::value() const {
  Tensor v = impl().read();
  // Iterate over a copy: an observer may register or unregister others.
  if (!t_observers.empty()) {
    // (From the buffer cache: a tape reads every variable once per step.)
    const PooledVector<VariableAccessObserver*> observers(t_observers.begin(), t_observers.end());
    for (VariableAccessObserver* o : observers) o->variable_accessed(*this, v);
  }
  return v;
}

void Variable::check_compatible(const Tensor& value, const char* who) const {
  STRATA_CHECK_ARG(value.defined(), "Variable.", who, "(", name(),
                   "): expected a value, got an empty tensor");
  STRATA_CHECK_ARG(value.shape() == shape(), "Variable.", who, "(", name(),
                   "): expected a value of shape ", shape(), ", got shape ", value.shape());
  STRATA_CHECK_ARG(value.dtype() == dtype(), "Variable.", who, "(", name(),
                   "): expected a value of dtype ", dtype_name(dtype()), ", got dtype ",
                   dtype_name(value.dtype()));
}

void Variable::assign(const Tensor& value) const {
  check_compatible(value, "assign");
  impl().assign(value);
}

void Variable::assign_add(const Tensor& delta) const {
  check_compatible(delta, "assign_add");
  STRATA_CHECK_ARG(is_numeric(dtype()), "Variable.assign_add(", name(),
                   "): expected a numeric variable, got dtype ", dtype_name(dtype()));
  impl().assign_add(delta);
}

void Variable::assign_sub(const Tensor& delta) const {
  check_compatible(delta, "assign_sub");
  STRATA_CHECK_ARG(is_numeric(dtype()), "Variable.assign_sub(", name(),
                   "): expected a numeric variable, got dtype ", dtype_name(dtype()));
  impl().assign_sub(delta);
}

void VariableImpl::update_in_place(const std::function<void(void*)>& fn) {
  const Tensor current = read();
  Tensor copy = Tensor::allocate(current.dtype(), current.shape());
  std::memcpy(copy.mutable_raw_data(), current.raw_data(), current.size_bytes());
  fn(copy.mutable_raw_data());
  assign(copy);
}

void Variable::update_in_place(const std::function<void(void*)>& fn) const {
  STRATA_CHECK_ARG(fn != nullptr, "Variable.update_in_place(", name(),
                   "): expected a function, got an empty one");
  STRATA_CHECK_ARG(dtype() != DType::string, "Variable.update_in_place(", name(),
                   "): expected a numeric or bool variable, got dtype string");
  impl().update_in_place(fn);
}

VariableCreatorScope::VariableCreatorScope(VariableCreator creator) {
  STRATA_CHECK_ARG(static_cast<bool>(creator),
                   "VariableCreatorScope: expected a creator function, got an empty function");
  t_creators.push_back(std::move(creator));
}

VariableCreatorScope::~VariableCreatorScope() { t_creators.pop_back(); }

VariableAccessObserverScope::VariableAccessObserverScope(VariableAccessObserver& observer)
    : observer_(&observer) {
  t_observers.push_back(observer_);
}

VariableAccessObserverScope::~VariableAccessObserverScope() {
  auto it = std::find(t_observers.rbegin(), t_observers.rend(), observer_);
  if (it != t_observers.rend()) t_observers.erase(std::next(it).base());
}

}  // namespace strata
