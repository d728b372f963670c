#include "strata/train/trackable.h"

#include <memory>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/keras/layer.h"
#include "strata/keras/model.h"
#include "strata/keras/optimizer.h"

namespace strata::train {
namespace {

class VariableTrackable final : public Trackable {
 public:
  explicit VariableTrackable(Variable variable) : variable_(std::move(variable)) {}
  const void* identity() const override { return variable_.impl_ptr().get(); }
  std::string description() const override { return str_cat("Variable '", variable_.name(), "'"); }
  std::vector<SaveableTensor> saveables() const override { return {variable_saveable(variable_)}; }
  Variable variable() const override { return variable_; }

 private:
  Variable variable_;
};

// tf.random.Generator: an object whose one child is its state variable.
class GeneratorTrackable final : public Trackable {
 public:
  explicit GeneratorTrackable(Variable state) : state_(std::move(state)) {}
  // One identity per generator, other than its variable's: an address inside
  // the variable's object, where no other object starts.
  const void* identity() const override {
    return reinterpret_cast<const char*>(state_.impl_ptr().get()) + 1;
  }
  std::string description() const override { return "random::Generator"; }
  std::vector<std::pair<std::string, TrackableRef>> children() const override {
    return {{"_state_var", state_}};
  }

 private:
  Variable state_;
};

// TF's iterator saveable: the position as one tensor, ITERATOR_STATE.
class IteratorTrackable final : public Trackable {
 public:
  explicit IteratorTrackable(std::shared_ptr<data::CheckpointableIterator> iterator)
      : iterator_(std::move(iterator)) {}
  const void* identity() const override { return iterator_.get(); }
  std::string description() const override { return iterator_->description(); }
  std::vector<SaveableTensor> saveables() const override {
    auto it = iterator_;
    return {{
        .attribute = "ITERATOR_STATE",
        .save = [it] { return it->save_state(); },
        .check =
            [it](const Tensor& value) {
              STRATA_CHECK_ARG(value.dtype() == DType::uint8 && value.rank() == 1,
                               "the checkpoint holds ", dtype_name(value.dtype()), " ",
                               value.shape().to_string(), " but a ", it->description(),
                               "'s state is a rank-1 uint8 tensor");
              // Verifies the bytes (DataLossError) before anything is assigned.
              (void)data::IteratorState::decode(value);
            },
        .restore = [it](const Tensor& value) { it->restore_state(value); },
    }};
  }

 private:
  std::shared_ptr<data::CheckpointableIterator> iterator_;
};

class LayerTrackable final : public Trackable {
 public:
  explicit LayerTrackable(std::shared_ptr<keras::Layer> layer) : layer_(std::move(layer)) {}
  const void* identity() const override { return layer_.get(); }
  std::string description() const override {
    return str_cat(layer_->class_name(), " '", layer_->name(), "'");
  }

  std::vector<std::pair<std::string, TrackableRef>> children() const override {
    std::vector<std::pair<std::string, TrackableRef>> out;
    for (const auto& [name, variable] : layer_->own_weights()) out.emplace_back(name, variable);
    // Keras's Functional._layer_checkpoint_dependencies: "layer_with_weights-k"
    // before "layer-i" for each layer, so a weight's key goes through the former.
    int with_weights = 0;
    const auto& layers = layer_->layers();
    for (size_t i = 0; i < layers.size(); ++i) {
      if (!layers[i]->weights().empty()) {
        out.emplace_back(str_cat("layer_with_weights-", with_weights++), layers[i]);
      }
      out.emplace_back(str_cat("layer-", i), layers[i]);
    }
    if (const auto* model = dynamic_cast<const keras::Model*>(layer_.get())) {
      if (model->optimizer()) out.emplace_back("optimizer", model->optimizer());
    }
    return out;
  }

  bool add_child_created_callback(const ChildCreatedCallback& callback) override {
    layer_->add_weight_created_callback(
        [callback](const std::string& name, const Variable& variable) {
          callback(name, TrackableRef(variable));
        });
    return true;
  }

