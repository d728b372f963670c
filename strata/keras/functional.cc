#include "strata/keras/functional.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/keras/layers/input_layer.h"
#include "strata/keras/layers/serialization.h"
#include "strata/keras/sequential.h"
#include "strata/ops/math_ops.h"

namespace strata::keras {
namespace {

LayerArgs functional_args(const FunctionalOptions& options) {
  LayerArgs args;
  args.name = options.name;
  args.trainable = options.trainable;
  return args;
}

std::string input_names(const std::vector<KerasTensor>& inputs) {
  std::string out = "[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) out += ", ";
    out += str_cat("'", inputs[i].node()->layer->name(), "'");
  }
  return out + "]";
}

}  // namespace

FunctionalModel::FunctionalModel(const std::vector<KerasTensor>& inputs,
                                 const std::vector<KerasTensor>& outputs,
                                 const FunctionalOptions& options)
    : Model("Functional", "model", functional_args(options)), inputs_(inputs), outputs_(outputs) {
  STRATA_CHECK_ARG(!inputs_.empty(), "Model '", name(), "': expected at least one input");
  STRATA_CHECK_ARG(!outputs_.empty(), "Model '", name(), "': expected at least one output");
  std::set<const Node*> input_nodes;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const KerasTensor& t = inputs_[i];
    STRATA_CHECK_ARG(t.defined() && t.node()->is_input() &&
                         dynamic_cast<const layers::InputLayerLayer*>(t.node()->layer.get()),
                     "Model '", name(), "': input ", i,
                     " must be a tensor made by keras::Input (an InputLayer's output)",
                     t.defined()
                         ? str_cat(", got the output of layer '", t.node()->layer->name(), "'")
                         : std::string(", got an undefined KerasTensor"));
    STRATA_CHECK_ARG(input_nodes.insert(t.node().get()).second, "Model '", name(), "': input '",
                     t.node()->layer->name(), "' is given twice");
  }
  // Keras's _map_graph_network: the nodes in an order where each follows the
  // nodes of its inputs (a depth-first post-order from the outputs).
  std::vector<std::shared_ptr<const Node>> postorder;
  std::set<const Node*> done;
  std::function<void(const std::shared_ptr<const Node>&, const std::string&)> visit =
      [&](const std::shared_ptr<const Node>& node, const std::string& consumer) {
        if (done.count(node.get())) return;
        if (node->is_input()) {
          STRATA_CHECK_ARG(input_nodes.count(node.get()), "Model '", name(),
                           "': Graph disconnected: cannot obtain the value of Input '",
                           node->layer->name(), "' needed by layer '", consumer,
                           "'; the model's inputs are ", input_names(inputs_));
        }
        for (const KerasTensor& in : node->inputs) visit(in.node(), node->layer->name());
        done.insert(node.get());
        postorder.push_back(node);
      };
  for (size_t i = 0; i < outputs_.size(); ++i) {
    STRATA_CHECK_ARG(outputs_[i].defined(), "Model '", name(), "': output ", i,
                     " is an undefined KerasTensor");
    visit(outputs_[i].node(), "(model output)");
  }
  // An input no output depends on still belongs to the model (Keras keeps it).
  for (const KerasTensor& t : inputs_) {
    if (!done.count(t.node().get())) {
      done.insert(t.node().get());
      postorder.insert(postorder.begin(), t.node());
    }
  }
  nodes_ = postorder;
  for (const auto& node : postorder) {
    if (!node->is_input()) schedule_.push_back(node);
  }

  // Keras orders model.layers by depth (the longest path to an output),
  // deepest first, ties by first appearance in the post-order.
  std::map<const Node*, int> node_depth;
  std::map<const Layer*, int> layer_depth;
  std::map<const Layer*, int> layer_index;
  std::vector<LayerPtr> unique_layers;
  for (const auto& node : postorder) {
    if (layer_index.emplace(node->layer.get(), int(layer_index.size())).second)
      unique_layers.push_back(node->layer);
  }
  for (auto it = postorder.rbegin(); it != postorder.rend(); ++it) {
    const Node* node = it->get();
    int depth = std::max(node_depth[node], layer_depth[node->layer.get()]);
    layer_depth[node->layer.get()] = depth;
    node_depth[node] = depth;
    for (const KerasTensor& in : node->inputs) {
      int& d = node_depth[in.node().get()];
      d = std::max(d, depth + 1);
    }
  }
  std::stable_sort(unique_layers.begin(), unique_layers.end(),
                   [&](const LayerPtr& a, const LayerPtr& b) {
                     const int da = layer_depth[a.get()], db = layer_depth[b.get()];
                     if (da != db) return da > db;
                     return layer_index[a.get()] < layer_index[b.get()];
                   });
  for (const LayerPtr& layer : unique_layers) {
    STRATA_CHECK_ARG(layer.get() != this, "Model '", name(), "' cannot contain itself");
    track_layer(layer);
  }
  mark_built();
}

