// cache: the first complete pass is kept in memory and replayed.
#include "strata/data/dataset.h"

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/base/str_cat.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::input_iter;
using internal::IteratorImpl;
using internal::make_fn_iterator;
using internal::StateReader;
using internal::StateWriter;

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
    // An iteration replays the cache once a pass completed it (reading);
    // before that it reads the input and keeps what it saw (writing). Only a
    // fully consumed pass is published, so a partial first iteration leaves
    // the cache empty.
    struct Iter {
      std::shared_ptr<const std::vector<Element>> data;  // reading: the cache
      size_t pos = 0;
      std::shared_ptr<IteratorImpl> in;  // writing: the input and what it gave
      std::vector<Element> written;
    };
    auto it = std::make_shared<Iter>();
    {
      MutexLock l(state_->mu);
      if (state_->complete) it->data = state_->data;
    }
    if (!it->data) it->in = input_iter(inputs()[0]);
    auto st = state_;
    Dataset input = inputs()[0];
    return make_fn_iterator(
        [it, st]() -> std::optional<Element> {
          if (it->data) {
            if (it->pos == it->data->size()) return std::nullopt;
            return (*it->data)[it->pos++];
          }
          auto e = it->in->next();
          if (!e) {
            MutexLock l(st->mu);
            if (!st->complete) {
              st->complete = true;
              st->data = std::make_shared<const std::vector<Element>>(std::move(it->written));
            }
            // Later calls replay the end of the cache.
            it->data = st->data;
            it->pos = it->data->size();
            it->in.reset();
            return std::nullopt;
          }
          it->written.push_back(*e);
          return e;
        },
        // TF's memory cache: a reading iteration saves the cache's elements
        // and its position in them; a writing one the elements it kept so far
        // and its input's state.
        [it](StateWriter& w, std::vector<Element>&) {
          w.write_int("reading", it->data ? 1 : 0);
          if (it->data) {
            w.write_elements("cache", *it->data);
            w.write_int("position", static_cast<int64_t>(it->pos));
            return;
          }
          w.write_elements("written", it->written);
          w.save_input("input", *it->in);
        },
        [it, st, input](StateReader& r) {
          if (r.read_int("reading") != 0) {
            std::vector<Element> cache = r.read_elements("cache");
            const int64_t pos = r.read_int("position");
            if (pos < 0 || pos > static_cast<int64_t>(cache.size()))
              throw DataLossError(str_cat("iterator state: the CacheDataset at ", r.where(),
                                          " holds position ", pos, " in a cache of ", cache.size(),
                                          " elements"));
            // The dataset's cache takes the saved elements unless a pass of
            // this process completed it already (the same elements).
            MutexLock l(st->mu);
            if (!st->complete) {
              st->complete = true;
              st->data = std::make_shared<const std::vector<Element>>(std::move(cache));
            }
            STRATA_CHECK_ARG(static_cast<int64_t>(st->data->size()) >= pos,
                             "restoring an iterator: the CacheDataset at ", r.where(),
                             " was saved at element ", pos, " of its cache, which holds ",
                             st->data->size(), " elements in this dataset");
            it->data = st->data;
            it->pos = static_cast<size_t>(pos);
            it->in.reset();
            it->written.clear();
            return;
          }
          std::vector<Element> written = r.read_elements("written");
          if (!it->in) it->in = input_iter(input);
          r.restore_input("input", *it->in);
          it->written = std::move(written);
          it->data.reset();
          it->pos = 0;
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
