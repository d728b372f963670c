#include "strata/keras/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <regex>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/step_profile.h"
#include "strata/distribute/strategy.h"
#include "strata/distribute/weight_update_sharding.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras::optimizers {
namespace {

// Keras keeps the learning rate in a float32 (floatx) variable.
double as_float32(double v) { return static_cast<double>(static_cast<float>(v)); }

Tensor scalar_of(double v, DType dtype) { return strata::cast(strata::constant(v), dtype); }

// sum(g^2) of one gradient, accumulated in double.
double squared_l2(const Tensor& g) {
  return strata::reduce_sum(strata::square(strata::cast(g, DType::float64))).scalar_as_double();
}

using distribute::update_block;
using distribute::UpdateBlock;

// Rows of the reduce-scatter and all-gather: per dtype, the tensors' blocks
// side by side, each padded to its width (so every replica's row has the same
// columns).
struct RowLayout {
  DType dtype;
  std::vector<size_t> members = {};   // indices into the caller's tensors
  std::vector<int64_t> columns = {};  // first column of each member's block
  int64_t width = 0;                  // columns in all
};

// `vars`: Tensors or Variables (anything with dtype() and shape()).
template <typename T>
std::vector<RowLayout> row_layouts(const std::vector<T>& vars, int shards) {
  std::vector<RowLayout> layouts;
  for (size_t i = 0; i < vars.size(); ++i) {
    const DType d = vars[i].dtype();
    auto it = std::find_if(layouts.begin(), layouts.end(),
                           [d](const RowLayout& l) { return l.dtype == d; });
    if (it == layouts.end()) {
      layouts.push_back(RowLayout{.dtype = d});
      it = layouts.end() - 1;
    }
    it->members.push_back(i);
    it->columns.push_back(it->width);
    it->width += update_block(vars[i].shape().num_elements(), shards, 0).width;
  }
  return layouts;
}

// Replica `r`'s row of `layout`: block r of each of `blocks` (already cut to
// the block, flat) in its columns, zeros in the padding.
// Copies `count` elements of `esize` bytes from `src` to the member's
// columns [column, column + width) at `dst` and zeroes the rest of them (the
// padding), so a row is written once.
void put_block(std::byte* dst, const void* src, int64_t count, int64_t width, size_t esize) {
  if (count > 0) std::memcpy(dst, src, size_t(count) * esize);
  if (width > count) std::memset(dst + count * int64_t(esize), 0, size_t(width - count) * esize);
}

Tensor pack_row(const RowLayout& layout, const std::vector<Tensor>& blocks) {
  const size_t esize = dtype_size(layout.dtype);
  Tensor row = Tensor::allocate(layout.dtype, TensorShape({1, layout.width}));
  auto* out = static_cast<std::byte*>(row.mutable_raw_data());
  for (size_t k = 0; k < layout.members.size(); ++k) {
    const Tensor& b = blocks[layout.members[k]];
    const int64_t end = k + 1 < layout.members.size() ? layout.columns[k + 1] : layout.width;
    put_block(out + layout.columns[k] * int64_t(esize),
              b.num_elements() > 0 ? b.raw_data() : nullptr, b.num_elements(),
              end - layout.columns[k], esize);
  }
  return row;
}

// Writes the blocks of variable copy `v` into `v`, except block `skip`
// (this replica's, already in place): block q from `row_of(q)` (replica q's
// row of the variable's dtype) at `column`.
template <typename RowOf>
void unpack_into(const Variable& v, RowOf row_of, int64_t column, int shards, int skip) {
  const int64_t n = v.shape().num_elements();
  if (n == 0) return;
  const size_t esize = dtype_size(v.dtype());
  v.update_in_place([&](void* data) {
    auto* out = static_cast<std::byte*>(data);
    for (int q = 0; q < shards; ++q) {
      const UpdateBlock b = update_block(n, shards, q);
      if (q == skip || b.end <= b.begin) continue;
      const std::byte* row = row_of(q);
      std::memcpy(out + b.begin * int64_t(esize), row + column * int64_t(esize),
                  size_t(b.end - b.begin) * esize);
    }
  });
}

// Elements [begin, end) of `t` flattened, as a view.
Tensor flat_block(const Tensor& t, const UpdateBlock& b) {
  return t.reshaped(TensorShape({t.num_elements()})).slice_rows(b.begin, b.end);
}

// Gives this replica's copies the blocks the other replicas updated: block r
// of every copy is packed into one row per dtype, the rows are all-gathered,
// and every other replica's block is written into the copies. The rows are
// packed before any copy is written, and no view of a copy outlives the
// packing (a live view would make the writes copy the whole buffer).
void all_gather_blocks(distribute::ReplicaContext& ctx, const std::vector<Variable>& copies) {
  const int shards = ctx.num_replicas_in_sync();
  const int r = ctx.replica_id_in_sync_group();
  const std::vector<RowLayout> layouts = row_layouts(copies, shards);
  std::vector<Tensor> rows;
  rows.reserve(layouts.size());
  for (const RowLayout& layout : layouts) {
    std::vector<Tensor> blocks(copies.size());
    for (size_t i : layout.members) {
      blocks[i] = flat_block(copies[i].impl().read(),
                             update_block(copies[i].shape().num_elements(), shards, r));
    }
    rows.push_back(pack_row(layout, blocks));
  }
  if (distribute::replicas_share_process(ctx)) {
    // Every replica reads the others' rows where they were packed (once all
    // have packed: the exchange is a barrier) and writes only its own copies.
    const auto all = distribute::exchange_rows_in_process(ctx, rows);
    for (size_t l = 0; l < layouts.size(); ++l) {
      const auto row_of = [&](int q) {
        return static_cast<const std::byte*>((*all)[size_t(q)][l].raw_data());
      };
      for (size_t k = 0; k < layouts[l].members.size(); ++k) {
        unpack_into(copies[layouts[l].members[k]], row_of, layouts[l].columns[k], shards, r);
      }
    }
    return;
  }
  for (size_t l = 0; l < layouts.size(); ++l) {
    const Tensor gathered = distribute::all_gather_rows(ctx, rows[l]);
    const int64_t row_width = gathered.shape().dim(1);
    const size_t esize = dtype_size(layouts[l].dtype);
    const auto row_of = [&](int q) {
      return static_cast<const std::byte*>(gathered.raw_data()) + q * row_width * int64_t(esize);
    };
    for (size_t k = 0; k < layouts[l].members.size(); ++k) {
      unpack_into(copies[layouts[l].members[k]], row_of, layouts[l].columns[k], shards, r);
    }
  }
}

// This replica's block of the SUM of every replica's `values` (each cut to
// its blocks: flat [end - begin], a view), by one reduce-scatter per dtype:
// replica r's rows hold block q of every value of the dtype in row q, and
// the reduce-scatter sums every replica's rows and hands replica q row q.
// Each element is summed across the replicas as the all-reduce sums it
// (element-wise, in the same order), so the blocks are bit-identical to the
// all-reduce's.
std::vector<Tensor> reduce_scatter_blocks(distribute::ReplicaContext& ctx,
                                          const std::vector<Tensor>& values) {
  // Replicas that are threads of one process sum their blocks straight from
  // each other's gradients, with nothing packed.
  if (distribute::replicas_share_process(ctx)) {
    return distribute::reduce_blocks_in_process(ctx, values);
  }
  const int shards = ctx.num_replicas_in_sync();
  const int r = ctx.replica_id_in_sync_group();
  std::vector<Tensor> out(values.size());
  for (const RowLayout& layout : row_layouts(values, shards)) {
    const size_t esize = dtype_size(layout.dtype);
    Tensor rows = Tensor::allocate(layout.dtype, TensorShape({shards, layout.width}));
    auto* dst = static_cast<std::byte*>(rows.mutable_raw_data());
    for (size_t k = 0; k < layout.members.size(); ++k) {
      const Tensor& v = values[layout.members[k]];
      const auto* src = static_cast<const std::byte*>(v.raw_data());
      const int64_t width = update_block(v.num_elements(), shards, 0).width;
      for (int q = 0; q < shards; ++q) {
        const UpdateBlock b = update_block(v.num_elements(), shards, q);
        put_block(dst + (q * layout.width + layout.columns[k]) * int64_t(esize),
                  b.end > b.begin ? src + b.begin * int64_t(esize) : nullptr, b.end - b.begin,
                  width, esize);
      }
    }
    const Tensor mine =
        distribute::reduce_scatter_rows(ctx, rows).reshaped(TensorShape({layout.width}));
    for (size_t k = 0; k < layout.members.size(); ++k) {
      const size_t i = layout.members[k];
      const UpdateBlock b = update_block(values[i].num_elements(), shards, r);
      out[i] = mine.slice_rows(layout.columns[k], layout.columns[k] + (b.end - b.begin));
    }
  }
  return out;
}

// Makes this replica's copies of sharded slots whole: each copy's block
// (either state) is packed into one row per dtype, the rows are
// all-gathered, and every copy takes the whole value assembled from the
// gathered blocks.
void gather_slot_copies(distribute::ReplicaContext& ctx, const std::vector<Variable>& copies) {
  const int shards = ctx.num_replicas_in_sync();
  const std::vector<RowLayout> layouts = row_layouts(copies, shards);
  std::vector<Tensor> rows;
  rows.reserve(layouts.size());
  for (const RowLayout& layout : layouts) {
    std::vector<Tensor> blocks(copies.size());
    for (size_t i : layout.members) blocks[i] = distribute::sharded_slot_block_values(copies[i]);
    rows.push_back(pack_row(layout, blocks));
  }
  for (size_t l = 0; l < layouts.size(); ++l) {
    const Tensor gathered = distribute::all_gather_rows(ctx, rows[l]);
    rows[l] = Tensor();
    const size_t esize = dtype_size(layouts[l].dtype);
    const int64_t row_width = gathered.shape().dim(1);
    const auto* in = static_cast<const std::byte*>(gathered.raw_data());
    for (size_t k = 0; k < layouts[l].members.size(); ++k) {
      const Variable& copy = copies[layouts[l].members[k]];
      const int64_t n = copy.shape().num_elements();
      Tensor whole = Tensor::allocate(copy.dtype(), copy.shape());
      auto* out = static_cast<std::byte*>(whole.mutable_raw_data());
      for (int q = 0; q < shards; ++q) {
        const UpdateBlock b = update_block(n, shards, q);
        if (b.end <= b.begin) continue;
        std::memcpy(out + b.begin * int64_t(esize),
                    in + (q * row_width + layouts[l].columns[k]) * int64_t(esize),
                    size_t(b.end - b.begin) * esize);
      }
      distribute::make_sharded_slot_whole(copy, whole);
    }
  }
}

// Elements [begin, end) of a variable's copy, flattened, as a variable of
// their own (made without the variable-creator stack, which would mirror
// it): reads are views of the copy's buffer and writes land in it, so
// update_step runs on a block with nothing copied in or out. A write while a
// view of the copy is alive copies the whole buffer first (Variable's
// update_in_place), so a write never reads through a view it took itself.
class BlockVariableImpl final : public VariableImpl {
 public:
  BlockVariableImpl(Variable whole, const UpdateBlock& block)
      : whole_(std::move(whole)),
        block_(block),
        shape_({block.end - block.begin}),
        name_(str_cat(whole_.name(), "[", block.begin, ":", block.end, "]")) {}

