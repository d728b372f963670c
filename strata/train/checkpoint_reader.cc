#include "strata/train/checkpoint_reader.h"

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/train/internal/checkpoint_file.h"

namespace strata::train {

CheckpointReader::CheckpointReader(const std::string& path)
    : file_(
          std::make_shared<const internal::CheckpointFile>(internal::read_checkpoint_file(path))) {}

bool CheckpointReader::has_tensor(const std::string& key) const {
  for (const auto& e : file_->index) {
    if (e.key == key) return true;
  }
  return false;
}

Tensor CheckpointReader::get_tensor(const std::string& key) const {
  for (const auto& e : file_->index) {
    if (e.key == key) return internal::decode_tensor(*file_, e);
  }
  throw NotFoundError(str_cat("checkpoint '", file_->path, "' has no tensor '", key, "'"));
}

std::map<std::string, TensorShape> CheckpointReader::get_variable_to_shape_map() const {
  std::map<std::string, TensorShape> out;
  for (const auto& e : file_->index) out.emplace(e.key, e.shape);
  return out;
}

std::map<std::string, DType> CheckpointReader::get_variable_to_dtype_map() const {
  std::map<std::string, DType> out;
  for (const auto& e : file_->index) out.emplace(e.key, e.dtype);
  return out;
}

const ObjectGraph& CheckpointReader::object_graph() const { return file_->graph; }
const std::string& CheckpointReader::path() const { return file_->path; }

CheckpointReader load_checkpoint(const std::string& path) { return CheckpointReader(path); }

std::vector<std::pair<std::string, TensorShape>> list_variables(const std::string& path) {
  const auto shapes = CheckpointReader(path).get_variable_to_shape_map();
  return {shapes.begin(), shapes.end()};
}

Tensor load_variable(const std::string& path, const std::string& name) {
  return CheckpointReader(path).get_tensor(name);
}

}  // namespace strata::train