std::vector<Tensor> FunctionalModel::call_outputs(const std::vector<Tensor>& inputs,
                                                  bool training) {
  STRATA_CHECK_ARG(inputs.size() == inputs_.size(), "Model '", name(), "' expects ", inputs_.size(),
                   " input(s), but it received ", inputs.size(), " input tensor(s)");
  std::map<const Node*, Tensor> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const KerasTensor& ref = inputs_[i];
    STRATA_CHECK_ARG(inputs[i].defined(), "Model '", name(), "': input ", i, " is undefined");
    STRATA_CHECK_ARG(
        inputs[i].rank() == ref.shape().rank() && inputs[i].shape().is_compatible_with(ref.shape()),
        "Input ", i, " of layer \"", name(),
        "\" is incompatible with the layer: expected shape=", shape_repr(ref.shape()),
        ", found shape=", shape_repr(inputs[i].shape()));
    // Keras casts each input to its Input's dtype (_conform_to_reference_input).
    values[ref.node().get()] =
        inputs[i].dtype() == ref.dtype() ? inputs[i] : strata::cast(inputs[i], ref.dtype());
  }
  for (const auto& node : schedule_) {
    std::vector<Tensor> args;
    for (const KerasTensor& in : node->inputs) args.push_back(values.at(in.node().get()));
    values[node.get()] =
        node->list_input ? (*node->layer)(args, training) : (*node->layer)(args[0], training);
  }
  std::vector<Tensor> out;
  for (const KerasTensor& t : outputs_) out.push_back(values.at(t.node().get()));
  return out;
}

Tensor FunctionalModel::call(const Tensor& inputs, bool training) {
  STRATA_CHECK_ARG(inputs_.size() == 1, "Model '", name(), "' expects ", inputs_.size(),
                   " inputs; call it with a list of tensors");
  return call_list({inputs}, training);
}

Tensor FunctionalModel::call_list(const std::vector<Tensor>& inputs, bool training) {
  STRATA_CHECK(UNIMPLEMENTED, outputs_.size() == 1, "Model '", name(), "' has ", outputs_.size(),
               " outputs; call_outputs returns them all (a call returning one tensor needs one "
               "output)");
  return call_outputs(inputs, training)[0];
}

void FunctionalModel::build_weights_list(const std::vector<TensorShape>&) {}

TensorShape FunctionalModel::compute_output_shape(const TensorShape& input_shape) const {
  return compute_output_shape_list({input_shape});
}

TensorShape FunctionalModel::compute_output_shape_list(
    const std::vector<TensorShape>& input_shapes) const {
  STRATA_CHECK(UNIMPLEMENTED, outputs_.size() == 1, "Model '", name(), "' has ", outputs_.size(),
               " outputs; compute_output_shape gives one shape");
  STRATA_CHECK_ARG(input_shapes.size() == inputs_.size(), "Model '", name(), "' expects ",
                   inputs_.size(), " input shape(s), got ", input_shapes.size());
  TensorShape out = outputs_[0].shape();
  // The batch dimension follows the first input's (the graph keeps it as -1).
  if (out.rank() > 0 && input_shapes[0].rank() > 0 && out.dim(0) < 0)
    out = out.with_dim(0, input_shapes[0].dim(0));
  return out;
}

