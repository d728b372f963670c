#pragma once
// tensorflowjs.converters.save_keras_model: a model in TensorFlow.js's
// LayersModel format, which tf.loadLayersModel reads
// (docs/formats/tfjs_layers_model.md).
//
//   model->fit(x, y, {.epochs = 5});
//   keras::tfjs::save_keras_model(*model, "/srv/web/model");
//   // /srv/web/model/model.json, /srv/web/model/group1-shard1of1.bin
//   // JavaScript: const m = await tf.loadLayersModel('https://.../model/model.json');
//
// What is written (the TensorFlow.js converter's layout, as its Python
// write_artifacts and write_weights produce it):
//   * model.json: {"format": "layers-model", "generatedBy": "Strata",
//     "convertedBy": "Strata keras::tfjs::save_keras_model", "modelTopology":
//     {"keras_version": "2.15.0", "backend": "tensorflow", "model_config":
//     {"class_name", "config"} (model.get_config(), Keras 2's config shapes,
//     which tfjs-layers deserializes; a Sequential built by a call gets its
//     build_input_shape as its first layer's batch_input_shape, which
//     TensorFlow.js builds from), "training_config": {"loss", "metrics",
//     "weighted_metrics", "loss_weights", "optimizer_config"} when the model is
//     compiled and its compile state has a config}, "weightsManifest": [{"paths":
//     ["group1-shard1of2.bin", ...], "weights": [{"name": "dense/kernel",
//     "shape": [784, 10], "dtype": "float32"}, ...]}]}. keras_version names the
//     Keras whose config format the topology follows.
//   * one weight group: every weight of model.weights() in order, each named
//     as Keras names it ("<layer>/<weight>"), its values row-major and
//     little-endian, back to back; the bytes are cut into shards of
//     weight_shard_size_bytes (the last one shorter), named
//     "group1-shard<i>of<n>.bin". float64 weights are written as float32 and
//     int64 as int32 (the converter's automatic conversions; an int64 out of
//     int32 range is InvalidArgumentError); float32, int32 and bool are written
//     as they are; any other dtype is UnimplementedError.
// The shards are written first and model.json last, each atomically
// (strata/base/file.h). `artifacts_dir` is created when missing;
// InvalidArgumentError if it is a file. A model without a config (a
// subclassed model) is UnimplementedError, as get_config. TensorFlow.js then
// needs every layer class to be one it knows (tests check Dense, Conv2D,
// Flatten, Dropout, Activation, BatchNormalization, MaxPooling2D in
// Sequential and functional models). Thread-safety: reads the variables.

#include <cstdint>
#include <string>

namespace strata::keras {
class Model;
}  // namespace strata::keras

namespace strata::keras::tfjs {

// tensorflowjs.converters.save_keras_model's keyword arguments, in its order
// (quantization_dtype_map and metadata are not offered).
struct SaveKerasModelOptions {
  int64_t weight_shard_size_bytes = int64_t{1024} * 1024 * 4;  // must be > 0
};

void save_keras_model(const Model& model, const std::string& artifacts_dir,
                      const SaveKerasModelOptions& options = {});

}  // namespace strata::keras::tfjs
