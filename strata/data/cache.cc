// cache: the first complete pass is kept in memory and replayed.
#include "strata/data/dataset.h"

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::input_iter;
using internal::IteratorImpl;
using internal::make_fn_iterator;

namespace {

struct CacheState {
  Mutex mu;
  bool complete STRATA_GUARDED_BY(mu) = false;
  std::shared_ptr<const std::vector<Element>> data STRATA_GUARDED_BY(mu);
};

class CacheNode : public DatasetNode {
 public:
  explicit CacheNode(Dataset input)
      : DatasetNode(NodeKind::kCache, {std::move(input)}), state_(std::make_shared<CacheState>()) {}
  int64_t cardinality() const override { return inputs()[0].cardinality(); }
  std::vector<TensorSpec> element_spec() const override { return inputs()[0].element_spec(); }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    std::shared_ptr<const std::vector<Element>> data;
    {
      MutexLock l(state_->mu);
      if (state_->complete) data = state_->data;
    }
    if (data) {
      auto pos = std::make_shared<size_t>(0);
      return make_fn_iterator([data, pos]() -> std::optional<Element> {
        if (*pos == data->size()) return std::nullopt;
        return (*data)[(*pos)++];
      });
    }
    // Fill: only a fully consumed pass is published, so a partial first
    // iteration leaves the cache empty.
    auto in = input_iter(inputs()[0]);
    auto local = std::make_shared<std::vector<Element>>();
    auto st = state_;
    return make_fn_iterator([in, local, st]() -> std::optional<Element> {
      auto e = in->next();
      if (!e) {
        MutexLock l(st->mu);
        if (!st->complete) {
          st->complete = true;
          st->data = std::make_shared<const std::vector<Element>>(std::move(*local));
        }
        return std::nullopt;
      }
      local->push_back(*e);
      return e;
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<CacheNode>(inputs.at(0));
  }

 private:
  std::shared_ptr<CacheState> state_;
};

}  // namespace

Dataset Dataset::cache() const { return Dataset(std::make_shared<CacheNode>(*this)); }

}  // namespace strata::data
