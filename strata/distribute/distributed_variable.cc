#include "strata/distribute/distributed_variable.h"

#include <string>
#include <unordered_map>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/core/device.h"
#include "strata/distribute/strategy.h"
#include "strata/ops/math_ops.h"

namespace strata::distribute {
namespace {

// The state shared by both kinds: one plain variable per local replica.
// Component -> its distributed variable, for value_container. Entries are
// added by make_distributed_variable and removed by the container's destructor.
class ContainerRegistry {
 public:
  void add(const VariableImpl* component, const std::shared_ptr<VariableImpl>& container) {
    MutexLock lock(mu_);
    containers_[component] = container;
  }
  void remove(const VariableImpl* component) {
    MutexLock lock(mu_);
    containers_.erase(component);
  }
  std::shared_ptr<VariableImpl> find(const VariableImpl* component) {
    MutexLock lock(mu_);
    auto it = containers_.find(component);
    return it == containers_.end() ? nullptr : it->second.lock();
  }

 private:
  Mutex mu_;
  std::unordered_map<const VariableImpl*, std::weak_ptr<VariableImpl>> containers_
      STRATA_GUARDED_BY(mu_);
};

ContainerRegistry& container_registry() {
  static ContainerRegistry* registry = new ContainerRegistry;  // never destroyed: used at exit
  return *registry;
}

class DistributedVariableImpl : public VariableImpl {
 public:
  DistributedVariableImpl(Strategy& strategy, std::vector<Variable> components)
      : strategy_(&strategy), components_(std::move(components)) {}
  ~DistributedVariableImpl() override {
    for (const Variable& c : components_) container_registry().remove(c.impl_ptr().get());
  }

  const std::string& name() const override { return primary().name(); }
  const TensorShape& shape() const override { return primary().shape(); }
  DType dtype() const override { return primary().dtype(); }
  const std::string& device() const override { return component_here().device(); }
  bool trainable() const override { return primary().trainable(); }
  VariableSynchronization synchronization() const override { return primary().synchronization(); }
  VariableAggregation aggregation() const override { return primary().aggregation(); }

  const std::vector<Variable>& components() const noexcept { return components_; }
  Strategy& strategy() const noexcept { return *strategy_; }

  std::string repr() const override {
    std::string s = str_cat(kind(), ":{\n");
    for (size_t i = 0; i < components_.size(); ++i) {
      s += str_cat("  ", i, ": ", components_[i].impl().repr(), "\n");
    }
    return s + "}";
  }

 protected:
  virtual const char* kind() const = 0;
  const Variable& primary() const { return components_.front(); }

  // The local replica index when running in one of the owning strategy's
  // replica contexts; -1 in cross-replica context or outside every scope.
  int local_replica() const {
    Strategy& current = get_strategy();
    if (&current != strategy_ && !current.is_default()) {
      throw FailedPreconditionError(
          str_cat("Mixing different tf.distribute.Strategy objects: ", current.name(), " is not ",
                  strategy_->name(), " (the strategy that owns variable '", name(), "')"));
    }
    if (in_cross_replica_context()) return -1;
    ReplicaContext* ctx = get_replica_context();
    if (ctx != nullptr && &ctx->strategy() == strategy_) return ctx->local_replica_id();
    return -1;  // outside every scope: like the owning strategy's cross-replica context
  }

  // Cross-replica read target: the component on the current device, else component 0.
  const Variable& component_here() const {
    const std::string& here = current_device().name();
    for (const Variable& c : components_) {
      if (c.device() == here) return c;
    }
    return primary();
  }

  void for_each_component(const std::function<void(const Variable&)>& fn) const {
    for (const Variable& c : components_) fn(c);
  }

 private:
  Strategy* strategy_;
  std::vector<Variable> components_;
};

// True when every replica passed the very same tensor (a captured outer
// tensor), which TF does not regroup into a PerReplica (§4.4).
bool all_identical(const std::vector<Tensor>& values) {
  for (const Tensor& v : values) {
    if (v.id() != values.front().id()) return false;
  }
  return true;
}

enum class Update { ASSIGN, ADD, SUB };

void apply(const Variable& component, Update kind, const Tensor& value) {
  switch (kind) {
    case Update::ASSIGN: component.impl().assign(value); return;
    case Update::ADD: component.impl().assign_add(value); return;
    case Update::SUB: component.impl().assign_sub(value); return;
  }
}

class MirroredVariableImpl final : public DistributedVariableImpl {
 public:
  using DistributedVariableImpl::DistributedVariableImpl;