  Tensor read() const override { return flat_block(whole_.impl().read(), block_); }
  void assign(const Tensor& value) override {
    const size_t esize = dtype_size(dtype());
    whole_.update_in_place([&](void* data) {
      std::memcpy(static_cast<std::byte*>(data) + block_.begin * int64_t(esize), value.raw_data(),
                  value.size_bytes());
    });
  }
  void assign_add(const Tensor& delta) override {
    const Tensor sum = strata::add(read(), delta);
    assign(sum);
  }
  void assign_sub(const Tensor& delta) override {
    const Tensor difference = strata::subtract(read(), delta);
    assign(difference);
  }
  void update_in_place(const std::function<void(void* data)>& fn) override {
    const size_t esize = dtype_size(dtype());
    whole_.update_in_place(
        [&](void* data) { fn(static_cast<std::byte*>(data) + block_.begin * int64_t(esize)); });
  }
  const std::string& name() const override { return name_; }
  const TensorShape& shape() const override { return shape_; }
  DType dtype() const override { return whole_.dtype(); }
  const std::string& device() const override { return whole_.device(); }
  bool trainable() const override { return false; }
  VariableSynchronization synchronization() const override { return VariableSynchronization::NONE; }
  VariableAggregation aggregation() const override { return VariableAggregation::NONE; }

