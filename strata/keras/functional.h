#pragma once
// Functional models: keras.Model(inputs, outputs), a graph of layer calls.
//
//   auto inputs = keras::Input({784});
//   auto x = (*keras::layers::Dense(64, {.activation = "relu"}))(inputs);
//   auto outputs = (*keras::layers::Dense(10))(x);
//   auto model = keras::models::Model(inputs, outputs);   // std::shared_ptr<FunctionalModel>
//   model->compile({.optimizer = "adam", .loss = "mse"});
//   model->fit(x_train, y_train, {.epochs = 2});
//   nlohmann::json config = model->get_config();          // Keras's functional config
//   auto same = keras::Model::from_config(config);        // a new model, new weights
//
// Several inputs and outputs: keras::models::Model({a, b}, {out1, out2}).
// A model with several inputs is called with a list, `(*model)({xa, xb})`, and
// trained on dataset elements {xa, xb, y[, sample_weight]} (Keras's ((xa, xb),
// y)); call_outputs returns every output. Training a model with several
// outputs is UnimplementedError (compile takes one loss here).
//
// The graph: every tensor an output depends on must come from the model's
// inputs (else InvalidArgumentError "Graph disconnected", naming the layer
// and the Input it needs). A layer used by several calls shares its weights.
// layers() lists the layers as Keras's model.layers does: by depth from the
// inputs, InputLayers included.
//
// Config (get_config): {"name", "layers": [{"class_name", "config", "name",
// "inbound_nodes": [[["dense", 0, 0, {}], ...], ...]}, ...], "input_layers":
// [["input_1", 0, 0], ...], "output_layers": [["dense_1", 0, 0], ...]}, as
// Keras 2's get_network_config: node indices count only the layer's calls
// that belong to this model.
//
// Thread-safety: as Model.

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "strata/keras/keras_tensor.h"
#include "strata/keras/model.h"

namespace strata::keras {

struct FunctionalOptions {
  std::string name = "";  // "" = "model", "model_1", ...
  bool trainable = true;
};

class FunctionalModel : public Model {
 public:
  // InvalidArgumentError when an input is not a keras::Input's tensor, when
  // there are no inputs or outputs, or when the graph is disconnected.
  FunctionalModel(const std::vector<KerasTensor>& inputs, const std::vector<KerasTensor>& outputs,
                  const FunctionalOptions& options = {});

  const std::vector<KerasTensor>& inputs() const noexcept { return inputs_; }
  const std::vector<KerasTensor>& outputs() const noexcept { return outputs_; }

  // Runs the graph on real inputs (one per model input, in order); returns
  // one tensor per output.
  std::vector<Tensor> call_outputs(const std::vector<Tensor>& inputs, bool training = false);

  TensorShape compute_output_shape(const TensorShape& input_shape) const override;
  TensorShape compute_output_shape_list(
      const std::vector<TensorShape>& input_shapes) const override;
  nlohmann::json get_config() const override;

  // Rows of summary(): for each layer, its output shape (None for the batch)
  // and the layers it is connected to ("dense[0][0]").
  struct SummaryRow {
    LayerPtr layer;
    std::string output_shape;
    std::vector<std::string> connected_to;
  };
  std::vector<SummaryRow> summary_rows() const;
  // Whether every layer is called once on one input, in a chain (Keras then
  // prints the summary in the Sequential layout).
  bool sequential_like() const;

  int num_model_inputs() const override { return int(inputs_.size()); }

 protected:
  Tensor call(const Tensor& inputs, bool training) override;
  Tensor call_list(const std::vector<Tensor>& inputs, bool training) override;
  void build_weights_list(const std::vector<TensorShape>& input_shapes) override;

 private:
  std::vector<KerasTensor> inputs_;
  std::vector<KerasTensor> outputs_;
  // The nodes to run, in an order where every node follows its inputs' nodes
  // (InputLayer nodes excluded).
  std::vector<std::shared_ptr<const Node>> schedule_;
  // Every node of the model (input nodes included).
  std::vector<std::shared_ptr<const Node>> nodes_;
};

using FunctionalModelPtr = std::shared_ptr<FunctionalModel>;

namespace models {

// tf.keras.Model(inputs, outputs) (tf.keras.models.Model is the same class);
// see docs/porting.md for why the C++ spells it keras::models::Model.
FunctionalModelPtr Model(const KerasTensor& inputs, const KerasTensor& outputs,
                         const FunctionalOptions& options = {});
FunctionalModelPtr Model(const std::vector<KerasTensor>& inputs,
                         const std::vector<KerasTensor>& outputs,
                         const FunctionalOptions& options = {});
FunctionalModelPtr Model(const std::vector<KerasTensor>& inputs, const KerasTensor& outputs,
                         const FunctionalOptions& options = {});
FunctionalModelPtr Model(const KerasTensor& inputs, const std::vector<KerasTensor>& outputs,
                         const FunctionalOptions& options = {});

// tf.keras.models.model_from_config({"class_name": ..., "config": ...}):
// "Functional"/"Model" and "Sequential" configs.
std::shared_ptr<keras::Model> model_from_config(const nlohmann::json& config,
                                                const saving::CustomObjects& custom_objects = {});

}  // namespace models
}  // namespace strata::keras
