// Options, their merge rule and the node that attaches them.
#include "strata/data/dataset.h"

#include "strata/base/errors.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::IteratorImpl;

namespace {

class OptionsNode : public DatasetNode {
 public:
  OptionsNode(Dataset input, Options o)
      : DatasetNode(NodeKind::kOptions, {std::move(input)}), o_(o) {}
  int64_t cardinality() const override { return inputs()[0].cardinality(); }
  std::vector<TensorSpec> element_spec() const override { return inputs()[0].element_spec(); }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    return internal::make_iter(inputs()[0]);
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<OptionsNode>(inputs.at(0), o_);
  }
  const Options* options() const override { return &o_; }

 private:
  Options o_;
};

}  // namespace

const char* auto_shard_policy_name(AutoShardPolicy p) noexcept {
  switch (p) {
    case AutoShardPolicy::OFF: return "OFF";
    case AutoShardPolicy::AUTO: return "AUTO";
    case AutoShardPolicy::FILE: return "FILE";
    case AutoShardPolicy::DATA: return "DATA";
    case AutoShardPolicy::HINT: return "HINT";
  }
  return "?";
}

Options Options::merge(const Options& other) const {
  Options r = *this;
  if (other.deterministic) r.deterministic = other.deterministic;
  if (other.experimental_distribute.auto_shard_policy)
    r.experimental_distribute.auto_shard_policy = other.experimental_distribute.auto_shard_policy;
  if (other.experimental_distribute.num_devices)
    r.experimental_distribute.num_devices = other.experimental_distribute.num_devices;
  if (other.experimental_external_state_policy)
    r.experimental_external_state_policy = other.experimental_external_state_policy;
  return r;
}

Options Dataset::options() const {
  Options merged;
  for (const Dataset& in : node_->inputs()) merged = merged.merge(in.options());
  if (const Options* o = node_->options()) merged = merged.merge(*o);
  return merged;
}

Dataset Dataset::with_options(const Options& options) const {
  return Dataset(std::make_shared<OptionsNode>(*this, options));
}

}  // namespace strata::data