 private:
  Variable whole_;
  UpdateBlock block_;
  TensorShape shape_;
  std::string name_;
};

Variable block_variable(const Variable& whole, const UpdateBlock& block) {
  return Variable(std::make_shared<BlockVariableImpl>(whole, block));
}

}  // namespace

struct Optimizer::DecayPatterns {
  std::vector<std::regex> patterns;
};

Optimizer::~Optimizer() = default;

Optimizer::Optimizer(const std::string& default_name, LearningRate learning_rate,
                     const OptimizerArgs& args)
    : name_(args.name.empty() ? default_name : args.name),
      learning_rate_(std::move(learning_rate)),
      args_(args) {
  STRATA_CHECK_ARG(!(args.clipnorm && args.global_clipnorm), name_,
                   ": at most one of `clipnorm` and `global_clipnorm` can be set, got clipnorm=",
                   *args.clipnorm, ", global_clipnorm=", *args.global_clipnorm);
  for (const auto& [field, value] :
       {std::pair{"clipnorm", args.clipnorm}, std::pair{"clipvalue", args.clipvalue},
        std::pair{"global_clipnorm", args.global_clipnorm}}) {
    STRATA_CHECK_ARG(!value || !std::isnan(*value), name_, ": ", field,
                     " must be a number, got nan");
  }
  iterations_ = Variable(strata::constant<int64_t>(0),
                         {.name = str_cat(name_, "/iteration"), .trainable = false});
  current_learning_rate_ = as_float32(learning_rate_.at(0));
}