 private:
  std::shared_ptr<keras::Layer> layer_;
};

class OptimizerTrackable final : public Trackable {
 public:
  explicit OptimizerTrackable(std::shared_ptr<keras::optimizers::Optimizer> optimizer)
      : optimizer_(std::move(optimizer)) {}
  const void* identity() const override { return optimizer_.get(); }
  std::string description() const override {
    return str_cat("optimizer '", optimizer_->name(), "'");
  }

  std::vector<std::pair<std::string, TrackableRef>> children() const override {
    // "iter": the name the Keras optimizer's iterations variable has in TF checkpoints.
    return {{"iter", optimizer_->iterations_variable()}};
  }
  std::vector<SlotVariableRef> slot_variables() const override {
    std::vector<SlotVariableRef> out;
    for (const auto& s : optimizer_->slot_variables()) {
      out.push_back({s.reference.impl_ptr().get(), s.slot_name, s.slot});
    }
    return out;
  }
  bool add_slot_created_callback(const SlotCreatedCallback& callback) override {
    optimizer_->add_slot_created_callback(
        [callback](const keras::optimizers::Optimizer::SlotVariable& s) {
          callback({s.reference.impl_ptr().get(), s.slot_name, s.slot});
        });
    return true;
  }

 private:
  std::shared_ptr<keras::optimizers::Optimizer> optimizer_;
};

}  // namespace

std::vector<std::pair<std::string, TrackableRef>> Trackable::children() const { return {}; }
bool Trackable::add_child_created_callback(const ChildCreatedCallback& callback) {
  (void)callback;
  return false;
}
bool Trackable::add_slot_created_callback(const SlotCreatedCallback& callback) {
  (void)callback;
  return false;
}

TrackableRef::TrackableRef(const Variable& variable) {
  STRATA_CHECK_ARG(variable.defined(), "train::Checkpoint: got an empty Variable handle");
  trackable_ = std::make_shared<VariableTrackable>(variable);
}

std::shared_ptr<Trackable> TrackableRef::adapt_trackable(std::shared_ptr<Trackable> trackable) {
  STRATA_CHECK_ARG(trackable != nullptr, "train::Checkpoint: got a null trackable");
  return trackable;
}

std::shared_ptr<Trackable> TrackableRef::adapt_generator(const Variable& state) {
  STRATA_CHECK_ARG(state.defined(), "train::Checkpoint: got a generator without state");
  return std::make_shared<GeneratorTrackable>(state);
}

std::shared_ptr<Trackable> TrackableRef::adapt_iterator(
    std::shared_ptr<data::CheckpointableIterator> iterator) {
  STRATA_CHECK_ARG(iterator != nullptr, "train::Checkpoint: got a null iterator");
  return std::make_shared<IteratorTrackable>(std::move(iterator));
}

std::shared_ptr<Trackable> TrackableRef::adapt_layer(std::shared_ptr<keras::Layer> layer) {
  STRATA_CHECK_ARG(layer != nullptr, "train::Checkpoint: got a null layer or model");
  return std::make_shared<LayerTrackable>(std::move(layer));
}

std::shared_ptr<Trackable> TrackableRef::adapt_optimizer(
    std::shared_ptr<keras::optimizers::Optimizer> optimizer) {
  STRATA_CHECK_ARG(optimizer != nullptr, "train::Checkpoint: got a null optimizer");
  return std::make_shared<OptimizerTrackable>(std::move(optimizer));
}

SaveableTensor variable_saveable(const Variable& variable) {
  return {
      .attribute = "VARIABLE_VALUE",
      .save = [variable] { return variable.value(); },
      .check =
          [variable](const Tensor& value) {
            STRATA_CHECK_ARG(value.dtype() == variable.dtype() && value.shape() == variable.shape(),
                             "the checkpoint holds ", dtype_name(value.dtype()), " ",
                             value.shape().to_string(), " but variable '", variable.name(), "' is ",
                             dtype_name(variable.dtype()), " ", variable.shape().to_string());
          },
      .restore = [variable](const Tensor& value) { variable.assign(value); },
  };
}

}  // namespace strata::train
