#pragma once
// keras.layers.Layer: the base of every layer and model.
//
//   auto dense = keras::layers::Dense(10, {.activation = "relu"});  // std::shared_ptr<DenseLayer>
//   Tensor y = (*dense)(x, /*training=*/true);   // builds on the first call from x's shape
//   dense->trainable_variables();                // {kernel, bias}
//
// Reference semantics, as in Python: every Keras object (layer, model,
// optimizer, loss, metric, callback) is made by a factory function named like
// the Python class (`layers::Dense`, `Sequential`, `optimizers::SGD`, ...)
// that returns a std::shared_ptr to the class (`DenseLayer`, `SequentialModel`,
// `SGDOptimizer`, ...; the suffix says the kind). Copies of the pointer are the
// same object. Subclasses for user code derive from Layer or Model and are
// made with std::make_shared.
//
// Building: a layer creates its weights in build(input_shape), called once by
// the first operator() (or by Sequential when an `input_shape` is given).
// Weights are created with add_weight(), which makes a strata::Variable
// through this thread's variable-creator stack: under a distribution
// strategy's scope that is where they become MirroredVariables (the strategy
// plug-in point for variable creation; the keras layer never names a strategy).
//
// Nested layers (a subclassed Model's members) are registered with
// track_layer() so that weights() collects them, in creation order.
//
// Functional API: calling a layer on a KerasTensor (keras::Input(...) or
// another layer's symbolic output) builds it from the KerasTensor's shape and
// returns a KerasTensor recording the call; merge layers (Add, Concatenate)
// take a list, `(*add)({a, b})`, of KerasTensors or of tensors.
//
// Config: get_config() returns the layer's constructor arguments as JSON in
// Keras's shape (`{"name": "dense", "trainable": true, "dtype": "float32",
// "units": 64, ...}`); layers::deserialize (layers/serialization.h) makes a
// layer from {"class_name", "config"}.
//
// Thread-safety: calling a built layer from several threads at once is safe
// (the forward pass only reads variables); building is not, and happens once:
// a layer first called inside strategy.run is built through a merge_call, by
// one replica thread, while the others wait.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "strata/base/mutex.h"
#include "strata/core/tensor.h"
#include "strata/core/variable.h"
#include "strata/keras/initializers.h"
#include "strata/keras/keras_tensor.h"
#include "strata/keras/regularizers.h"

namespace strata::keras {

// An optional per-example shape that also accepts a braced list, so that
// `.input_shape = {5}` works in designated initializers (a plain
// std::optional<std::vector<int64_t>> is ambiguous there). {} is "not given".
// The constructors are implicit on purpose: they are the conversions.
struct OptionalShape : std::optional<std::vector<int64_t>> {
  using Base = std::optional<std::vector<int64_t>>;
  OptionalShape() = default;
  OptionalShape(std::nullopt_t) {}
  OptionalShape(std::initializer_list<int64_t> dims) : Base(std::vector<int64_t>(dims)) {}
  OptionalShape(std::vector<int64_t> dims) : Base(std::move(dims)) {}
  OptionalShape(Base dims) : Base(std::move(dims)) {}
};

// Keras's **kwargs common to every layer: the last fields of each layer's
// options struct repeat these (designated initializers cannot reach a base).
struct LayerArgs {
  // Shape of one example (no batch dimension), e.g. {5} or {28, 28, 1}.
  OptionalShape input_shape = std::nullopt;
  std::string name = "";  // "" = a unique name from the class (dense, dense_1, ...)
  DType dtype = DType::float32;
  bool trainable = true;
};

// keras add_weight arguments (Keras's order).
struct WeightOptions {
  Initializer initializer = nullptr;  // nullptr: glorot_uniform for floats (Keras)
  // Adds regularizer(weight) to losses() (Keras's add_weight(regularizer=)).
  regularizers::RegularizerPtr regularizer = nullptr;
  bool trainable = true;
  VariableSynchronization synchronization = VariableSynchronization::AUTO;
  VariableAggregation aggregation = VariableAggregation::NONE;
  std::optional<DType> dtype = std::nullopt;  // default: the layer's dtype
};

class Layer : public std::enable_shared_from_this<Layer> {
 public:
  // `class_name` ("Dense") names the layer in summary(); `default_name`
  // ("dense") is the prefix of the unique name given when args.name is empty.
  Layer(std::string class_name, const std::string& default_name, const LayerArgs& args = {});
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // Builds on first use (from inputs.shape()), then runs call().
  Tensor operator()(const Tensor& inputs, bool training = false);
  // A list of inputs (merge layers): builds from their shapes, runs call_list().
  Tensor operator()(const std::vector<Tensor>& inputs, bool training = false);
  // Symbolic calls (functional API): build from the KerasTensors' shapes and
  // return the output KerasTensor, recording the call as a Node. The layer must
  // be owned by a std::shared_ptr (as every factory makes it).
  KerasTensor operator()(const KerasTensor& inputs);
  KerasTensor operator()(const std::vector<KerasTensor>& inputs);

