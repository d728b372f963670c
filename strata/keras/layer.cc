#include "strata/keras/layer.h"

#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/layers/serialization.h"
#include "strata/ops/math_ops.h"

namespace strata::keras {
namespace {

// keras.backend's per-graph name counters; here per thread (documented in the header).
std::map<std::string, int>& name_counters() {
  thread_local std::map<std::string, int> counters;
  return counters;
}

// Depth of layer calls on this thread: an outermost call clears the activity
// losses of the layers it calls (Keras's _clear_losses in __call__).
thread_local int call_depth = 0;

class CallDepth {
 public:
  CallDepth() { ++call_depth; }
  ~CallDepth() { --call_depth; }
  CallDepth(const CallDepth&) = delete;
  CallDepth& operator=(const CallDepth&) = delete;
  bool outermost() const noexcept { return call_depth == 1; }
};

}  // namespace

std::string unique_layer_name(const std::string& prefix, bool zero_based) {
  int& count = name_counters()[prefix];
  if (!zero_based) return str_cat(prefix, "_", ++count);
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

template <typename Shapes>
void Layer::build_once(const Shapes& shapes) {
  distribute::ReplicaContext* replica = distribute::get_replica_context();
  if (replica != nullptr && replica->strategy().num_local_replicas() > 1) {
    replica->merge_call(
        [this](distribute::Strategy&, const distribute::PerReplica<Shapes>& per_replica) {
          build(per_replica.component(0));
        },
        shapes);
  } else {
    build(shapes);
  }
}

Tensor Layer::operator()(const Tensor& inputs, bool training) {
  STRATA_CHECK_ARG(inputs.defined(), "layer '", name_, "' called with an undefined tensor");
  CallDepth depth;
  if (depth.outermost()) clear_activity_losses();
  if (!built_) build_once(inputs.shape());
  return finish_call(call(inputs, training));
}

Tensor Layer::operator()(const std::vector<Tensor>& inputs, bool training) {
  std::vector<TensorShape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    STRATA_CHECK_ARG(inputs[i].defined(), "layer '", name_, "' called with an undefined tensor ",
                     "at input ", i);
    shapes.push_back(inputs[i].shape());
  }
  CallDepth depth;
  if (depth.outermost()) clear_activity_losses();
  if (!built_) build_once(shapes);
  return finish_call(call_list(inputs, training));
}

Tensor Layer::finish_call(Tensor output) {
  if (activity_regularizer_ && output.defined()) {
    // Keras: activity_regularizer(output) / batch size, in the loss's dtype.
    Tensor loss = (*activity_regularizer_)(output);
    const double batch = output.rank() > 0 ? double(output.shape()[0]) : 1.0;
    if (batch > 0) loss = strata::divide(loss, strata::cast(strata::constant(batch), loss.dtype()));
    MutexLock lock(losses_mu_);
    activity_losses_[std::this_thread::get_id()].push_back(loss);
  }
  return output;
}

void Layer::clear_activity_losses() {
  {
    MutexLock lock(losses_mu_);
    activity_losses_.erase(std::this_thread::get_id());
  }
  for (const auto& layer : tracked_) layer->clear_activity_losses();
}

std::vector<Tensor> Layer::losses() const {
  std::vector<Tensor> out;
  {
    MutexLock lock(losses_mu_);
    auto it = activity_losses_.find(std::this_thread::get_id());
    if (it != activity_losses_.end()) out = it->second;
  }
  for (const OwnWeight& w : own_weights_) {
    if (w.regularizer) out.push_back((*w.regularizer)(w.variable.value()));
  }
  for (const auto& layer : tracked_) {
    for (Tensor& t : layer->losses()) out.push_back(std::move(t));
  }
  return out;
}

namespace {

// The symbolic shape of a layer input: batch dimension unknown.
std::vector<TensorShape> shapes_of(const std::vector<KerasTensor>& inputs, const std::string& who) {
  std::vector<TensorShape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    STRATA_CHECK_ARG(inputs[i].defined(), "layer '", who,
                     "' called with an undefined KerasTensor at input ", i);
    shapes.push_back(inputs[i].shape());
  }
  return shapes;
}

}  // namespace

KerasTensor Layer::operator()(const KerasTensor& inputs) {
  std::shared_ptr<Layer> self = weak_from_this().lock();
  STRATA_CHECK_ARG(self != nullptr, "layer '", name_,
                   "': a layer called on a KerasTensor must be owned by a std::shared_ptr (make "
                   "it with its factory or std::make_shared)");
  const TensorShape shape = shapes_of({inputs}, name_)[0];
  if (!built_) build(shape);
  TensorShape out = compute_output_shape(shape);
  auto node = std::make_shared<Node>(Node{self, {inputs}, false, symbolic_calls_++});
  return KerasTensor(std::move(out), dtype_, std::move(node));
}

