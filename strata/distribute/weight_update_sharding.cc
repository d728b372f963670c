#include "strata/distribute/weight_update_sharding.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/base/str_cat.h"
#include "strata/collective/collectives.h"
#include "strata/core/device.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/replicated_strategy.h"
#include "strata/distribute/step_profile.h"
#include "strata/distribute/strategy.h"

namespace strata::distribute {
namespace {

// Elements [begin, end) of `t` flattened, as a view.
Tensor flat_block(const Tensor& t, const UpdateBlock& b) {
  return t.reshaped(TensorShape({t.num_elements()})).slice_rows(b.begin, b.end);
}

// One replica's copy of a sharded slot variable (see the header): its
// storage is a plain variable on the replica's device holding either the
// whole value or block `block_` of it, flat. Every state change makes a new
// storage variable (a private buffer of exactly that size), so the bytes
// held are what the state needs.
class ShardedSlotCopyImpl final : public VariableImpl {
 public:
  ShardedSlotCopyImpl(std::string name, const Tensor& initial, const Device& device,
                      const UpdateBlock& block, int replica, bool trainable)
      : name_(std::move(name)),
        shape_(initial.shape()),
        dtype_(initial.dtype()),
        device_(&device),
        block_(block),
        replica_(replica),
        trainable_(trainable) {
    MutexLock lock(mu_);
    storage_ = make_storage(flat_block(initial, block_), /*whole=*/false);
  }

  Tensor read() const override {
    MutexLock lock(mu_);
    check_whole("read");
    return storage_.impl().read();
  }
  void assign(const Tensor& value) override {
    MutexLock lock(mu_);
    storage_.impl().assign(whole_ ? value : flat_block(value, block_));
  }
  void assign_add(const Tensor& delta) override {
    MutexLock lock(mu_);
    storage_.impl().assign_add(whole_ ? delta : flat_block(delta, block_));
  }
  void assign_sub(const Tensor& delta) override {
    MutexLock lock(mu_);
    storage_.impl().assign_sub(whole_ ? delta : flat_block(delta, block_));
  }
  void update_in_place(const std::function<void(void* data)>& fn) override {
    MutexLock lock(mu_);
    check_whole("update in place");
    storage_.impl().update_in_place(fn);
  }
  const std::string& name() const override { return name_; }
  const TensorShape& shape() const override { return shape_; }
  DType dtype() const override { return dtype_; }
  const std::string& device() const override { return device_->name(); }
  bool trainable() const override { return trainable_; }
  VariableSynchronization synchronization() const override {
    return VariableSynchronization::ON_WRITE;
  }
  VariableAggregation aggregation() const override { return VariableAggregation::NONE; }
  std::string repr() const override {
    MutexLock lock(mu_);
    if (whole_) return VariableImpl::repr();
    return str_cat("<tf.Variable '", name_, ":0' shape=", shape_, " dtype=", dtype_name(dtype_),
                   ", block [", block_.begin, ":", block_.end, ") of replica ", replica_, ">");
  }

  bool holds_block() const {
    MutexLock lock(mu_);
    return !whole_;
  }
  Variable block() {
    MutexLock lock(mu_);
    if (whole_) {
      const Tensor kept = flat_block(storage_.impl().read(), block_);
      storage_ = make_storage(kept, /*whole=*/false);  // frees the whole buffer
    }
    return storage_;
  }
  Tensor block_values() const {
    MutexLock lock(mu_);
    const Tensor value = storage_.impl().read();
    return whole_ ? flat_block(value, block_) : value;
  }
  void make_whole(const Tensor& value) {
    STRATA_CHECK_ARG(value.shape() == shape_ && value.dtype() == dtype_, "sharded slot '", name_,
                     "': expected a whole value of shape ", shape_, " ", dtype_name(dtype_),
                     ", got ", value.shape(), " ", dtype_name(value.dtype()));
    MutexLock lock(mu_);
    storage_ = make_storage(value, /*whole=*/true);
  }
  int64_t held_bytes() const {
    MutexLock lock(mu_);
    return storage_.shape().num_elements() * int64_t(dtype_size(dtype_));
  }

 private:
  // A plain variable on the replica's device with a private copy of `value`.
  Variable make_storage(const Tensor& value, bool whole) STRATA_REQUIRES(mu_) {
    whole_ = whole;
    const DeviceScope scope(*device_);
    return Variable(make_local_variable_impl(VariableArgs{
        whole ? value.reshaped(shape_) : value,
        {.name = whole ? name_ : str_cat(name_, "[", block_.begin, ":", block_.end, "]"),
         .trainable = false}}));
  }
  void check_whole(const char* what) const STRATA_REQUIRES(mu_) {
    STRATA_CHECK(FAILED_PRECONDITION, whole_, "cannot ", what, " slot variable '", name_,
                 "': under the sharded weight update this copy holds only replica ", replica_,
                 "'s block [", block_.begin, ", ", block_.end,
                 ") of its value; the optimizer's slot_variables(), variables() or "
                 "gather_sharded_slots() make every copy whole");
  }