  // Creates the weights for `input_shape` (batch dimension first, may be -1).
  // Calling build twice is a no-op. InvalidArgumentError if the shape does not
  // suit the layer (message names the layer and the shape).
  void build(const TensorShape& input_shape);
  // Builds from a list of input shapes (merge layers; one shape is build(shape)).
  void build(const std::vector<TensorShape>& input_shapes);
  bool built() const noexcept { return built_; }

  // The output shape for `input_shape` (batch dimension included, -1 kept).
  virtual TensorShape compute_output_shape(const TensorShape& input_shape) const = 0;
  // The output shape for a list of inputs. Default: one shape is
  // compute_output_shape(shape); several are InvalidArgumentError (the layer
  // takes one input).
  virtual TensorShape compute_output_shape_list(const std::vector<TensorShape>& input_shapes) const;

  // Keras's get_config(): the arguments that remake the layer, as JSON, with
  // Keras's keys ("name", "trainable", "dtype", "batch_input_shape" when an
  // input_shape was given, then the layer's own). Initializers are functions
  // and are not written (from_config uses Keras's defaults; the weights come
  // from the saved weights). UnimplementedError for a layer without a config
  // (a subclassed layer that does not override it) or holding a function
  // (an activation given as a lambda).
  virtual nlohmann::json get_config() const;

  const std::string& name() const noexcept { return name_; }
  const std::string& class_name() const noexcept { return class_name_; }
  DType dtype() const noexcept { return dtype_; }
  // The per-example input shape given as `input_shape` (no batch dimension).
  const std::optional<std::vector<int64_t>>& declared_input_shape() const noexcept {
    return declared_input_shape_;
  }

  bool trainable() const noexcept { return trainable_; }
  // Freezing a layer makes all its weights (and nested layers') non-trainable.
  void set_trainable(bool trainable) { trainable_ = trainable; }

  // Own weights then nested layers', in creation order (Keras order).
  std::vector<Variable> weights() const;
  std::vector<Variable> trainable_weights() const;
  std::vector<Variable> non_trainable_weights() const;
  std::vector<Variable> trainable_variables() const { return trainable_weights(); }
  std::vector<Variable> variables() const { return weights(); }
  int64_t count_params() const;

  // Values of weights(), in order; set_weights checks count, shapes and dtypes
  // (InvalidArgumentError naming the weight) before assigning any.
  std::vector<Tensor> get_weights() const;
  void set_weights(const std::vector<Tensor>& values);

  // Keras's layer.losses: this thread's activity-regularization losses of the
  // last outermost call (each activity_regularizer(output) / batch size), then
  // every weight regularizer applied to its weight's current value, for this
  // layer then its nested layers. Computed when asked, so that under a
  // GradientTape they are differentiable; an outermost call (a model's or a
  // lone layer's) clears the activity losses of the previous one.
  std::vector<Tensor> losses() const;
  const regularizers::RegularizerPtr& activity_regularizer() const noexcept {
    return activity_regularizer_;
  }

  // Nested layers registered with track_layer, in order.
  const std::vector<std::shared_ptr<Layer>>& layers() const noexcept { return tracked_; }

  // The weights this layer made itself with add_weight (not its nested
  // layers'), each with the name given to add_weight ("kernel"), in creation
  // order. A checkpoint saves each under that name (TF's attribute edge).
  std::vector<std::pair<std::string, Variable>> own_weights() const;