// --- config -----------------------------------------------------------------------

nlohmann::json FunctionalModel::get_config() const {
  // Keras's node_conversion_map: a node's index among its layer's calls that
  // belong to this model.
  std::map<const Layer*, std::vector<int>> calls;
  for (const auto& node : nodes_) calls[node->layer.get()].push_back(node->call_index);
  for (auto& [layer, v] : calls) std::sort(v.begin(), v.end());
  auto kept_index = [&](const Node& node) {
    const std::vector<int>& v = calls.at(node.layer.get());
    return int(std::lower_bound(v.begin(), v.end(), node.call_index) - v.begin());
  };
  auto coordinates = [&](const KerasTensor& t) {
    return nlohmann::json::array({t.node()->layer->name(), kept_index(*t.node()), 0});
  };
  std::map<const Layer*, std::vector<std::shared_ptr<const Node>>> layer_nodes;
  for (const auto& node : nodes_) layer_nodes[node->layer.get()].push_back(node);

  nlohmann::json layer_configs = nlohmann::json::array();
  for (const LayerPtr& layer : layers()) {
    std::vector<std::shared_ptr<const Node>> own = layer_nodes[layer.get()];
    std::sort(own.begin(), own.end(),
              [](const auto& a, const auto& b) { return a->call_index < b->call_index; });
    nlohmann::json inbound = nlohmann::json::array();
    for (const auto& node : own) {
      if (node->is_input()) continue;
      nlohmann::json entries = nlohmann::json::array();
      for (const KerasTensor& in : node->inputs) {
        nlohmann::json e = coordinates(in);
        e.push_back(nlohmann::json::object());  // call kwargs: none
        entries.push_back(e);
      }
      inbound.push_back(entries);
    }
    nlohmann::json entry = layers::serialize(*layer);
    entry["name"] = layer->name();
    entry["inbound_nodes"] = inbound;
    layer_configs.push_back(entry);
  }
  nlohmann::json input_layers = nlohmann::json::array();
  for (const KerasTensor& t : inputs_) input_layers.push_back(coordinates(t));
  nlohmann::json output_layers = nlohmann::json::array();
  for (const KerasTensor& t : outputs_) output_layers.push_back(coordinates(t));
  return {{"name", name()},
          {"layers", layer_configs},
          {"input_layers", input_layers},
          {"output_layers", output_layers}};
}

namespace {

// [["name", node, tensor], ...] or a single ["name", node, tensor].
std::vector<std::pair<std::string, int>> read_coordinates(const nlohmann::json& j,
                                                          const char* key) {
  STRATA_CHECK_ARG(j.is_array(), "Model.from_config: \"", key, "\" must be a list, got ", j.dump());
  std::vector<std::pair<std::string, int>> out;
  auto one = [&](const nlohmann::json& e) {
    STRATA_CHECK_ARG(e.is_array() && e.size() >= 3 && e[0].is_string() && e[1].is_number_integer(),
                     "Model.from_config: expected [layer_name, node_index, tensor_index] in \"",
                     key, "\", got ", e.dump());
    STRATA_CHECK(UNIMPLEMENTED, e[2] == 0,
                 "Model.from_config: layers with several outputs are "
                 "not supported (tensor_index ",
                 e[2].dump(), ")");
    out.emplace_back(e[0].get<std::string>(), e[1].get<int>());
  };
  if (!j.empty() && j[0].is_string()) {
    one(j);
  } else {
    for (const nlohmann::json& e : j) one(e);
  }
  return out;
}

}  // namespace