int64_t Optimizer::iterations() const { return iterations_.value().item<int64_t>(); }

double Optimizer::learning_rate() const { return current_learning_rate_; }

void Optimizer::set_learning_rate(LearningRate learning_rate) {
  STRATA_CHECK_ARG(!learning_rate_.is_schedule() || learning_rate.is_schedule(), name_,
                   ": this optimizer was created with a LearningRateSchedule as its learning_rate, "
                   "hence its learning rate is not settable to a constant");
  learning_rate_ = std::move(learning_rate);
  current_learning_rate_ = as_float32(learning_rate_.at(iterations()));
}

void Optimizer::exclude_from_weight_decay(const std::vector<Variable>& var_list,
                                          const std::vector<std::string>& var_names) {
  STRATA_CHECK(
      FAILED_PRECONDITION, !built_, name_,
      ": exclude_from_weight_decay() can only be configured before the optimizer is built");
  excluded_from_decay_.clear();
  for (const Variable& v : var_list) excluded_from_decay_.push_back(v.impl_ptr().get());
  std::vector<std::regex> patterns;
  for (const std::string& pattern : var_names) {
    try {
      patterns.emplace_back(pattern);
    } catch (const std::regex_error& e) {
      STRATA_CHECK_ARG(false, name_, ": exclude_from_weight_decay: invalid pattern '", pattern,
                       "': ", e.what());
    }
  }
  excluded_from_decay_patterns_ =
      std::make_unique<DecayPatterns>(DecayPatterns{std::move(patterns)});
}

bool Optimizer::uses_weight_decay(const Variable& variable) const {
  const VariableImpl* id = variable.impl_ptr().get();
  if (std::find(excluded_from_decay_.begin(), excluded_from_decay_.end(), id) !=
      excluded_from_decay_.end()) {
    return false;
  }
  if (excluded_from_decay_patterns_) {
    for (const std::regex& pattern : excluded_from_decay_patterns_->patterns) {
      if (std::regex_search(variable.name(), pattern)) return false;
    }
  }
  return true;
}

std::vector<Variable> Optimizer::variables() const {
  gather_sharded_slots();
  std::vector<Variable> out{iterations_};
  out.insert(out.end(), slot_order_.begin(), slot_order_.end());
  return out;
}

void Optimizer::build(const std::vector<Variable>& var_list) {
  if (built_) return;
  for (const Variable& v : var_list) {
    STRATA_CHECK_ARG(v.defined(), name_, ": build() got an undefined variable");
    built_for_.push_back(v.impl_ptr().get());
  }
  const size_t first_new_slot = slot_records_.size();
  // Slots are sharded (each replica's copy stores only its block) when the
  // updates can be: the strategy of the cross-replica context building them
  // shards weight updates, and the update is element-wise without norm
  // clipping. Which variables qualify add_variable_from_reference decides.
  {
    distribute::Strategy* sharding = nullptr;
    if (update_is_elementwise() && !clips_by_norm() &&
        distribute::get_replica_context() == nullptr &&
        distribute::shards_weight_update(distribute::get_strategy())) {
      sharding = &distribute::get_strategy();
    }
    MutexLock lock(shard_mu_);
    slot_sharding_strategy_ = sharding;
  }
  build_slots(var_list);
  built_ = true;
  for (const SlotCreatedCallback& callback : slot_created_callbacks_) {
    for (size_t i = first_new_slot; i < slot_records_.size(); ++i) callback(slot_records_[i]);
  }
}

void Optimizer::add_slot_created_callback(SlotCreatedCallback callback) {
  STRATA_CHECK_ARG(callback != nullptr, name_, ": add_slot_created_callback got an empty callback");
  slot_created_callbacks_.push_back(std::move(callback));
}

