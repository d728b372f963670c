#pragma once
// tf.train.load_checkpoint / list_variables / load_variable: a checkpoint's
// tensors by key, without the objects that wrote them.
//
//   auto reader = train::load_checkpoint("/tmp/ckpts/ckpt-3");
//   for (const auto& [key, shape] : reader.get_variable_to_shape_map()) ...
//   Tensor k = reader.get_tensor("net/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE");
//
// The file is read and verified whole when the reader is made (DataLossError
// naming the file and the tensor or section, as in checkpoint.h). Immutable
// afterwards, hence thread-safe.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/dtype.h"
#include "strata/core/tensor.h"
#include "strata/core/tensor_shape.h"
#include "strata/train/object_graph.h"

namespace strata::train {

namespace internal {
struct CheckpointFile;
}

class CheckpointReader {
 public:
  // NotFoundError when `path` does not exist; DataLossError when it is damaged.
  explicit CheckpointReader(const std::string& path);

  bool has_tensor(const std::string& key) const;
  // NotFoundError naming the key when the checkpoint has no such tensor.
  Tensor get_tensor(const std::string& key) const;
  std::map<std::string, TensorShape> get_variable_to_shape_map() const;
  std::map<std::string, DType> get_variable_to_dtype_map() const;
  const ObjectGraph& object_graph() const;
  const std::string& path() const;

 private:
  std::shared_ptr<const internal::CheckpointFile> file_;
};

CheckpointReader load_checkpoint(const std::string& path);
// (key, shape) of every tensor, sorted by key.
std::vector<std::pair<std::string, TensorShape>> list_variables(const std::string& path);
// The tensor `name` (a full key).
Tensor load_variable(const std::string& path, const std::string& name);

}  // namespace strata::train