std::shared_ptr<Model> Model::from_config(const nlohmann::json& config,
                                          const saving::CustomObjects& custom_objects) {
  STRATA_CHECK_ARG(config.is_object() && config.contains("layers") &&
                       config.contains("input_layers") && config.contains("output_layers"),
                   "Model.from_config: expected a functional config with \"layers\", "
                   "\"input_layers\" and \"output_layers\", got keys ",
                   config.is_object() ? [&] {
                     std::string k;
                     for (auto it = config.begin(); it != config.end(); ++it) k += it.key() + " ";
                     return k;
                   }()
                                      : config.dump());
  struct Pending {
    LayerPtr layer;
    nlohmann::json nodes;
    size_t next = 0;
  };
  std::vector<Pending> pending;
  std::map<std::string, LayerPtr> created;
  std::map<std::pair<std::string, int>, KerasTensor> tensors;
  for (const nlohmann::json& entry : config["layers"]) {
    LayerPtr layer = layers::deserialize(entry, custom_objects);
    const std::string name = entry.value("name", layer->name());
    STRATA_CHECK_ARG(created.emplace(name, layer).second, "Model.from_config: layer '", name,
                     "' appears twice");
    if (auto* input = dynamic_cast<layers::InputLayerLayer*>(layer.get()))
      tensors[{name, 0}] = input->output();
    nlohmann::json nodes = entry.value("inbound_nodes", nlohmann::json::array());
    pending.push_back({layer, nodes, 0});
  }
  // Keras's reconstruct_from_config: process each layer's nodes in order,
  // repeating until every node's inputs exist (a layer may be called after
  // layers listed later).
  bool progress = true;
  while (progress) {
    progress = false;
    for (Pending& p : pending) {
      while (p.next < p.nodes.size()) {
        const nlohmann::json& node = p.nodes[p.next];
        STRATA_CHECK_ARG(node.is_array() && !node.empty(), "Model.from_config: layer '",
                         p.layer->name(), "' has a malformed inbound node ", node.dump());
        std::vector<KerasTensor> args;
        bool ready = true;
        for (const nlohmann::json& e : node) {
          STRATA_CHECK_ARG(e.is_array() && e.size() >= 3 && e[0].is_string(),
                           "Model.from_config: layer '", p.layer->name(),
                           "' has a malformed inbound entry ", e.dump());
          auto it = tensors.find({e[0].get<std::string>(), e[1].get<int>()});
          if (it == tensors.end()) {
            ready = false;
            break;
          }
          args.push_back(it->second);
        }
        if (!ready) break;
        KerasTensor out = args.size() == 1 ? (*p.layer)(args[0]) : (*p.layer)(args);
        tensors[{p.layer->name(), int(p.next)}] = out;
        ++p.next;
        progress = true;
      }
    }
  }
  for (const Pending& p : pending) {
    STRATA_CHECK_ARG(p.next == p.nodes.size(), "Model.from_config: layer '", p.layer->name(),
                     "' has an inbound node whose inputs no layer of the config produces: ",
                     p.nodes[p.next].dump());
  }
  auto lookup = [&](const std::vector<std::pair<std::string, int>>& coords) {
    std::vector<KerasTensor> out;
    for (const auto& c : coords) {
      auto it = tensors.find(c);
      STRATA_CHECK_ARG(it != tensors.end(), "Model.from_config: no node ", c.second, " of layer '",
                       c.first, "'");
      out.push_back(it->second);
    }
    return out;
  };
  return std::make_shared<FunctionalModel>(
      lookup(read_coordinates(config["input_layers"], "input_layers")),
      lookup(read_coordinates(config["output_layers"], "output_layers")),
      FunctionalOptions{.name = config.value("name", std::string())});
}

// --- summary ----------------------------------------------------------------------

