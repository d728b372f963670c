#pragma once
// Trackables: the objects a train::Checkpoint saves, as a graph with named
// edges (TensorFlow's tf.train.Checkpoint object model).
//
//   train::Checkpoint ckpt({{"model", model},          // keras::Layer / Model
//                           {"optimizer", optimizer},  // keras optimizer: "iter" and its slots
//                           {"step", step}});          // strata::Variable
//
// Every value above converts implicitly to a TrackableRef, a handle on a
// Trackable adapter. What each kind contributes:
//   - Variable: no children; one saveable tensor, VARIABLE_VALUE (its value).
//     Two handles on one variable are one object.
//   - keras::Layer (models included): its own weights under the names given
//     to add_weight ("kernel", "bias", "moving_mean"); each nested layer
//     registered with track_layer as "layer-<i>" (its position) and, when it
//     has weights, also as "layer_with_weights-<k>" (its position among those
//     that have weights), Keras's names for a Sequential's or functional
//     model's layers; for a compiled Model, its optimizer as "optimizer".
//     Weights created later (lazy build) are announced to a restore waiting
//     for them (deferred restoration, keras::Layer::add_weight_created_callback).
//   - keras optimizer: "iter" (its iterations variable) and its slot
//     variables, each keyed by the variable it belongs to and the slot name
//     (TF's slot_variables), created later at the first apply_gradients and
//     then restored (keras Optimizer::add_slot_created_callback).
//   - distribute::ShardedVariable: as a Variable holding the full value.
//   - random::Generator: its state variable as the child "_state_var" (TF's).
//   - train::Checkpoint (nested): its named children and its save_counter.
//   - a dataset iterator (data::Iterator, distribute::DistributedIterator):
//     no children; one saveable tensor, ITERATOR_STATE (its position, the
//     uint8 bytes of strata/data/iterator_state.h). The checkpoint shares the
//     iterator's state, so it may be moved or outlived by the checkpoint.
// Other state joins by implementing Trackable: named children,
// saveable tensors, and optionally the creation callbacks that deferred restoration uses.
//
// Thread-safety: adapters hold shared handles and are immutable; what they
// read and assign is the underlying object's business.

#include <concepts>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/core/variable.h"
#include "strata/data/iterator_state.h"

namespace strata::keras {
class Layer;
}
namespace strata::keras::optimizers {
class Optimizer;
}

namespace strata::train {

class Checkpoint;
class TrackableRef;

// One tensor an object saves, under an attribute name (a checkpoint key ends
// in "/.ATTRIBUTES/<attribute>"; a variable's is "VARIABLE_VALUE").
struct SaveableTensor {
  std::string attribute;
  // The value to write.
  std::function<Tensor()> save;
  // Throws InvalidArgumentError (naming what differs) when `value` cannot be
  // restored here. Restores run every check before any restore assigns.
  std::function<void(const Tensor& value)> check;
  // Assigns `value` (already checked).
  std::function<void(const Tensor& value)> restore;
};

// An optimizer slot: the variable it belongs to (by identity), its name, and
// the slot variable.
struct SlotVariableRef {
  const void* original_identity;
  std::string slot_name;
  Variable slot;
};

// The interface behind every trackable (TF's trackable.base.Trackable).
class Trackable {
 public:
  virtual ~Trackable() = default;
  // The underlying object (a VariableImpl, a Layer, ...): an object reached
  // by two paths, or through two adapters, is one node of the graph.
  virtual const void* identity() const = 0;
  // A short description for messages ("Variable 'dense/kernel'", "layer 'dense'").
  virtual std::string description() const = 0;
  // Named edges to the children that exist now, in a fixed order (it decides
  // which of two paths to an object names its tensors: the first found
  // breadth-first).
  virtual std::vector<std::pair<std::string, TrackableRef>> children() const;
  virtual std::vector<SaveableTensor> saveables() const { return {}; }
  // Optimizer slots (others have none).
  virtual std::vector<SlotVariableRef> slot_variables() const { return {}; }
  // The variable behind a Variable's adapter (others: an empty handle); a
  // checkpoint asks it which strategy owns its variables.
  virtual Variable variable() const { return {}; }