Variable Optimizer::add_variable_from_reference(const Variable& reference,
                                                const std::string& slot_name,
                                                const Tensor& initial) {
  Tensor value = initial.defined() ? initial : strata::zeros(reference.shape(), reference.dtype());
  STRATA_CHECK_ARG(value.shape() == reference.shape() && value.dtype() == reference.dtype(), name_,
                   ": initial value of slot '", slot_name, "' for variable '", reference.name(),
                   "' is ", value.shape(), " ", dtype_name(value.dtype()), ", expected ",
                   reference.shape(), " ", dtype_name(reference.dtype()));
  const auto key = std::pair{reference.impl_ptr().get(), slot_name};
  STRATA_INTERNAL_CHECK(slots_.find(key) == slots_.end(), "slot '", slot_name, "' for variable '",
                        reference.name(), "' made twice");
  const VariableOptions options{.name = str_cat(name_, "/", reference.name(), "/", slot_name),
                                .trainable = false};
  distribute::Strategy* sharding = nullptr;
  {
    MutexLock lock(shard_mu_);
    sharding = slot_sharding_strategy_;
  }
  Variable slot_var;
  if (sharding != nullptr &&
      (reference.dtype() == DType::float32 || reference.dtype() == DType::float64) &&
      distribute::is_mirrored_variable(reference) &&
      distribute::owning_strategy(reference) == sharding &&
      reference.aggregation() == VariableAggregation::NONE) {
    slot_var = distribute::make_sharded_slot_variable(*sharding, VariableArgs{value, options});
    MutexLock lock(shard_mu_);
    made_sharded_slots_ = true;
  } else {
    slot_var = Variable(value, options);
    whole_slot_references_.insert(reference.impl_ptr().get());
  }
  slots_.emplace(key, slot_var);
  slot_order_.push_back(slot_var);
  slot_records_.push_back({reference, slot_name, slot_var});
  return slot_var;
}

const Variable& Optimizer::slot(const Variable& variable, const std::string& slot_name) const {
  {
    // A sharded step's block variables map to their slots' blocks; the map
    // is empty outside sharded steps. Its nodes are stable, and only the
    // replica that inserted an entry erases it.
    MutexLock lock(shard_mu_);
    auto block = block_slots_.find(variable.impl_ptr().get());
    if (block != block_slots_.end()) {
      auto named = block->second.find(slot_name);
      STRATA_INTERNAL_CHECK(named != block->second.end(), name_, " has no slot '", slot_name,
                            "' for variable '", variable.name(), "'");
      return named->second;
    }
  }
  auto it = slots_.find(std::pair{variable.impl_ptr().get(), slot_name});
  STRATA_INTERNAL_CHECK(it != slots_.end(), name_, " has no slot '", slot_name, "' for variable '",
                        variable.name(), "'");
  return it->second;
}

std::vector<Tensor> Optimizer::aggregate_gradients(std::vector<Tensor> gradients) {
  distribute::ReplicaContext* ctx = distribute::get_replica_context();
  if (ctx == nullptr || ctx->num_replicas_in_sync() == 1) return gradients;
  // SUM all-reduce of the connected gradients, as Keras's default
  // aggregation: every replica then applies the same update to its own copy.
  // Every replica must have the same gradients connected (else the
  // collective reports the mismatch on every replica).
  if (std::all_of(gradients.begin(), gradients.end(),
                  [](const Tensor& g) { return g.defined(); })) {
    return ctx->all_reduce(distribute::ReduceOp::SUM, gradients);
  }
  std::vector<Tensor> defined;
  for (const Tensor& g : gradients) {
    if (g.defined()) defined.push_back(g);
  }
  std::vector<Tensor> reduced = ctx->all_reduce(distribute::ReduceOp::SUM, defined);
  std::vector<Tensor> out;
  out.reserve(gradients.size());
  size_t next = 0;
  for (const Tensor& g : gradients) out.push_back(g.defined() ? reduced[next++] : Tensor());
  return out;
}