KerasTensor Layer::operator()(const std::vector<KerasTensor>& inputs) {
  std::shared_ptr<Layer> self = weak_from_this().lock();
  STRATA_CHECK_ARG(self != nullptr, "layer '", name_,
                   "': a layer called on KerasTensors must be owned by a std::shared_ptr (make "
                   "it with its factory or std::make_shared)");
  const std::vector<TensorShape> shapes = shapes_of(inputs, name_);
  if (!built_) build(shapes);
  TensorShape out = compute_output_shape_list(shapes);
  auto node = std::make_shared<Node>(Node{self, inputs, true, symbolic_calls_++});
  return KerasTensor(std::move(out), dtype_, std::move(node));
}

void Layer::build(const TensorShape& input_shape) {
  if (built_) return;
  build_weights(input_shape);
  built_ = true;
}

void Layer::build(const std::vector<TensorShape>& input_shapes) {
  if (built_) return;
  build_weights_list(input_shapes);
  built_ = true;
}

TensorShape Layer::compute_output_shape_list(const std::vector<TensorShape>& input_shapes) const {
  STRATA_CHECK_ARG(input_shapes.size() == 1, "layer '", name_, "' (", class_name_,
                   ") expects 1 input, got a list of ", input_shapes.size());
  return compute_output_shape(input_shapes[0]);
}

void Layer::build_weights_list(const std::vector<TensorShape>& input_shapes) {
  STRATA_CHECK_ARG(input_shapes.size() == 1, "layer '", name_, "' (", class_name_,
                   ") expects 1 input, got a list of ", input_shapes.size());
  build_weights(input_shapes[0]);
}

Tensor Layer::call_list(const std::vector<Tensor>& inputs, bool training) {
  STRATA_CHECK_ARG(inputs.size() == 1, "layer '", name_, "' (", class_name_,
                   ") expects 1 input, got a list of ", inputs.size());
  return call(inputs[0], training);
}

nlohmann::json Layer::base_config() const {
  nlohmann::json config = {
      {"name", name_}, {"trainable", trainable_}, {"dtype", std::string(dtype_name(dtype_))}};
  if (declared_input_shape_) {
    nlohmann::json shape = layers::config_shape(*declared_input_shape_, /*with_batch=*/true);
    config["batch_input_shape"] = shape;
  }
  return config;
}

nlohmann::json Layer::get_config() const {
  STRATA_CHECK(UNIMPLEMENTED, false, "layer '", name_, "' (", class_name_,
               ") has no get_config(); a layer class with constructor arguments overrides it");
  return {};
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
  own_weights_.push_back({name, v, options.trainable, options.regularizer});
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

template <typename Visit>
void Layer::visit_weights(WeightList list, Visit& visit) const {
  switch (list) {
    case WeightList::kAll:
      visit_weights(WeightList::kTrainable, visit);
      visit_weights(WeightList::kNonTrainable, visit);
      return;
    case WeightList::kTrainable:
      if (!trainable_) return;
      for (const OwnWeight& w : own_weights_) {
        if (w.trainable) visit(w.variable);
      }
      for (const auto& layer : tracked_) layer->visit_weights(WeightList::kTrainable, visit);
      return;
    case WeightList::kNonTrainable:
      for (const OwnWeight& w : own_weights_) {
        if (!trainable_ || !w.trainable) visit(w.variable);
      }
      // A frozen parent freezes its children: all their weights are non-trainable.
      for (const auto& layer : tracked_) {
        layer->visit_weights(trainable_ ? WeightList::kNonTrainable : WeightList::kAll, visit);
      }
      return;
  }
}

std::vector<Variable> Layer::collect_weights(WeightList list) const {
  size_t count = 0;
  auto counter = [&count](const Variable& /*v*/) { ++count; };
  visit_weights(list, counter);
  std::vector<Variable> out;
  out.reserve(count);
  auto append = [&out](const Variable& v) { out.push_back(v); };
  visit_weights(list, append);
  return out;
}

std::vector<Variable> Layer::weights() const { return collect_weights(WeightList::kAll); }

std::vector<Variable> Layer::trainable_weights() const {
  return collect_weights(WeightList::kTrainable);
}

std::vector<Variable> Layer::non_trainable_weights() const {
  return collect_weights(WeightList::kNonTrainable);
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
