#include "strata/distribute/sharded_variable.h"

#include <algorithm>
#include <utility>

#include "strata/base/errors.h"
#include "strata/core/device.h"
#include "strata/distribute/partitioners.h"
#include "strata/ops/array_ops.h"

namespace strata::distribute {

// The container behind both ShardedVariable and its Variable handle.
class ShardedVariableImpl final : public VariableImpl {
 public:
  ShardedVariableImpl(std::string name, std::vector<Variable> shards)
      : name_(std::move(name)), shards_(std::move(shards)) {
    const Variable& first = shards_.front();
    offsets_.reserve(shards_.size() + 1);
    offsets_.push_back(0);
    for (const Variable& s : shards_) offsets_.push_back(offsets_.back() + s.shape().dim(0));
    shape_ = first.shape().with_dim(0, offsets_.back());
    // TF routes ids with the div formula; it only holds for the div layout,
    // so other layouts (built from existing variables) route by offsets.
    const int64_t rows = offsets_.back();
    const auto k = static_cast<int64_t>(shards_.size());
    if (k <= std::max<int64_t>(rows, 1)) {
      const std::vector<int64_t> expected = div_layout(rows, k);
      is_div_ = true;
      for (int64_t i = 0; i < k; ++i)
        is_div_ = is_div_ && expected[i] == offsets_[i + 1] - offsets_[i];
    }
  }

  // Concatenates one read of every shard. The shard reads go through
  // Variable::value(), so a tape watches each shard and records the concat.
  Tensor read() const override {
    std::vector<Tensor> parts;
    parts.reserve(shards_.size());
    for (const Variable& s : shards_) parts.push_back(s.value());
    return parts.size() == 1 ? parts.front() : concat(parts, 0);
  }
  void assign(const Tensor& value) override {
    for_each_shard(value, [](const Variable& s, const Tensor& part) { s.assign(part); });
  }
  void assign_add(const Tensor& delta) override {
    for_each_shard(delta, [](const Variable& s, const Tensor& part) { s.assign_add(part); });
  }
  void assign_sub(const Tensor& delta) override {
    for_each_shard(delta, [](const Variable& s, const Tensor& part) { s.assign_sub(part); });
  }

  const std::string& name() const override { return name_; }
  const TensorShape& shape() const override { return shape_; }
  DType dtype() const override { return shards_.front().dtype(); }
  const std::string& device() const override { return shards_.front().device(); }
  bool trainable() const override { return shards_.front().trainable(); }
  VariableSynchronization synchronization() const override {
    return shards_.front().synchronization();
  }
  VariableAggregation aggregation() const override { return shards_.front().aggregation(); }

  std::string repr() const override {
    std::string s = "ShardedVariable:{\n";
    for (size_t i = 0; i < shards_.size(); ++i) {
      s += str_cat("  ", i, ": ", shards_[i].to_string(), "\n");
    }
    return s + "}";
  }

  const std::vector<Variable>& shards() const noexcept { return shards_; }
  const std::vector<int64_t>& offsets() const noexcept { return offsets_; }

  // The shard holding `row`, which the caller has checked is in [0, rows).
  int64_t route(int64_t row) const {
    const auto k = static_cast<int64_t>(shards_.size());
    if (is_div_) {
      // TF's div assignment: rows in the first r shards (q + 1 rows each)
      // give row / (q + 1); the others give (row - r) / q; the max is right
      // for both. Floor division, as Python's // (row - r may be negative).
      const int64_t rows = offsets_.back();
      const int64_t q = rows / k;
      const int64_t r = rows % k;
      const int64_t a = row / (q + 1);
      const int64_t b = (row - r) >= 0 ? (row - r) / q : -1;
      return std::max(a, b);
    }
    // First shard whose end is past `row` (skips empty shards).
    const auto it = std::upper_bound(offsets_.begin() + 1, offsets_.end(), row);
    return static_cast<int64_t>(it - (offsets_.begin() + 1));
  }

 private:
  template <typename Fn>
  void for_each_shard(const Tensor& full, const Fn& fn) const {
    for (size_t i = 0; i < shards_.size(); ++i)
      fn(shards_[i], full.slice_rows(offsets_[i], offsets_[i + 1]));
  }