std::vector<Tensor> Optimizer::clip_gradients(std::vector<Tensor> grads) const {
  // Keras's precedence: clipnorm, else global_clipnorm, else clipvalue; a
  // value <= 0 disables that mode.
  if (args_.clipnorm && *args_.clipnorm > 0) {
    const double c = *args_.clipnorm;
    for (Tensor& g : grads) {
      // tf.clip_by_norm: g * c / max(||g||, c).
      const double norm = std::sqrt(squared_l2(g));
      g = strata::multiply(g, scalar_of(c / std::max(norm, c), g.dtype()));
    }
    return grads;
  }
  if (args_.global_clipnorm && *args_.global_clipnorm > 0) {
    const double c = *args_.global_clipnorm;
    double total = 0.0;
    for (const Tensor& g : grads) total += squared_l2(g);
    const double norm = std::sqrt(total);
    // tf.clip_by_global_norm: scale = c * min(1 / norm, 1 / c); a non-finite
    // norm makes every gradient NaN, as TF.
    const double scale = std::isfinite(norm) ? c * std::min(1.0 / norm, 1.0 / c)
                                             : std::numeric_limits<double>::quiet_NaN();
    for (Tensor& g : grads) g = strata::multiply(g, scalar_of(scale, g.dtype()));
    return grads;
  }
  if (args_.clipvalue && *args_.clipvalue > 0) {
    const double c = *args_.clipvalue;
    for (Tensor& g : grads) {
      g = strata::minimum(strata::maximum(g, scalar_of(-c, g.dtype())), scalar_of(c, g.dtype()));
    }
  }
  return grads;
}

void Optimizer::minimize(const std::function<Tensor()>& loss,
                         const std::vector<Variable>& var_list) {
  STRATA_CHECK_ARG(loss != nullptr, name_, ": minimize got an empty loss function");
  std::vector<Tensor> grads;
  {
    GradientTape tape;
    for (const Variable& v : var_list) tape.watch(v);
    const Tensor value = loss();
    STRATA_CHECK_ARG(value.defined(), name_,
                     ": minimize: the loss function returned an undefined tensor");
    grads = tape.gradient(value, var_list);
  }
  apply_gradients(strata::zip(grads, var_list));
}

void Optimizer::apply_gradients(const GradsAndVars& grads_and_vars,
                                const ApplyGradientsOptions& options) {
  std::vector<Variable> vars;
  std::vector<Tensor> grads;
  vars.reserve(grads_and_vars.size());
  grads.reserve(grads_and_vars.size());
  for (const auto& [g, v] : grads_and_vars) {
    vars.push_back(v);
    grads.push_back(g);
  }
  apply(std::move(grads), std::move(vars), options);
}

