#pragma once
// ShardedVariable: one logical variable stored as several shard Variables
// split along axis 0 (TF's ShardedVariable, what ParameterServerStrategy
// makes of a partitioned variable, spec §9).
//
//   namespace sd = strata::distribute;
//   auto table = strata::reshape(strata::range(0, 26), {13, 2});
//   auto emb = sd::ShardedVariable::create(table, /*num_shards=*/5, {.name = "emb"});
//   emb.shard_rows();                       // {3, 3, 3, 2, 2} ("div" layout)
//   emb.variables()[3].name();              // "emb/part_3"
//   emb.value();                            // the full [13, 2] tensor (concat on axis 0)
//   emb.assign_add(strata::ones_like(table));   // split per shard
//   strata::Tensor rows = sd::embedding_lookup(emb, strata::constant<int64_t>({12, 0, 3}));
//   strata::Variable handle = emb.as_variable();   // behind the ordinary Variable handle
//   sd::ShardedVariable::from_variable(handle)->num_shards();   // 5
//
// Layout: shard i holds rows [offsets()[i], offsets()[i + 1]) of the full
// variable. create() uses TF's "div" layout (the first rows % k shards get
// one more row: 13 rows in 5 shards -> 3,3,3,2,2; 10 in 3 -> 4,3,3) with
// k = min(num_shards, rows), as the strategy caps it (3 rows asked in 5
// shards -> 3 shards of one row). The constructor from existing variables
// accepts any first-axis sizes (TF's ShardedVariable(variables)).
//
// Reads: value() / read_value() (and reading the as_variable() handle)
// concatenate one read of every shard; each shard read is atomic, the whole
// read is not a snapshot across shards (as TF: shards are separate
// variables). Writes: assign / assign_add / assign_sub take a full-shape
// value (InvalidArgumentError naming the variable and both shapes otherwise)
// and apply row slice [offsets[i], offsets[i+1]) to shard i.
//
// embedding_lookup(ids) (tf.nn.embedding_lookup on a ShardedVariable, the
// "div" partition strategy of TF2): routes every id to its shard (for the div
// layout shard = max(id / (q + 1), (id - r) / q), q = rows / k, r = rows % k),
// reads only the shards some id falls in, gathers there and restores the ids'
// order. The result has shape ids.shape + shape[1:]. ids must be int32 or
// int64; an id outside [0, rows) is InvalidArgumentError naming the id, its
// position and the range.
//
// Gradients: shard reads are ordinary Variable reads, so a GradientTape
// watches them; the concat and gather ops are recorded, so
// tape.gradient(loss, emb.variables()) gives one gradient per shard, both for
// losses built on value() and on embedding_lookup(). A gradient with respect
// to the as_variable() handle is the gradient of its full value: connected
// when the loss read the handle / value(), not through embedding_lookup
// (whose reads are per shard; ask for the shards' gradients there).
//
// Placement hook: create()'s `shard_creator` makes shard i from its
// VariableArgs and returns it, living wherever the hook chose (the
// ParameterServerStrategy places shards round-robin on ps tasks through it).
// The default creates `Variable(args.initial_value, args.options)` through
// this thread's variable-creator stack on the current device;
// place_shards_round_robin(devices) is a hook for local devices.
//
// Designed beyond TensorFlow:
//   - create() from a shape, dtype and a ShardInitializer (TF's initial_value
//     callable taking shard_info) builds each shard from its ShardInfo
//     without materialising the full value.
//   - The container takes the variable's name (TF's PS strategy leaves the
//     default "ShardedVariable"); shards are "<name>/part_<i>" as TF.
//   - A variable with 0 rows gets one empty shard (TF divides by zero).
//   - embedding_lookup on a layout that is not "div" (built from existing
//     variables) routes by the shards' offsets instead of the div formula
//     (TF would route wrongly); max_norm is not offered.
//   - as_variable() / from_variable() put the container behind the ordinary
//     Variable handle (so variable creators can return it); its device() is
//     shard 0's, trainable/synchronization/aggregation are shard 0's.
//
// Thread-safety: a ShardedVariable is a cheap handle to an immutable list of
// shards; the shards are thread-safe Variables, so every method is
// thread-safe.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/core/variable.h"

