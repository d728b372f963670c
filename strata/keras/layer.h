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
// Thread-safety: calling a built layer from several threads at once is safe
// (the forward pass only reads variables); building is not, and happens once:
// a layer first called inside strategy.run is built through a merge_call, by
// one replica thread, while the others wait.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/core/variable.h"
#include "strata/keras/initializers.h"

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

  // Creates the weights for `input_shape` (batch dimension first, may be -1).
  // Calling build twice is a no-op. InvalidArgumentError if the shape does not
  // suit the layer (message names the layer and the shape).
  void build(const TensorShape& input_shape);
  bool built() const noexcept { return built_; }

  // The output shape for `input_shape` (batch dimension included, -1 kept).
  virtual TensorShape compute_output_shape(const TensorShape& input_shape) const = 0;

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
  };
  std::string class_name_;
  std::string name_;
  DType dtype_;
  std::optional<std::vector<int64_t>> declared_input_shape_;
  bool trainable_;
  bool built_ = false;
  std::vector<OwnWeight> own_weights_;
  std::vector<std::shared_ptr<Layer>> tracked_;
  std::vector<WeightCreatedCallback> weight_created_callbacks_;
};

using LayerPtr = std::shared_ptr<Layer>;

// A unique layer name from `prefix`: "dense", then "dense_1", "dense_2", ...
// (Keras's backend.unique_object_name; per thread, reset by
// reset_uids_for_testing, like keras.backend.clear_session()).
std::string unique_layer_name(const std::string& prefix);
void reset_uids_for_testing();

}  // namespace strata::keras