void Optimizer::apply(std::vector<Tensor> grads, std::vector<Variable> vars,
                      const ApplyGradientsOptions& options) {
  STRATA_CHECK_ARG(grads.size() == vars.size(), name_, ": apply got ", grads.size(),
                   " gradients for ", vars.size(), " variables");
  if (vars.empty()) {
    current_learning_rate_ = as_float32(learning_rate_.at(iterations()));
    return;
  }
  for (const Variable& v : vars) {
    STRATA_CHECK_ARG(v.defined(), name_, ": apply_gradients got an undefined variable");
  }
  // Under a strategy with several replicas every replica thread runs this
  // once per step: the optimizer's own state must be distributed too (each
  // copy updated by its replica), and its slots are made once, by one thread.
  distribute::ReplicaContext* replica = distribute::get_replica_context();
  if (replica != nullptr && replica->num_replicas_in_sync() > 1) {
    STRATA_CHECK(FAILED_PRECONDITION, distribute::is_distributed_variable(iterations_), name_,
                 ": apply_gradients on ", replica->num_replicas_in_sync(),
                 " replicas needs an optimizer created inside the strategy's scope()");
    if (!built_ && !options.skip_gradients_aggregation) {
      replica->merge_call([&](distribute::Strategy&) { build(vars); });
    }
  }
  // The sharded update (see the header comment) reduce-scatters the
  // gradients of the variables it updates instead of aggregating them.
  bool sharded = false;
  if (replica != nullptr && replica->num_replicas_in_sync() > 1 && built_) {
    std::vector<Variable> connected;
    connected.reserve(vars.size());
    for (size_t i = 0; i < vars.size(); ++i) {
      if (grads[i].defined()) connected.push_back(vars[i]);
    }
    sharded = shards_update(*replica, connected, options);
  }
  // Keras aggregates first (distributed Optimizer.apply_gradients), then runs
  // the base steps.
  if (options.skip_gradients_aggregation) {
    const distribute::ReplicaContext* ctx = distribute::get_replica_context();
    STRATA_CHECK(
        FAILED_PRECONDITION, built_ || ctx == nullptr || ctx->num_replicas_in_sync() == 1, name_,
        ": apply_gradients on ", ctx ? ctx->num_replicas_in_sync() : 1,
        " replicas needs the optimizer built first: call build(trainable_variables) in the "
        "strategy's scope before the training loop");
  } else if (!sharded) {
    grads = aggregate_gradients(std::move(grads));
  }
  STRATA_INTERNAL_CHECK(grads.size() == vars.size(),
                        "aggregate_gradients changed the number of gradients");

  const double lr = as_float32(learning_rate_.at(iterations()));
  current_learning_rate_ = lr;
  build(vars);
  for (const Variable& v : vars) {
    STRATA_CHECK_ARG(
        std::find(built_for_.begin(), built_for_.end(), v.impl_ptr().get()) != built_for_.end(),
        name_, ": the optimizer cannot recognize variable '", v.name(),
        "'; it was built with another list of variables (call build() with the full list "
        "of trainable variables before the training loop, or use a new optimizer)");
  }

  // Drop unconnected variables (Keras's filter_empty_gradients); when every
  // gradient is connected (every step of a usual loop) the lists are kept as
  // they are.
  std::vector<Tensor> kept_grads;
  std::vector<Variable> kept_vars;
  if (std::all_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); })) {
    kept_grads = std::move(grads);
    kept_vars = std::move(vars);
  } else {
    kept_grads.reserve(vars.size());
    kept_vars.reserve(vars.size());
    for (size_t i = 0; i < vars.size(); ++i) {
      if (!grads[i].defined()) continue;
      kept_grads.push_back(grads[i]);
      kept_vars.push_back(vars[i]);
    }
    if (kept_grads.empty()) {
      std::string names;
      for (const Variable& v : vars) names += (names.empty() ? "'" : ", '") + v.name() + "'";
      STRATA_CHECK_ARG(false, name_, ": No gradients provided for any variable: [", names, "]");
    }
  }
  for (size_t i = 0; i < kept_vars.size(); ++i) {
    const Tensor& g = kept_grads[i];
    const Variable& v = kept_vars[i];
    STRATA_CHECK_ARG(g.shape() == v.shape(), name_, ": gradient for variable '", v.name(),
                     "' has shape ", g.shape(), ", expected the variable's shape ", v.shape());
    STRATA_CHECK_ARG(g.dtype() == v.dtype(), name_, ": gradient for variable '", v.name(),
                     "' has dtype ", dtype_name(g.dtype()), ", expected the variable's dtype ",
                     dtype_name(v.dtype()));
  }

  if (sharded) {
    // Each replica receives its block of every reduced gradient; clipvalue
    // (the only clipping left, element-wise) applies to the blocks.
    apply_sharded(*replica, clip_gradients(reduce_scatter_blocks(*replica, kept_grads)), kept_vars,
                  lr);
    iterations_.assign_add(strata::constant<int64_t>(1));
    return;
  }
  kept_grads = clip_gradients(std::move(kept_grads));
  // Every replica takes the same path with the same history, so this
  // gather is collective.
  if (replica != nullptr && replica->num_replicas_in_sync() > 1 &&
      holds_slot_blocks(replica->local_replica_id())) {
    gather_slot_blocks(*replica);
  }
  for (const Variable& v : kept_vars) {
    if (args_.weight_decay && uses_weight_decay(v)) decay_weights(v, lr);
  }
  for (size_t i = 0; i < kept_vars.size(); ++i) update_step(kept_grads[i], kept_vars[i], lr);
  iterations_.assign_add(strata::constant<int64_t>(1));
}

void Optimizer::decay_weights(const Variable& variable, double learning_rate) const {
  if (!args_.weight_decay) return;
  // Keras: variable.assign_sub(variable * wd * lr), in the variable's dtype.
  variable.assign_sub(strata::multiply(
      strata::multiply(variable.value(), scalar_of(*args_.weight_decay, variable.dtype())),
      scalar_of(learning_rate, variable.dtype())));
}

bool Optimizer::clips_by_norm() const {
  return (args_.clipnorm && *args_.clipnorm > 0) ||
         (args_.global_clipnorm && *args_.global_clipnorm > 0);
}

bool Optimizer::shards_update(const distribute::ReplicaContext& ctx,
                              const std::vector<Variable>& vars,
                              const ApplyGradientsOptions& options) const {
  if (!distribute::shards_weight_update(ctx)) return false;
  if (options.skip_gradients_aggregation || !update_is_elementwise() || clips_by_norm()) {
    return false;
  }
  const distribute::Strategy* strategy = &ctx.strategy();
  return std::all_of(vars.begin(), vars.end(), [this, strategy](const Variable& v) {
    return (v.dtype() == DType::float32 || v.dtype() == DType::float64) &&
           distribute::is_mirrored_variable(v) && distribute::owning_strategy(v) == strategy &&
           v.aggregation() == VariableAggregation::NONE &&
           !whole_slot_references_.contains(v.impl_ptr().get());
  });
}