  const std::string name_;
  const TensorShape shape_;
  const DType dtype_;
  const Device* const device_;
  const UpdateBlock block_;
  const int replica_;
  const bool trainable_;
  mutable Mutex mu_;
  Variable storage_ STRATA_GUARDED_BY(mu_);
  bool whole_ STRATA_GUARDED_BY(mu_) = false;
};

ShardedSlotCopyImpl* as_sharded_slot_copy(const Variable& v) {
  return v.defined() ? dynamic_cast<ShardedSlotCopyImpl*>(v.impl_ptr().get()) : nullptr;
}

ShardedSlotCopyImpl& sharded_slot_copy(const Variable& copy) {
  ShardedSlotCopyImpl* impl = as_sharded_slot_copy(copy);
  STRATA_CHECK_ARG(impl != nullptr, "variable '", copy.defined() ? copy.name() : "<empty>",
                   "' is not a copy of a sharded slot variable");
  return *impl;
}

}  // namespace

bool shards_weight_update(const Strategy& strategy) {
  const auto* replicated = dynamic_cast<const ReplicatedStrategy*>(&strategy);
  if (replicated == nullptr || replicated->num_replicas_in_sync() == 1) return false;
  const CommunicationOptions& options = replicated->communication_options();
  return options.shard_weight_update && options.check_divergence_every_n_steps == 0;
}

bool shards_weight_update(const ReplicaContext& ctx) {
  return shards_weight_update(ctx.strategy());
}

UpdateBlock update_block(int64_t num_elements, int num_replicas, int replica) {
  const int64_t n = num_elements;
  const int64_t width = ((n + num_replicas - 1) / num_replicas + kUpdateBlockAlign - 1) /
                        kUpdateBlockAlign * kUpdateBlockAlign;
  const int64_t begin = std::min(n, width * replica);
  return {begin, std::min(n, begin + width), width};
}

Tensor all_gather_rows(ReplicaContext& ctx, const Tensor& row) {
  if (auto* strategy = dynamic_cast<ReplicatedStrategy*>(&ctx.strategy())) {
    return strategy->all_gather_rows_in_replica(ctx, row);
  }
  STRATA_CHECK_ARG(row.rank() == 2 && row.shape().dim(0) == 1,
                   "all_gather_rows: expected one row of shape [1, columns], got ", row.shape());
  return ctx.all_gather(row, 0);
}

Tensor reduce_scatter_rows(ReplicaContext& ctx, const Tensor& rows) {
  if (auto* strategy = dynamic_cast<ReplicatedStrategy*>(&ctx.strategy())) {
    return strategy->reduce_scatter_rows_in_replica(ctx, rows);
  }
  const int replicas = ctx.num_replicas_in_sync();
  STRATA_CHECK_ARG(rows.rank() == 2 && rows.shape().dim(0) == replicas,
                   "reduce_scatter_rows: expected ", replicas, " rows of shape [", replicas,
                   ", columns], got ", rows.shape());
  const int r = ctx.replica_id_in_sync_group();
  return ctx.all_reduce(ReduceOp::SUM, rows).slice_rows(r, r + 1);
}

bool replicas_share_process(const ReplicaContext& ctx) {
  const auto* strategy = dynamic_cast<const ReplicatedStrategy*>(&ctx.strategy());
  return strategy != nullptr && strategy->replicas_share_process();
}

namespace {

ReplicatedStrategy& in_process_strategy(ReplicaContext& ctx, const char* who) {
  auto* strategy = dynamic_cast<ReplicatedStrategy*>(&ctx.strategy());
  STRATA_CHECK(FAILED_PRECONDITION, strategy != nullptr && strategy->replicas_share_process(), who,
               ": the replicas of ", ctx.strategy().name(), " are not all threads of this process");
  return *strategy;
}

}  // namespace

std::vector<Tensor> reduce_blocks_in_process(ReplicaContext& ctx,
                                             const std::vector<Tensor>& values) {
  ReplicatedStrategy& strategy = in_process_strategy(ctx, "reduce_blocks_in_process");
  std::shared_ptr<const std::vector<std::vector<Tensor>>> all;
  {
    const ScopedStepPhase wait(StepPhase::kCollectiveWait);
    all = strategy.exchange_in_process(ctx, values);
  }
  const ScopedStepPhase transfer(StepPhase::kCollectiveTransfer);
  const int n = ctx.num_replicas_in_sync();
  const int r = ctx.replica_id_in_sync_group();
  for (int q = 0; q < n; ++q) {
    const std::vector<Tensor>& theirs = (*all)[size_t(q)];
    STRATA_CHECK_ARG(theirs.size() == values.size(), "reduce_blocks_in_process: replica ", q,
                     " passed ", theirs.size(), " tensors, replica ", r, " ", values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      STRATA_CHECK_ARG(
          theirs[i].shape() == values[i].shape() && theirs[i].dtype() == values[i].dtype(),
          "reduce_blocks_in_process: tensor ", i, " is ", theirs[i].shape(), " ",
          dtype_name(theirs[i].dtype()), " on replica ", q, " but ", values[i].shape(), " ",
          dtype_name(values[i].dtype()), " on replica ", r);
    }
  }
  std::vector<Tensor> out;
  out.reserve(values.size());
  std::vector<const void*> ins(static_cast<size_t>(n));
  for (size_t i = 0; i < values.size(); ++i) {
    const UpdateBlock b = update_block(values[i].num_elements(), n, r);
    const int64_t count = std::max<int64_t>(b.end - b.begin, 0);
    Tensor block = Tensor::allocate(values[i].dtype(), TensorShape({count}));
    if (count > 0) {
      const size_t esize = dtype_size(values[i].dtype());
      for (int q = 0; q < n; ++q) {
        ins[size_t(q)] = static_cast<const std::byte*>((*all)[size_t(q)][i].raw_data()) +
                         b.begin * int64_t(esize);
      }
      collective::reduce_buffers(values[i].dtype(), collective::ReduceOp::SUM,
                                 block.mutable_raw_data(), ins, count);
    }
    out.push_back(std::move(block));
  }
  return out;
}

std::shared_ptr<const std::vector<std::vector<Tensor>>> exchange_rows_in_process(
    ReplicaContext& ctx, const std::vector<Tensor>& rows) {
  ReplicatedStrategy& strategy = in_process_strategy(ctx, "exchange_rows_in_process");
  const ScopedStepPhase transfer(StepPhase::kCollectiveTransfer);
  return strategy.exchange_in_process(ctx, rows);
}

Variable make_sharded_slot_variable(Strategy& strategy, const VariableArgs& args) {
  const VariableOptions& o = args.options;
  STRATA_CHECK_ARG(args.initial_value.defined(), "make_sharded_slot_variable(", o.name,
                   "): expected an initial value, got an empty tensor");
  STRATA_CHECK_ARG((o.synchronization == VariableSynchronization::AUTO ||
                    o.synchronization == VariableSynchronization::ON_WRITE) &&
                       o.aggregation == VariableAggregation::NONE,
                   "make_sharded_slot_variable(", o.name,
                   "): a sharded slot is ON_WRITE with aggregation NONE, got synchronization ",
                   variable_synchronization_name(o.synchronization), " and aggregation ",
                   variable_aggregation_name(o.aggregation));
  const int64_t n = args.initial_value.num_elements();
  const int replicas = strategy.num_replicas_in_sync();
  std::vector<Variable> components;
  components.reserve(size_t(strategy.num_local_replicas()));
  for (int i = 0; i < strategy.num_local_replicas(); ++i) {
    components.emplace_back(std::make_shared<ShardedSlotCopyImpl>(
        i == 0 ? o.name : str_cat(o.name, "/replica_", i), args.initial_value,
        strategy.variable_device(i), update_block(n, replicas, strategy.global_replica_id(i)),
        strategy.global_replica_id(i), o.trainable.value_or(true)));
  }
  return internal::make_mirrored_variable(strategy, std::move(components));
}

bool is_sharded_slot_variable(const Variable& v) {
  if (!is_mirrored_variable(v)) return false;
  const std::vector<Variable> components = distributed_components(v);
  return !components.empty() && as_sharded_slot_copy(components.front()) != nullptr;
}

bool holds_block(const Variable& copy) {
  const ShardedSlotCopyImpl* impl = as_sharded_slot_copy(copy);
  return impl != nullptr && impl->holds_block();
}

Variable sharded_slot_block(const Variable& copy) { return sharded_slot_copy(copy).block(); }

Tensor sharded_slot_block_values(const Variable& copy) {
  return sharded_slot_copy(copy).block_values();
}

void make_sharded_slot_whole(const Variable& copy, const Tensor& value) {
  sharded_slot_copy(copy).make_whole(value);
}

int64_t held_bytes(const Variable& copy) {
  if (const ShardedSlotCopyImpl* impl = as_sharded_slot_copy(copy)) return impl->held_bytes();
  return copy.shape().num_elements() * int64_t(dtype_size(copy.dtype()));
}

}  // namespace strata::distribute