std::vector<FunctionalModel::SummaryRow> FunctionalModel::summary_rows() const {
  std::map<const Layer*, std::vector<std::shared_ptr<const Node>>> layer_nodes;
  std::map<const Layer*, std::vector<int>> calls;
  for (const auto& node : nodes_) {
    layer_nodes[node->layer.get()].push_back(node);
    calls[node->layer.get()].push_back(node->call_index);
  }
  for (auto& [layer, v] : calls) std::sort(v.begin(), v.end());
  std::vector<SummaryRow> rows;
  for (const LayerPtr& layer : layers()) {
    SummaryRow row{layer, "", {}};
    std::vector<std::shared_ptr<const Node>> own = layer_nodes[layer.get()];
    std::sort(own.begin(), own.end(),
              [](const auto& a, const auto& b) { return a->call_index < b->call_index; });
    std::set<std::string> shapes;
    for (const auto& node : own) {
      // The output shape of this call: a consumer's view or the model output's.
      for (const auto& other : nodes_) {
        for (const KerasTensor& in : other->inputs) {
          if (in.node() == node) shapes.insert(shape_repr(in.shape()));
        }
      }
      for (const KerasTensor& out : outputs_) {
        if (out.node() == node) shapes.insert(shape_repr(out.shape()));
      }
      for (const KerasTensor& in : node->inputs) {
        const std::vector<int>& v = calls.at(in.node()->layer.get());
        const int idx =
            int(std::lower_bound(v.begin(), v.end(), in.node()->call_index) - v.begin());
        row.connected_to.push_back(str_cat(in.node()->layer->name(), "[", idx, "][0]"));
      }
    }
    if (dynamic_cast<const layers::InputLayerLayer*>(layer.get())) {
      // Keras shows an InputLayer's output shape as a list.
      row.output_shape = str_cat("[", shape_repr(inputs_[0].shape()), "]");
      for (const KerasTensor& t : inputs_) {
        if (t.node()->layer == layer) row.output_shape = str_cat("[", shape_repr(t.shape()), "]");
      }
    } else {
      row.output_shape = shapes.size() == 1 ? *shapes.begin() : "multiple";
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

bool FunctionalModel::sequential_like() const {
  // Keras's print_summary: every layer called once, on at most one input,
  // and the model has one input and one output.
  if (inputs_.size() != 1 || outputs_.size() != 1) return false;
  std::map<const Layer*, int> count;
  for (const auto& node : nodes_) {
    if (++count[node->layer.get()] > 1) return false;
    if (node->inputs.size() > 1) return false;
  }
  // ...and no tensor feeds two layers (a branch).
  std::map<const Node*, int> uses;
  for (const auto& node : nodes_) {
    for (const KerasTensor& in : node->inputs) {
      if (++uses[in.node().get()] > 1) return false;
    }
  }
  return true;
}

// --- factories --------------------------------------------------------------------

namespace models {

FunctionalModelPtr Model(const KerasTensor& inputs, const KerasTensor& outputs,
                         const FunctionalOptions& options) {
  return std::make_shared<FunctionalModel>(std::vector<KerasTensor>{inputs},
                                           std::vector<KerasTensor>{outputs}, options);
}

FunctionalModelPtr Model(const std::vector<KerasTensor>& inputs,
                         const std::vector<KerasTensor>& outputs,
                         const FunctionalOptions& options) {
  return std::make_shared<FunctionalModel>(inputs, outputs, options);
}

FunctionalModelPtr Model(const std::vector<KerasTensor>& inputs, const KerasTensor& outputs,
                         const FunctionalOptions& options) {
  return std::make_shared<FunctionalModel>(inputs, std::vector<KerasTensor>{outputs}, options);
}

FunctionalModelPtr Model(const KerasTensor& inputs, const std::vector<KerasTensor>& outputs,
                         const FunctionalOptions& options) {
  return std::make_shared<FunctionalModel>(std::vector<KerasTensor>{inputs}, outputs, options);
}

std::shared_ptr<keras::Model> model_from_config(const nlohmann::json& config,
                                                const saving::CustomObjects& custom_objects) {
  auto model = std::dynamic_pointer_cast<keras::Model>(layers::deserialize(config, custom_objects));
  STRATA_CHECK_ARG(model != nullptr, "model_from_config: expected a model config, got class \"",
                   config.value("class_name", std::string()), "\"");
  return model;
}

}  // namespace models
}  // namespace strata::keras