void Optimizer::apply_sharded(distribute::ReplicaContext& ctx,
                              const std::vector<Tensor>& gradient_blocks,
                              const std::vector<Variable>& vars, double learning_rate) {
  const int shards = ctx.num_replicas_in_sync();
  const int r = ctx.replica_id_in_sync_group();
  const auto local = static_cast<size_t>(ctx.local_replica_id());
  // This replica's copies (components) of the variables: blocks are views
  // of them, and the gathered values are written into them.
  std::vector<Variable> copies;
  copies.reserve(vars.size());
  for (const Variable& v : vars) copies.push_back(distribute::distributed_components(v).at(local));
  {
    const distribute::ScopedStepPhase apply(distribute::StepPhase::kApply);
    for (size_t i = 0; i < vars.size(); ++i) {
      const Variable& v = vars[i];
      const UpdateBlock b = update_block(v.shape().num_elements(), shards, r);
      // The slots' copies store block r (a whole copy drops the rest here,
      // an empty block included).
      std::map<std::string, Variable> slot_blocks;
      const VariableImpl* id = v.impl_ptr().get();
      for (auto it = slots_.lower_bound(std::pair{id, std::string()});
           it != slots_.end() && it->first.first == id; ++it) {
        slot_blocks.emplace(it->first.second,
                            distribute::sharded_slot_block(
                                distribute::distributed_components(it->second).at(local)));
      }
      if (b.end <= b.begin) continue;
      const Variable block = block_variable(copies[i], b);
      {
        MutexLock lock(shard_mu_);
        block_slots_[block.impl_ptr().get()] = std::move(slot_blocks);
      }
      try {
        if (args_.weight_decay && uses_weight_decay(v)) decay_weights(block, learning_rate);
        update_step(gradient_blocks[i], block, learning_rate);
      } catch (...) {
        MutexLock lock(shard_mu_);
        block_slots_.erase(block.impl_ptr().get());
        throw;
      }
      MutexLock lock(shard_mu_);
      block_slots_.erase(block.impl_ptr().get());
    }
  }
  // One all-gather per dtype of every variable's new block.
  all_gather_blocks(ctx, copies);
}

std::vector<Variable> Optimizer::sharded_slot_copies(int local_replica) const {
  std::vector<Variable> copies;
  for (const Variable& s : slot_order_) {
    if (distribute::is_sharded_slot_variable(s)) {
      copies.push_back(distribute::distributed_components(s).at(size_t(local_replica)));
    }
  }
  return copies;
}

void Optimizer::gather_slot_blocks(distribute::ReplicaContext& ctx) const {
  const std::vector<Variable> copies = sharded_slot_copies(ctx.local_replica_id());
  if (!copies.empty()) gather_slot_copies(ctx, copies);
}

bool Optimizer::holds_slot_blocks(int local_replica) const {
  {
    MutexLock lock(shard_mu_);
    if (!made_sharded_slots_) return false;
  }
  const std::vector<Variable> copies = sharded_slot_copies(local_replica);
  return std::any_of(copies.begin(), copies.end(), distribute::holds_block);
}

bool Optimizer::slots_sharded() const {
  for (const Variable& s : slot_order_) {
    if (!distribute::is_sharded_slot_variable(s)) continue;
    for (const Variable& copy : distribute::distributed_components(s)) {
      if (distribute::holds_block(copy)) return true;
    }
  }
  return false;
}

int64_t Optimizer::slot_bytes(int local_replica) const {
  int64_t total = 0;
  for (const Variable& s : slot_order_) {
    const std::vector<Variable> copies = distribute::distributed_components(s);
    STRATA_CHECK_ARG(local_replica >= 0 && size_t(local_replica) < copies.size(), name_,
                     ": slot_bytes: local replica ", local_replica, " out of range [0, ",
                     copies.size(), ")");
    total += distribute::held_bytes(copies[size_t(local_replica)]);
  }
  return total;
}

void Optimizer::gather_sharded_slots() const {
  distribute::ReplicaContext* ctx = distribute::get_replica_context();
  if (ctx != nullptr && ctx->num_replicas_in_sync() > 1) {
    if (holds_slot_blocks(ctx->local_replica_id())) gather_slot_blocks(*ctx);
    return;
  }
  if (!slots_sharded()) return;
  distribute::Strategy* strategy = nullptr;
  {
    MutexLock lock(shard_mu_);
    strategy = slot_sharding_strategy_;
  }
  STRATA_INTERNAL_CHECK(strategy != nullptr, name_, ": sharded slots without a strategy");
  strategy->run([this] { gather_slot_blocks(*distribute::get_replica_context()); });
}

}  // namespace strata::keras::optimizers
