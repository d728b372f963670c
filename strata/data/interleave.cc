// interleave: block_length elements from each of cycle_length open datasets.
#include "strata/data/dataset.h"

#include <algorithm>
#include <mutex>

#include "strata/base/errors.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::autotune_threads;
using internal::input_iter;
using internal::IteratorImpl;
using internal::make_fn_iterator;

namespace {

class InterleaveNode : public DatasetNode {
 public:
  InterleaveNode(Dataset input, DatasetFn fn, InterleaveOptions o)
      : DatasetNode(NodeKind::kInterleave, {std::move(input)}),
        fn_(std::move(fn)),
        o_(o),
        spec_cache_(std::make_shared<SpecCache>()) {}
  std::vector<TensorSpec> element_spec() const override {
    // The spec of the dataset fn makes from the first input element.
    std::call_once(spec_cache_->once, [&] {
      auto it = input_iter(inputs()[0]);
      auto e = it->next();
      spec_cache_->spec = e ? fn_(*e).element_spec() : std::vector<TensorSpec>{};
    });
    return spec_cache_->spec;
  }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    struct State {
      std::shared_ptr<IteratorImpl> in;
      std::vector<std::unique_ptr<IteratorImpl>> cycle;
      size_t cycle_index = 0;
      int64_t block_index = 0;
      int64_t num_open = 0;
      bool end_of_input = false;
    };
    const int64_t cl = o_.cycle_length == AUTOTUNE ? autotune_threads() : o_.cycle_length;
    auto st = std::make_shared<State>();
    st->in = input_iter(inputs()[0]);
    st->cycle.resize(static_cast<size_t>(cl));
    const int64_t bl = o_.block_length;
    const int64_t par = o_.num_parallel_calls;
    auto fn = fn_;
    return make_fn_iterator([st, bl, par, fn]() -> std::optional<Element> {
      auto advance_cycle = [&] {
        st->block_index = 0;
        st->cycle_index = (st->cycle_index + 1) % st->cycle.size();
      };
      // TF's InterleaveDatasetOp loop: take block_length elements from each
      // open element in turn; an exhausted slot is refilled from the input.
      while (!st->end_of_input || st->num_open > 0) {
        auto& slot = st->cycle[st->cycle_index];
        if (slot) {
          auto e = slot->next();
          if (e) {
            if (++st->block_index == bl) advance_cycle();
            return e;
          }
          slot.reset();
          --st->num_open;
          advance_cycle();
        } else if (!st->end_of_input) {
          auto in = st->in->next();
          if (!in) {
            st->end_of_input = true;
            continue;
          }
          Dataset d = fn(*in);
          if (par > 1 || par == AUTOTUNE) d = d.prefetch(std::max<int64_t>(bl, 1));
          slot = d.node()->make_iterator();
          ++st->num_open;
        } else {
          advance_cycle();
        }
      }
      return std::nullopt;
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<InterleaveNode>(inputs.at(0), fn_, o_);
  }

 private:
  struct SpecCache {
    std::once_flag once;
    std::vector<TensorSpec> spec;
  };
  DatasetFn fn_;
  InterleaveOptions o_;
  std::shared_ptr<SpecCache> spec_cache_;
};

}  // namespace

Dataset Dataset::interleave(DatasetFn fn, InterleaveOptions o) const {
  STRATA_CHECK_ARG(fn != nullptr, "interleave: expected a function, got an empty one");
  STRATA_CHECK_ARG(o.cycle_length >= 1 || o.cycle_length == AUTOTUNE,
                   "interleave: expected cycle_length >= 1 or AUTOTUNE, got ", o.cycle_length);
  STRATA_CHECK_ARG(o.block_length >= 1, "interleave: expected block_length >= 1, got ",
                   o.block_length);
  STRATA_CHECK_ARG(o.num_parallel_calls >= 1 || o.num_parallel_calls == AUTOTUNE,
                   "interleave: expected num_parallel_calls >= 1 or AUTOTUNE, got ",
                   o.num_parallel_calls);
  return Dataset(std::make_shared<InterleaveNode>(*this, std::move(fn), o));
}

}  // namespace strata::data