  Tensor read() const override {
    const int local = local_replica();
    const Variable& c = local >= 0 ? components().at(local) : component_here();
    return c.impl().read();
  }
  void assign(const Tensor& value) override { update(Update::ASSIGN, value); }
  void assign_add(const Tensor& delta) override { update(Update::ADD, delta); }
  void assign_sub(const Tensor& delta) override { update(Update::SUB, delta); }
  // Where an assignment would write only the replica's own component (replica
  // context, aggregation NONE), rewrite that component in place; elsewhere the
  // rewritten copy goes through assign (every component, or the merge).
  void update_in_place(const std::function<void(void*)>& fn) override {
    const int local = local_replica();
    if (local >= 0 &&
        (aggregation() == VariableAggregation::NONE || strategy().num_replicas_in_sync() == 1)) {
      components().at(local).update_in_place(fn);
      return;
    }
    VariableImpl::update_in_place(fn);
  }

 private:
  const char* kind() const override { return "MirroredVariable"; }

  void update(Update kind, const Tensor& value) {
    const int local = local_replica();
    if (local < 0) {
      for_each_component([&](const Variable& c) { apply(c, kind, value); });
      return;
    }
    const VariableAggregation aggregation = this->aggregation();
    if (aggregation == VariableAggregation::NONE || strategy().num_replicas_in_sync() == 1) {
      apply(components().at(local), kind, value);
      return;
    }
    ReplicaContext& ctx = *get_replica_context();
    if (aggregation == VariableAggregation::MEAN && !is_floating(dtype())) {
      throw InvalidArgumentError(
          str_cat("Cannot update non-float variables with tf.VariableAggregation.MEAN aggregation "
                  "in replica "
                  "context. Either change the variable dtype to float or update it in "
                  "cross-replica context "
                  "(variable '",
                  name(), "', dtype ", dtype_name(dtype()), ")"));
    }
    // One merge per update: every replica hands in its value; the merged value
    // is written to every component by the merging thread.
    ctx.merge_call(
        [&](Strategy& strategy, const PerReplica<Tensor>& values) {
          const std::vector<Tensor>& v = values.values();
          Tensor merged;
          if (aggregation == VariableAggregation::ONLY_FIRST_REPLICA) {
            merged = v.front();
          } else if (all_identical(v)) {
            if (aggregation == VariableAggregation::SUM && strategy.num_replicas_in_sync() > 1) {
              throw InvalidArgumentError(str_cat("A non-DistributedValues value ", v.front(),
                                                 " cannot be reduced with the given reduce "
                                                 "op ReduceOp.SUM (updating variable '",
                                                 name(), "' with aggregation SUM from ",
                                                 strategy.num_replicas_in_sync(), " replicas)"));
            }
            merged = v.front();
          } else {
            const ReduceOp op =
                aggregation == VariableAggregation::SUM ? ReduceOp::SUM : ReduceOp::MEAN;
            merged = strategy.reduce(op, values, std::nullopt);
            if (merged.dtype() != dtype()) merged = cast(merged, dtype());
          }
          for_each_component([&](const Variable& c) { apply(c, kind, merged); });
        },
        value);
  }
};

class SyncOnReadVariableImpl final : public DistributedVariableImpl {
 public:
  using DistributedVariableImpl::DistributedVariableImpl;

  Tensor read() const override {
    const int local = local_replica();
    if (local >= 0) return components().at(local).impl().read();
    switch (aggregation()) {
      case VariableAggregation::ONLY_FIRST_REPLICA: return primary().impl().read();
      case VariableAggregation::NONE:
        throw InvalidArgumentError(
            str_cat("Could not convert from `tf.VariableAggregation` NONE to "
                    "`tf.distribute.ReduceOp` type (reading SyncOnReadVariable '",
                    name(), "' in cross-replica context)"));
      case VariableAggregation::SUM:
      case VariableAggregation::MEAN: {
        std::vector<Tensor> values;
        for (const Variable& c : components()) values.push_back(c.impl().read());
        internal::CrossReplicaModeGuard guard(strategy());
        const ReduceOp op =
            aggregation() == VariableAggregation::SUM ? ReduceOp::SUM : ReduceOp::MEAN;
        Tensor total = strategy().reduce(op, PerReplica<Tensor>(std::move(values)), std::nullopt);
        return total.dtype() == dtype() ? total : cast(total, dtype());
      }
    }
    STRATA_INTERNAL_CHECK(false, "unknown aggregation");
    return Tensor();
  }

  void assign(const Tensor& value) override {
    const int local = local_replica();
    if (local >= 0) {
      components().at(local).impl().assign(value);
      return;
    }
    Tensor per_component = value;
    if (aggregation() == VariableAggregation::SUM) {
      // So that the SUM read gives `value` back (integer variables truncate, as TF).
      per_component =
          divide(value, cast(constant(static_cast<int64_t>(strategy().num_replicas_in_sync())),
                             is_floating(value.dtype()) ? value.dtype() : DType::float64));
      if (per_component.dtype() != dtype()) per_component = cast(per_component, dtype());
    }
    for_each_component([&](const Variable& c) { c.impl().assign(per_component); });
  }
  void assign_add(const Tensor& delta) override { add(Update::ADD, delta, "assign_add"); }
  void assign_sub(const Tensor& delta) override { add(Update::SUB, delta, "assign_sub"); }

