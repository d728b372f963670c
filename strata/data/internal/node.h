#pragma once
// The node classes behind Dataset (internal: other layers use graph.h).
// Nodes are immutable; make_iterator() creates the per-iteration state.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/data/dataset.h"

namespace strata::data {

class DatasetNode {
 public:
  DatasetNode(NodeKind kind, std::vector<Dataset> inputs)
      : kind_(kind), inputs_(std::move(inputs)) {}
  virtual ~DatasetNode() = default;

  NodeKind kind() const noexcept { return kind_; }
  const std::vector<Dataset>& inputs() const noexcept { return inputs_; }
  virtual std::vector<TensorSpec> element_spec() const = 0;
  // Dataset::cardinality(); unknown unless the node knows better.
  virtual int64_t cardinality() const { return UNKNOWN_CARDINALITY; }
  virtual std::unique_ptr<internal::IteratorImpl> make_iterator() const = 0;
  // The same node (same parameters) over other inputs of the same count.
  virtual std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const = 0;

  // Parameters read by graph.h; defaults for kinds without them.
  virtual std::vector<std::string> files() const { return {}; }
  // The same file source reading `files` instead (file sources only).
  virtual std::shared_ptr<const DatasetNode> with_files(std::vector<std::string> files) const;
  virtual int64_t batch_size() const { return -1; }
  virtual bool drop_remainder() const { return false; }
  virtual int64_t num_shards() const { return 0; }
  virtual int64_t shard_index() const { return 0; }
  virtual std::vector<int64_t> rebatch_sizes() const { return {}; }
  virtual const Options* options() const { return nullptr; }

 private:
  NodeKind kind_;
  std::vector<Dataset> inputs_;
};

namespace internal {
// shard() with TF's "require non-empty" flag (inserted by auto-sharding).
Dataset shard_require_non_empty(const Dataset& ds, int64_t num_shards, int64_t index);
}  // namespace internal

}  // namespace strata::data