  // Deferred restoration. An object whose children can appear later calls
  // `callback(name, child)` for each child created after this call and
  // returns true; false (the default) when it never creates children later.
  using ChildCreatedCallback =
      std::function<void(const std::string& name, const TrackableRef& child)>;
  virtual bool add_child_created_callback(const ChildCreatedCallback& callback);
  // Likewise for slot variables created later (optimizers).
  using SlotCreatedCallback = std::function<void(const SlotVariableRef& slot)>;
  virtual bool add_slot_created_callback(const SlotCreatedCallback& callback);
};

// A handle on a Trackable, made implicitly from what a Checkpoint accepts.
class TrackableRef {
 public:
  TrackableRef(const Variable& variable);  // NOLINT(google-explicit-constructor): as TF's kwargs
  TrackableRef(const Checkpoint& checkpoint);  // NOLINT(google-explicit-constructor)
  // A ShardedVariable (distribute/sharded_variable.h): saved as one full
  // tensor through its as_variable() handle, as TF saves a ShardedVariable's
  // full value, so it restores into any number of shards or a plain Variable.
  template <typename T>
  TrackableRef(const T& sharded)  // NOLINT(google-explicit-constructor)
      requires requires(const T& t) {
    { t.as_variable() } -> std::convertible_to<Variable>;
    t.num_shards();
  } : TrackableRef(Variable(sharded.as_variable())) {
  }
  // A random::Generator: one child, its state variable, under TF's name "_state_var".
  template <typename T>
  TrackableRef(const T& generator)  // NOLINT(google-explicit-constructor)
      requires requires(const T& t) {
    { t.state() } -> std::convertible_to<Variable>;
    { t.algorithm() } -> std::convertible_to<const char*>;
  } : trackable_(adapt_generator(generator.state())) {
  }
  // A dataset iterator: anything whose checkpointable() gives its shared position.
  template <typename T>
  TrackableRef(const T& iterator)  // NOLINT(google-explicit-constructor)
      requires requires(const T& t) {
    { t.checkpointable() } -> std::convertible_to<std::shared_ptr<data::CheckpointableIterator>>;
  } : trackable_(adapt_iterator(iterator.checkpointable())) {
  }
  template <typename T>
  TrackableRef(const std::shared_ptr<T>& object)  // NOLINT(google-explicit-constructor)
      requires(std::derived_from<T, Trackable> || std::derived_from<T, keras::Layer> ||
               std::derived_from<T, keras::optimizers::Optimizer>)
      : trackable_(adapt(object)) {}

  Trackable& operator*() const { return *trackable_; }
  Trackable* operator->() const { return trackable_.get(); }
  const std::shared_ptr<Trackable>& get() const noexcept { return trackable_; }

 private:
  template <typename T>
  static std::shared_ptr<Trackable> adapt(const std::shared_ptr<T>& object) {
    if constexpr (std::derived_from<T, Trackable>) {
      return adapt_trackable(object);
    } else if constexpr (std::derived_from<T, keras::Layer>) {
      return adapt_layer(std::shared_ptr<keras::Layer>(object));
    } else {
      return adapt_optimizer(std::shared_ptr<keras::optimizers::Optimizer>(object));
    }
  }
  static std::shared_ptr<Trackable> adapt_trackable(std::shared_ptr<Trackable> trackable);
  static std::shared_ptr<Trackable> adapt_generator(const Variable& state);
  static std::shared_ptr<Trackable> adapt_iterator(
      std::shared_ptr<data::CheckpointableIterator> iterator);
  static std::shared_ptr<Trackable> adapt_layer(std::shared_ptr<keras::Layer> layer);
  static std::shared_ptr<Trackable> adapt_optimizer(
      std::shared_ptr<keras::optimizers::Optimizer> optimizer);

  std::shared_ptr<Trackable> trackable_;
};

// The saveable of a variable: VARIABLE_VALUE, checked for dtype and shape
// (InvalidArgumentError naming `path`, the variable and both values).
SaveableTensor variable_saveable(const Variable& variable);

}  // namespace strata::train