  // Deferred restoration (strata::train::Checkpoint): `callback(name,
  // variable)` runs for every weight add_weight creates from now on, right
  // after the variable exists and before add_weight returns, so a checkpoint
  // read before the layer was built assigns the saved value there. Callbacks
  // run in the order added (a later restore overrides an earlier one); an
  // exception from one propagates out of add_weight (and so out of build).
  using WeightCreatedCallback =
      std::function<void(const std::string& name, const Variable& variable)>;
  void add_weight_created_callback(WeightCreatedCallback callback);

 protected:
  // Creates the layer's weights. Called once, by build().
  virtual void build_weights(const TensorShape& input_shape) { (void)input_shape; }
  // The forward computation.
  virtual Tensor call(const Tensor& inputs, bool training) = 0;
  // Build and forward for a list of inputs. Defaults: one input goes to
  // build_weights / call; several are InvalidArgumentError.
  virtual void build_weights_list(const std::vector<TensorShape>& input_shapes);
  virtual Tensor call_list(const std::vector<Tensor>& inputs, bool training);
  // The keys every layer's config starts with (see get_config).
  nlohmann::json base_config() const;
  // Keras's activity_regularizer argument: applied to each call's output.
  void set_activity_regularizer(regularizers::RegularizerPtr r) {
    activity_regularizer_ = std::move(r);
  }
  // Marks the layer built without building (a model whose layers were built
  // by their symbolic calls).
  void mark_built() noexcept { built_ = true; }

  // Makes a weight named "<layer name>/<name>" through the variable-creator stack.
  Variable add_weight(const std::string& name, const TensorShape& shape,
                      const WeightOptions& options = {});
  // Registers a nested layer (returns it, for member initialisation).
  template <typename L>
  std::shared_ptr<L> track_layer(std::shared_ptr<L> layer) {
    tracked_.push_back(layer);
    return layer;
  }

 private:
  struct OwnWeight {
    std::string name;
    Variable variable;
    bool trainable;
    regularizers::RegularizerPtr regularizer;
  };
  // Builds on the first eager call. Inside strategy.run every replica thread
  // reaches the first call, but the layer (its weight list, its built flag) is
  // shared, so it is built once, by one thread in cross-replica context, from
  // replica 0's input shapes; the others wait and then use the same weights.
  // Building on every replica thread would register each weight once per replica.
  template <typename Shapes>
  void build_once(const Shapes& shapes);
  // Runs call()/call_list() and records the activity loss.
  Tensor finish_call(Tensor output);
  // The weights of one of the lists above, in their order, each passed to
  // `visit`: walked once to count and once to fill, so that a list (asked for
  // twice by every custom training step) is one allocation, not one per layer.
  enum class WeightList { kTrainable, kNonTrainable, kAll };
  template <typename Visit>
  void visit_weights(WeightList list, Visit& visit) const;
  std::vector<Variable> collect_weights(WeightList list) const;
  void clear_activity_losses();
  std::string class_name_;
  std::string name_;
  DType dtype_;
  std::optional<std::vector<int64_t>> declared_input_shape_;
  bool trainable_;
  bool built_ = false;
  int symbolic_calls_ = 0;  // Nodes made so far (Node::call_index of the next)
  std::vector<OwnWeight> own_weights_;
  std::vector<std::shared_ptr<Layer>> tracked_;
  std::vector<WeightCreatedCallback> weight_created_callbacks_;
  regularizers::RegularizerPtr activity_regularizer_;
  // Activity losses per calling thread (replicas call one layer concurrently).
  mutable Mutex losses_mu_;
  std::map<std::thread::id, std::vector<Tensor>> activity_losses_ STRATA_GUARDED_BY(losses_mu_);
};

using LayerPtr = std::shared_ptr<Layer>;

// A unique layer name from `prefix`: "dense", then "dense_1", "dense_2", ...
// or, not zero-based, "input_1", "input_2", ... (Keras's
// backend.unique_object_name; per thread, reset by reset_uids_for_testing,
// like keras.backend.clear_session()).
std::string unique_layer_name(const std::string& prefix, bool zero_based = true);
void reset_uids_for_testing();

}  // namespace strata::keras