namespace strata::distribute {

// Where a shard sits inside the full variable (TF's trackable.ShardInfo).
struct ShardInfo {
  TensorShape shape;            // the shard's shape
  std::vector<int64_t> offset;  // its offset on every axis (only axis 0 is non-zero)
};

// Builds one shard's initial value; must return a tensor of info.shape and
// the variable's dtype.
using ShardInitializer = std::function<Tensor(const ShardInfo& info)>;

// The placement hook: creates shard `shard_index` (of `num_shards`) from
// `args` (its initial value and options, name already "<name>/part_<i>").
using ShardCreator =
    std::function<Variable(int64_t shard_index, int64_t num_shards, VariableArgs args)>;

// A ShardCreator that creates shard i under strata::device(devices[i %
// devices.size()]) (local logical devices, e.g. {"CPU:0", "CPU:1"}).
// InvalidArgumentError if `devices` is empty; NotFoundError (when a shard is
// created) for a device that does not exist.
ShardCreator place_shards_round_robin(std::vector<std::string> devices);

class ShardedVariableImpl;

class ShardedVariable {
 public:
  // An empty handle (defined() == false); any other use raises FailedPreconditionError.
  ShardedVariable() = default;
  // Treats `variables` as the shards, in order, of a larger variable
  // (TF's ShardedVariable(variables, name)). InvalidArgumentError if the list
  // is empty, a handle is empty, a shard has rank 0, the dtypes differ, the
  // shapes differ beyond axis 0, or a variable appears twice.
  explicit ShardedVariable(std::vector<Variable> variables, std::string name = "ShardedVariable");

  // Splits `initial_value` (rank >= 1) into min(num_shards, rows) shards in
  // the div layout (one shard when rows == 0). `options` are the logical
  // variable's: its name names the container and the shards
  // ("<name>/part_<i>"); every shard gets its trainable, synchronization and
  // aggregation. `shard_creator` is the placement hook; empty:
  // Variable(args.initial_value, args.options) on the current device.
  // InvalidArgumentError if the value is undefined or rank 0, or
  // num_shards < 1.
  static ShardedVariable create(const Tensor& initial_value, int64_t num_shards,
                                const VariableOptions& options = {},
                                const ShardCreator& shard_creator = {});
  // The same from a shape and dtype: shard i's initial value is
  // init(ShardInfo{shard shape, {offset_i, 0, ...}}); InvalidArgumentError
  // naming the shard if it returns another shape or dtype.
  static ShardedVariable create(const TensorShape& shape, DType dtype, const ShardInitializer& init,
                                int64_t num_shards, const VariableOptions& options = {},
                                const ShardCreator& shard_creator = {});

  // The ShardedVariable behind a handle made by as_variable(); std::nullopt
  // for any other Variable.
  static std::optional<ShardedVariable> from_variable(const Variable& v);
  // This container behind the ordinary Variable handle: reading it is
  // value(), assigning it is assign() (the handle checks shape and dtype).
  Variable as_variable() const;

  bool defined() const noexcept { return impl_ != nullptr; }
  const std::string& name() const;
  // The full shape: the shards' first dimensions summed, the other dimensions as the shards'.
  const TensorShape& shape() const;
  DType dtype() const;
  // The shards, in order (TF's .variables).
  const std::vector<Variable>& variables() const;
  int64_t num_shards() const { return static_cast<int64_t>(variables().size()); }
  // Rows of each shard, and the row offsets: offsets()[i] is shard i's first
  // row, offsets()[num_shards()] == shape()[0].
  std::vector<int64_t> shard_rows() const;
  const std::vector<int64_t>& offsets() const;
  // The shard that row `row` lives in; InvalidArgumentError outside [0, rows).
  int64_t shard_of(int64_t row) const;

  // The full value (concat of the shards on axis 0), reported to this
  // thread's tape like a variable read of every shard.
  Tensor value() const;
  Tensor read_value() const { return value(); }

  void assign(const Tensor& value) const;
  void assign_add(const Tensor& delta) const;
  void assign_sub(const Tensor& delta) const;

  // See the file comment. Result: ids.shape + shape()[1:].
  Tensor embedding_lookup(const Tensor& ids) const;

  bool is_same(const ShardedVariable& other) const noexcept { return impl_ == other.impl_; }
  // "ShardedVariable:{\n  0: <tf.Variable 'emb/part_0:0' ...>\n ...}".
  std::string to_string() const;

 private:
  explicit ShardedVariable(std::shared_ptr<ShardedVariableImpl> impl) : impl_(std::move(impl)) {}
  const ShardedVariableImpl& impl() const;

  std::shared_ptr<ShardedVariableImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const ShardedVariable& v);

// tf.nn.embedding_lookup(params, ids) for a ShardedVariable (params.embedding_lookup(ids)).
Tensor embedding_lookup(const ShardedVariable& params, const Tensor& ids);

// True when `v` is the as_variable() handle of a ShardedVariable.
bool is_sharded_variable(const Variable& v);

}  // namespace strata::distribute
