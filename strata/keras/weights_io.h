#pragma once
// Saving and loading a model's weights (format: docs/formats/weights.md).
//
//   model->save_weights("/tmp/mlp.weights");   // keras::save_weights(*model, path)
//   other->load_weights("/tmp/mlp.weights");   // same architecture: every weight checked first
//   model->save("/tmp/mlp.keras");             // architecture + weights + optimizer variables
//   keras::load_training_state(*model, path);  // restores weights and optimizer (BackupAndRestore)
//
// Files are written atomically (temporary file in the same directory, fsync,
// rename). Under a multi-worker strategy (MultiWorkerMirroredStrategy with
// >= 2 workers) every worker must call save_weights / save (reading the
// variables can need all of them); only the chief writes at `path`, the
// others write into <dir of path>/workertemp_<task_id>/ and remove that
// directory at once, as TF's Keras (internal/distributed_file_utils.h).
// write_weights_file and save_training_state write exactly where told.
// Loading verifies, before assigning anything:
//   1. magic, version, sizes and the CRC-32C of the header, the manifest and
//      the data: DataLossError naming the file, the byte offset and the check;
//   2. that the file's variables match the model's weights() one for one, in
//      order (as Keras's HDF5 load_weights matches by position): same count,
//      same local name (the last '/'-separated part, e.g. "kernel"; layer
//      names differ between two models in one process), shape and dtype —
//      InvalidArgumentError naming the variable otherwise.
// So a refused load leaves the model unchanged.
//
// save() stores the model's weights and the optimizer's variables
// (iterations then slots, Optimizer::variables() order) and, in the
// manifest's "config", the architecture and compile state that
// keras::models::load_model rebuilds the model from (saving/saving_api.h,
// docs/formats/saved_model.md). load_weights and load_training_state read
// such a file too, into a model built in code.
//
// Thread-safety: save reads the variables; load must not run concurrently
// with training.

#include <map>
#include <string>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::keras {

class Model;

struct NamedTensor {
  std::string name;
  Tensor value;
};

// The contents of a weights file.
struct WeightsFile {
  std::string kind = "weights";                      // "weights", "model" or "training_state"
  std::vector<NamedTensor> model = {};               // the model's weights(), in order
  std::vector<NamedTensor> optimizer = {};           // the optimizer's variables(), in order
  std::map<std::string, std::string> metadata = {};  // free-form (BackupAndRestore: "epoch")
  // kind "model" only: the saved model's config (JSON text of an object,
  // docs/formats/saved_model.md); "" when the file holds none.
  std::string config = "";
};

// Low level: encode/decode a WeightsFile (atomic write; verified read).
void write_weights_file(const std::string& path, const WeightsFile& contents);
WeightsFile read_weights_file(const std::string& path);

void save_weights(const Model& model, const std::string& path);
// Loads the model part of any weights file (also one written by save()).
void load_weights(Model& model, const std::string& path);
// Weights and optimizer variables (kind "model") with `config` (JSON text,
// "" for none) in the manifest: what saving::save_model writes.
void save_model(const Model& model, const std::string& path, const std::string& config);

// Weights + optimizer variables + metadata, and their restore. An optimizer
// that has not run yet is built first (its slots created for the model's
// trainable variables), then every variable is checked and assigned.
// Returns the metadata.
void save_training_state(const Model& model, const std::string& path,
                         const std::map<std::string, std::string>& metadata);
std::map<std::string, std::string> load_training_state(Model& model, const std::string& path);

// load_training_state from contents already read from `path` (named in
// errors): checks every variable, then assigns the model's weights and, when
// `with_optimizer`, the optimizer's variables (building its slots first).
void assign_training_state(Model& model, const WeightsFile& contents, const std::string& path,
                           bool with_optimizer);

}  // namespace strata::keras