 private:
  const char* kind() const override { return "SyncOnReadVariable"; }

  void add(Update kind, const Tensor& delta, const char* method) {
    const int local = local_replica();
    if (local >= 0) {
      apply(components().at(local), kind, delta);
      return;
    }
    if (aggregation() == VariableAggregation::SUM) {
      throw InvalidArgumentError(str_cat("SyncOnReadVariable does not support `", method,
                                         "` in cross-replica context when aggregation is set to "
                                         "`tf.VariableAggregation.SUM` (variable '",
                                         name(), "')"));
    }
    for_each_component([&](const Variable& c) { apply(c, kind, delta); });
  }
};

const DistributedVariableImpl* as_distributed(const Variable& v) {
  return v.defined() ? dynamic_cast<const DistributedVariableImpl*>(v.impl_ptr().get()) : nullptr;
}

}  // namespace

bool is_distributed_variable(const Variable& v) { return as_distributed(v) != nullptr; }
bool is_mirrored_variable(const Variable& v) {
  return v.defined() && dynamic_cast<const MirroredVariableImpl*>(v.impl_ptr().get()) != nullptr;
}
bool is_sync_on_read_variable(const Variable& v) {
  return v.defined() && dynamic_cast<const SyncOnReadVariableImpl*>(v.impl_ptr().get()) != nullptr;
}

std::vector<Variable> distributed_components(const Variable& v) {
  const DistributedVariableImpl* d = as_distributed(v);
  return d ? d->components() : std::vector<Variable>{v};
}

const Strategy* owning_strategy(const Variable& v) {
  const DistributedVariableImpl* d = as_distributed(v);
  return d ? &d->strategy() : nullptr;
}

Variable distributed_container(const Variable& v) {
  if (!v.defined()) return Variable();
  std::shared_ptr<VariableImpl> container = container_registry().find(v.impl_ptr().get());
  return container ? Variable(std::move(container)) : Variable();
}

namespace internal {

VariableArgs check_distributed_variable_args(VariableArgs args) {
  VariableOptions& o = args.options;
  if (o.synchronization == VariableSynchronization::NONE) {
    throw InvalidArgumentError(str_cat(
        "`NONE` variable synchronization mode is not supported with tf.distribute strategy. Please "
        "change the `synchronization` for variable: ",
        o.name));
  }
  if (o.synchronization == VariableSynchronization::AUTO)
    o.synchronization = VariableSynchronization::ON_WRITE;
  if (o.aggregation == VariableAggregation::MEAN && !is_floating(args.initial_value.dtype())) {
    throw InvalidArgumentError(str_cat(
        "creating distributed tf.Variable with aggregation=MEAN and a non-floating dtype is not "
        "supported, please use a different aggregation or dtype (variable '",
        o.name, "', dtype ", dtype_name(args.initial_value.dtype()), ")"));
  }
  if (!o.trainable.has_value()) o.trainable = o.synchronization != VariableSynchronization::ON_READ;
  return args;
}

Variable make_distributed_variable(Strategy& strategy, const VariableArgs& args) {
  std::vector<Variable> components;
  const int n = strategy.num_local_replicas();
  for (int i = 0; i < n; ++i) {
    const Device& device = strategy.variable_device(i);
    DeviceScope scope(device);
    VariableArgs component = args;
    if (i > 0) {
      component.options.name = str_cat(args.options.name, "/replica_", i);
      // Every copy starts from replica 0's value (random initialisers give identical copies).
      component.initial_value = components.front().impl().read().on_device(device);
    }
    components.emplace_back(make_local_variable_impl(component));
  }
  std::shared_ptr<VariableImpl> impl;
  if (args.options.synchronization == VariableSynchronization::ON_READ) {
    impl = std::make_shared<SyncOnReadVariableImpl>(strategy, std::move(components));
  } else {
    impl = std::make_shared<MirroredVariableImpl>(strategy, std::move(components));
  }
  for (const Variable& c : distributed_components(Variable(impl)))
    container_registry().add(c.impl_ptr().get(), impl);
  return Variable(std::move(impl));
}

Variable make_mirrored_variable(Strategy& strategy, std::vector<Variable> components) {
  STRATA_INTERNAL_CHECK(static_cast<int>(components.size()) == strategy.num_local_replicas(),
                        "make_mirrored_variable: ", components.size(), " components for ",
                        strategy.num_local_replicas(), " local replicas");
  std::shared_ptr<VariableImpl> impl =
      std::make_shared<MirroredVariableImpl>(strategy, std::move(components));
  for (const Variable& c : distributed_components(Variable(impl)))
    container_registry().add(c.impl_ptr().get(), impl);
  return Variable(std::move(impl));
}

}  // namespace internal
}  // namespace strata::distribute
