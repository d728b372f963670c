#include "strata/keras/layer.h"

#include <map>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/distribute/strategy.h"

namespace strata::keras {
namespace {

// keras.backend's per-graph name counters; here per thread (documented in the header).
std::map<std::string, int>& name_counters() {
  thread_local std::map<std::string, int> counters;
  return counters;
}

}  // namespace

std::string unique_layer_name(const std::string& prefix) {
  int& count = name_counters()[prefix];
  std::string name = count == 0 ? prefix : str_cat(prefix, "_", count);
  ++count;
  return name;
}

void reset_uids_for_testing() { name_counters().clear(); }

Layer::Layer(std::string class_name, const std::string& default_name, const LayerArgs& args)
    : class_name_(std::move(class_name)),
      name_(args.name.empty() ? unique_layer_name(default_name) : args.name),
      dtype_(args.dtype),
      declared_input_shape_(args.input_shape),
      trainable_(args.trainable) {
  if (declared_input_shape_) {
    for (int64_t d : *declared_input_shape_) {
      STRATA_CHECK_ARG(d > 0 || d == -1, "layer '", name_, "': input_shape dimension ", d,
                       " must be positive (or -1 for unknown)");
    }
  }
}

Tensor Layer::operator()(const Tensor& inputs, bool training) {
  STRATA_CHECK_ARG(inputs.defined(), "layer '", name_, "' called with an undefined tensor");
  if (!built_) {
    // First called inside strategy.run: every replica thread reaches this
    // point, but the layer (its weight list, its built flag) is shared, so it
    // is built once, by one thread in cross-replica context, from replica 0's
    // input shape; the others wait and then use the same weights. Building on
    // every replica thread would register each weight once per replica.
    distribute::ReplicaContext* replica = distribute::get_replica_context();
    if (replica != nullptr && replica->strategy().num_local_replicas() > 1) {
      replica->merge_call(
          [this](distribute::Strategy&, const distribute::PerReplica<TensorShape>& shapes) {
            build(shapes.component(0));
          },
          inputs.shape());
    } else {
      build(inputs.shape());
    }
  }
  return call(inputs, training);
}

void Layer::build(const TensorShape& input_shape) {
  if (built_) return;
  build_weights(input_shape);
  built_ = true;
}

Variable Layer::add_weight(const std::string& name, const TensorShape& shape,
                           const WeightOptions& options) {
  const DType dtype = options.dtype.value_or(dtype_);
  Initializer init = options.initializer ? options.initializer : initializers::glorot_uniform();
  Tensor initial = init(shape, dtype);
  STRATA_CHECK_ARG(initial.shape() == shape && initial.dtype() == dtype, "layer '", name_,
                   "': initializer for weight '", name, "' returned ", initial.shape().to_string(),
                   " ", dtype_name(initial.dtype()), ", expected ", shape.to_string(), " ",
                   dtype_name(dtype));
  Variable v(initial, {.name = str_cat(name_, "/", name),
                       .trainable = options.trainable,
                       .synchronization = options.synchronization,
                       .aggregation = options.aggregation});
  own_weights_.push_back({name, v, options.trainable});
  for (const WeightCreatedCallback& callback : weight_created_callbacks_) callback(name, v);
  return v;
}

std::vector<std::pair<std::string, Variable>> Layer::own_weights() const {
  std::vector<std::pair<std::string, Variable>> out;
  out.reserve(own_weights_.size());
  for (const OwnWeight& w : own_weights_) out.emplace_back(w.name, w.variable);
  return out;
}

void Layer::add_weight_created_callback(WeightCreatedCallback callback) {
  STRATA_CHECK_ARG(callback != nullptr, "layer '", name_,
                   "': add_weight_created_callback got an empty callback");
  weight_created_callbacks_.push_back(std::move(callback));
}

std::vector<Variable> Layer::weights() const {
  std::vector<Variable> out = trainable_weights();
  for (Variable& v : non_trainable_weights()) out.push_back(std::move(v));
  return out;
}

std::vector<Variable> Layer::trainable_weights() const {
  std::vector<Variable> out;
  if (!trainable_) return out;
  for (const OwnWeight& w : own_weights_) {
    if (w.trainable) out.push_back(w.variable);
  }
  for (const auto& layer : tracked_) {
    for (Variable& v : layer->trainable_weights()) out.push_back(std::move(v));
  }
  return out;
}

std::vector<Variable> Layer::non_trainable_weights() const {
  std::vector<Variable> out;
  for (const OwnWeight& w : own_weights_) {
    if (!trainable_ || !w.trainable) out.push_back(w.variable);
  }
  for (const auto& layer : tracked_) {
    // A frozen parent freezes its children: all their weights are non-trainable.
    for (Variable& v : trainable_ ? layer->non_trainable_weights() : layer->weights()) {
      out.push_back(std::move(v));
    }
  }
  return out;
}

int64_t Layer::count_params() const {
  int64_t total = 0;
  for (const Variable& v : weights()) total += v.shape().num_elements();
  return total;
}

std::vector<Tensor> Layer::get_weights() const {
  std::vector<Tensor> out;
  for (const Variable& v : weights()) out.push_back(v.value());
  return out;
}

void Layer::set_weights(const std::vector<Tensor>& values) {
  const std::vector<Variable> vars = weights();
  STRATA_CHECK_ARG(values.size() == vars.size(), "layer '", name_, "': set_weights got ",
                   values.size(), " arrays but the layer has ", vars.size(), " weights");
  for (size_t i = 0; i < vars.size(); ++i) {
    STRATA_CHECK_ARG(
        values[i].defined() && values[i].shape() == vars[i].shape() &&
            values[i].dtype() == vars[i].dtype(),
        "layer '", name_, "': weight '", vars[i].name(), "' is ", vars[i].shape().to_string(), " ",
        dtype_name(vars[i].dtype()), " but set_weights got ",
        values[i].defined() ? values[i].shape().to_string() : std::string("an undefined tensor"),
        values[i].defined() ? str_cat(" ", dtype_name(values[i].dtype())) : std::string());
  }
  for (size_t i = 0; i < vars.size(); ++i) vars[i].assign(values[i]);
}

}  // namespace strata::keras