  std::string name_;
  std::vector<Variable> shards_;
  std::vector<int64_t> offsets_;
  TensorShape shape_;
  bool is_div_ = false;
};

namespace {

Variable default_shard_creator(int64_t /*shard_index*/, int64_t /*num_shards*/, VariableArgs args) {
  return Variable(args.initial_value, std::move(args.options));
}

// Makes the shards of a variable of `shape` and `dtype` in the div layout;
// `init_of(info)` gives shard values (checked against the shard's shape).
ShardedVariable build_shards(const TensorShape& shape, DType dtype, int64_t num_shards,
                             const ShardInitializer& init_of, const VariableOptions& options,
                             const ShardCreator& shard_creator, const std::string& who) {
  STRATA_CHECK_ARG(num_shards >= 1, who, ": expected num_shards >= 1, got ", num_shards);
  const int64_t rows = shape.dim(0);
  const int64_t k = std::max<int64_t>(1, std::min(num_shards, rows));
  const std::vector<int64_t> sizes = div_layout(rows, k);
  const ShardCreator creator = shard_creator ? shard_creator : ShardCreator(default_shard_creator);
  const std::string& name = options.name;
  std::vector<Variable> shards;
  shards.reserve(static_cast<size_t>(k));
  int64_t offset = 0;
  for (int64_t i = 0; i < k; ++i) {
    ShardInfo info{shape.with_dim(0, sizes[i]), std::vector<int64_t>(shape.rank(), 0)};
    info.offset[0] = offset;
    Tensor value = init_of(info);
    STRATA_CHECK_ARG(value.defined() && value.shape() == info.shape && value.dtype() == dtype, who,
                     "(", name, "): expected the initial value of shard ", i, " to have shape ",
                     info.shape, " and dtype ", dtype_name(dtype), ", got ",
                     value.defined() ? str_cat(value.shape(), " ", dtype_name(value.dtype()))
                                     : std::string("an empty tensor"));
    VariableOptions shard_options = options;
    shard_options.name = str_cat(name, "/part_", i);
    Variable shard = creator(i, k, VariableArgs{std::move(value), std::move(shard_options)});
    STRATA_CHECK_ARG(shard.defined() && shard.shape() == info.shape && shard.dtype() == dtype, who,
                     "(", name, "): expected the shard creator to return a variable of shape ",
                     info.shape, " and dtype ", dtype_name(dtype), " for shard ", i, ", got ",
                     shard.defined() ? str_cat(shard.shape(), " ", dtype_name(shard.dtype()))
                                     : std::string("an empty handle"));
    shards.push_back(std::move(shard));
    offset += sizes[i];
  }
  return ShardedVariable(std::move(shards), name);
}

std::vector<int64_t> ids_as_int64(const Tensor& ids) {
  if (ids.dtype() == DType::int64) return ids.to_vector<int64_t>();
  const std::vector<int32_t> narrow = ids.to_vector<int32_t>();
  return std::vector<int64_t>(narrow.begin(), narrow.end());
}

}  // namespace

ShardCreator place_shards_round_robin(std::vector<std::string> devices) {
  STRATA_CHECK_ARG(!devices.empty(),
                   "place_shards_round_robin: expected at least one device, got none");
  return [devices = std::move(devices)](int64_t shard_index, int64_t /*num_shards*/,
                                        VariableArgs args) {
    auto scope = strata::device(devices[static_cast<size_t>(shard_index) % devices.size()]);
    return Variable(args.initial_value, std::move(args.options));
  };
}

ShardedVariable::ShardedVariable(std::vector<Variable> variables, std::string name) {
  STRATA_CHECK_ARG(!variables.empty(),
                   "ShardedVariable: argument `variables` should be a non-empty list of "
                   "variables, got an empty list");
  std::vector<std::string> dtypes;
  std::vector<TensorShape> shapes;
  for (size_t i = 0; i < variables.size(); ++i) {
    const Variable& v = variables[i];
    STRATA_CHECK_ARG(v.defined(), "ShardedVariable: variables[", i, "] is an empty handle");
    STRATA_CHECK_ARG(v.shape().rank() >= 1, "ShardedVariable: expected shards of rank >= 1, got ",
                     "variables[", i, "] '", v.name(), "' of shape ", v.shape());
    for (size_t j = 0; j < i; ++j) {
      STRATA_CHECK_ARG(!v.is_same(variables[j]), "ShardedVariable: variables[", j,
                       "] and variables[", i, "] are the same variable '", v.name(), "'");
    }
    dtypes.emplace_back(dtype_name(v.dtype()));
    shapes.push_back(v.shape());
  }
  for (size_t i = 1; i < variables.size(); ++i) {
    STRATA_CHECK_ARG(variables[i].dtype() == variables[0].dtype(),
                     "ShardedVariable: all elements in argument `variables` must have the same "
                     "dtype. Received dtypes: ",
                     dtypes);
  }
  for (size_t i = 1; i < variables.size(); ++i) {
    STRATA_CHECK_ARG(
        shapes[i].sub_shape(1, shapes[i].rank()) == shapes[0].sub_shape(1, shapes[0].rank()),
        "ShardedVariable: all elements in argument `variables` must have the same "
        "shapes except for the first axis. Received shapes: ",
        shapes);
  }
  impl_ = std::make_shared<ShardedVariableImpl>(std::move(name), std::move(variables));
}

ShardedVariable ShardedVariable::create(const Tensor& initial_value, int64_t num_shards,
                                        const VariableOptions& options,
                                        const ShardCreator& shard_creator) {
  const char* who = "ShardedVariable::create";
  STRATA_CHECK_ARG(initial_value.defined(), who, "(", options.name,
                   "): expected an initial value, got an empty tensor");
  STRATA_CHECK_ARG(initial_value.rank() >= 1, who, "(", options.name,
                   "): expected an initial value of rank >= 1, got shape ", initial_value.shape());
  const ShardInitializer slice_of = [&initial_value](const ShardInfo& info) {
    return initial_value.slice_rows(info.offset[0], info.offset[0] + info.shape.dim(0));
  };
  return build_shards(initial_value.shape(), initial_value.dtype(), num_shards, slice_of, options,
                      shard_creator, who);
}

ShardedVariable ShardedVariable::create(const TensorShape& shape, DType dtype,
                                        const ShardInitializer& init, int64_t num_shards,
                                        const VariableOptions& options,
                                        const ShardCreator& shard_creator) {
  const char* who = "ShardedVariable::create";
  STRATA_CHECK_ARG(shape.has_known_rank() && shape.is_fully_defined() && shape.rank() >= 1, who,
                   "(", options.name, "): expected a fully defined shape of rank >= 1, got ",
                   shape);
  STRATA_CHECK_ARG(static_cast<bool>(init), who, "(", options.name,
                   "): expected a shard initializer, got an empty function");
  return build_shards(shape, dtype, num_shards, init, options, shard_creator, who);
}

std::optional<ShardedVariable> ShardedVariable::from_variable(const Variable& v) {
  auto impl = std::dynamic_pointer_cast<ShardedVariableImpl>(v.impl_ptr());
  if (impl == nullptr) return std::nullopt;
  return ShardedVariable(std::move(impl));
}

Variable ShardedVariable::as_variable() const {
  impl();  // FailedPreconditionError on an empty handle
  return Variable(std::static_pointer_cast<VariableImpl>(impl_));
}

const ShardedVariableImpl& ShardedVariable::impl() const {
  STRATA_CHECK(FAILED_PRECONDITION, impl_ != nullptr,
               "ShardedVariable: expected a sharded variable, got an empty (default-constructed) "
               "handle");
  return *impl_;
}

const std::string& ShardedVariable::name() const { return impl().name(); }
const TensorShape& ShardedVariable::shape() const { return impl().shape(); }
DType ShardedVariable::dtype() const { return impl().dtype(); }
const std::vector<Variable>& ShardedVariable::variables() const { return impl().shards(); }
const std::vector<int64_t>& ShardedVariable::offsets() const { return impl().offsets(); }

std::vector<int64_t> ShardedVariable::shard_rows() const {
  const std::vector<int64_t>& off = offsets();
  std::vector<int64_t> rows;
  for (size_t i = 0; i + 1 < off.size(); ++i) rows.push_back(off[i + 1] - off[i]);
  return rows;
}

int64_t ShardedVariable::shard_of(int64_t row) const {
  const int64_t rows = shape().dim(0);
  STRATA_CHECK_ARG(row >= 0 && row < rows, "ShardedVariable(", name(), "): row ", row,
                   " is not in [0, ", rows, ")");
  return impl().route(row);
}

Tensor ShardedVariable::value() const { return as_variable().value(); }
void ShardedVariable::assign(const Tensor& value) const { as_variable().assign(value); }
void ShardedVariable::assign_add(const Tensor& delta) const { as_variable().assign_add(delta); }
void ShardedVariable::assign_sub(const Tensor& delta) const { as_variable().assign_sub(delta); }

Tensor ShardedVariable::embedding_lookup(const Tensor& ids) const {
  const ShardedVariableImpl& im = impl();
  STRATA_CHECK_ARG(ids.defined(), "embedding_lookup(", name(),
                   "): expected ids, got an empty tensor");
  STRATA_CHECK_ARG(ids.dtype() == DType::int32 || ids.dtype() == DType::int64, "embedding_lookup(",
                   name(), "): expected int32 or int64 ids, got ", dtype_name(ids.dtype()));
  const std::vector<int64_t> flat = ids_as_int64(ids);
  const int64_t rows = shape().dim(0);
  const std::vector<Variable>& shards = im.shards();
  const std::vector<int64_t>& off = im.offsets();

  // Per shard: the local row of every id routed there, in the ids' order.
  std::vector<std::vector<int64_t>> local(shards.size());
  std::vector<int64_t> shard_of_id(flat.size());
  for (size_t p = 0; p < flat.size(); ++p) {
    const int64_t id = flat[p];
    STRATA_CHECK_ARG(id >= 0 && id < rows, "embedding_lookup(", name(), "): ids[", p, "] = ", id,
                     " is not in [0, ", rows, ")");
    const int64_t s = im.route(id);
    shard_of_id[p] = s;
    local[static_cast<size_t>(s)].push_back(id - off[static_cast<size_t>(s)]);
  }

  // Gather on each shard some id falls in; blocks follow shard order.
  std::vector<Tensor> parts;
  std::vector<int64_t> block_start(shards.size(), 0);
  int64_t stacked_rows = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    block_start[s] = stacked_rows;
    if (local[s].empty()) continue;
    const auto n = static_cast<int64_t>(local[s].size());
    parts.push_back(gather(shards[s].value(), constant(local[s], TensorShape{n}), 0));
    stacked_rows += n;
  }
  Tensor stacked;
  if (parts.empty()) {
    // No ids: an empty result of the right shape and dtype.
    stacked = gather(shards.front().value(), constant(std::vector<int64_t>{}, TensorShape{0}), 0);
  } else {
    stacked = parts.size() == 1 ? parts.front() : concat(parts, 0);
  }
  // Position of id p inside `stacked`; gather back into the ids' order
  // unless the ids already came in shard order.
  std::vector<int64_t> order(flat.size());
  std::vector<int64_t> taken(shards.size(), 0);
  bool identity = true;
  for (size_t p = 0; p < flat.size(); ++p) {
    const auto s = static_cast<size_t>(shard_of_id[p]);
    order[p] = block_start[s] + taken[s]++;
    identity = identity && order[p] == static_cast<int64_t>(p);
  }
  Tensor out =
      identity
          ? stacked
          : gather(stacked, constant(order, TensorShape{static_cast<int64_t>(order.size())}), 0);
  std::vector<int64_t> result_dims = ids.shape().dims();
  for (int i = 1; i < shape().rank(); ++i) result_dims.push_back(shape().dim(i));
  return reshape(out, result_dims);
}

std::string ShardedVariable::to_string() const {
  return impl_ ? impl_->repr() : std::string("<ShardedVariable (empty handle)>");
}

std::ostream& operator<<(std::ostream& os, const ShardedVariable& v) { return os << v.to_string(); }

Tensor embedding_lookup(const ShardedVariable& params, const Tensor& ids) {
  return params.embedding_lookup(ids);
}

bool is_sharded_variable(const Variable& v) {
  return std::dynamic_pointer_cast<ShardedVariableImpl>(v.impl_ptr()) != nullptr;
}

}  // namespace strata::distribute
