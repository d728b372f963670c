// interleave: block_length elements from each of cycle_length open datasets.
#include "strata/data/dataset.h"

#include <algorithm>
#include <mutex>
#include <optional>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::autotune_threads;
using internal::input_iter;
using internal::IteratorImpl;
using internal::make_fn_iterator;
using internal::make_iter;
using internal::StateReader;
using internal::StateWriter;

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
    // The open elements of the cycle: each one's iterator and the input
    // element that made it (TF's current_elements_ and args_list_).
    struct Open {
      Element args;
      std::unique_ptr<IteratorImpl> it;
    };
    struct State {
      std::shared_ptr<IteratorImpl> in;
      std::vector<std::optional<Open>> cycle;
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
    // The iterator over the dataset `fn` makes from an input element; a
    // parallel interleave prefetches each open element in the background.
    auto open = [bl, par, fn](const Element& args) {
      Dataset d = fn(args);
      if (par > 1 || par == AUTOTUNE) d = d.prefetch(std::max<int64_t>(bl, 1));
      return make_iter(d);
    };
    return make_fn_iterator(
        [st, bl, open]() -> std::optional<Element> {
          auto advance_cycle = [&] {
            st->block_index = 0;
            st->cycle_index = (st->cycle_index + 1) % st->cycle.size();
          };
          // TF's InterleaveDatasetOp loop: take block_length elements from each
          // open element in turn; an exhausted slot is refilled from the input.
          while (!st->end_of_input || st->num_open > 0) {
            auto& slot = st->cycle[st->cycle_index];
            if (slot) {
              auto e = slot->it->next();
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
              auto it = open(*in);
              slot = Open{std::move(*in), std::move(it)};
              ++st->num_open;
            } else {
              advance_cycle();
            }
          }
          return std::nullopt;
        },
        // TF saves the input's state, the position in the cycle, and for each
        // open element the input element that made it and its iterator's
        // state; a restore calls the function again on the saved element.
        [st](StateWriter& w, std::vector<Element>&) {
          w.write_int("cycle_length", static_cast<int64_t>(st->cycle.size()));
          w.write_int("cycle_index", static_cast<int64_t>(st->cycle_index));
          w.write_int("block_index", st->block_index);
          w.write_int("end_of_input", st->end_of_input ? 1 : 0);
          w.save_input("input", *st->in);
          for (size_t i = 0; i < st->cycle.size(); ++i) {
            const auto& slot = st->cycle[i];
            w.write_int(str_cat("open_", i), slot ? 1 : 0);
            if (!slot) continue;
            w.write_elements(str_cat("args_", i), {slot->args});
            w.save_input(str_cat("element_", i), *slot->it);
          }
        },
        [st, bl, open](StateReader& r) {
          const int64_t cycle_length = r.read_int("cycle_length");
          STRATA_CHECK_ARG(cycle_length == static_cast<int64_t>(st->cycle.size()),
                           "restoring an iterator: the InterleaveDataset at ", r.where(),
                           " was saved with cycle_length ", cycle_length, ", this one has ",
                           st->cycle.size(),
                           " (an AUTOTUNE cycle length is the machine's thread count)");
          const int64_t cycle_index = r.read_int("cycle_index");
          const int64_t block_index = r.read_int("block_index");
          if (cycle_index < 0 || cycle_index >= cycle_length || block_index < 0 ||
              block_index >= bl)
            throw DataLossError(str_cat("iterator state: the InterleaveDataset at ", r.where(),
                                        " holds cycle index ", cycle_index, " and block index ",
                                        block_index, " for cycle_length ", cycle_length,
                                        " and block_length ", bl));
          std::vector<std::optional<Open>> cycle(st->cycle.size());
          int64_t num_open = 0;
          for (size_t i = 0; i < cycle.size(); ++i) {
            if (r.read_int(str_cat("open_", i)) == 0) continue;
            std::vector<Element> args = r.read_elements(str_cat("args_", i));
            if (args.size() != 1)
              throw DataLossError(str_cat("iterator state: the InterleaveDataset at ", r.where(),
                                          " holds ", args.size(), " input elements for slot ", i,
                                          ", expected one"));
            auto it = open(args[0]);
            r.restore_input(str_cat("element_", i), *it);
            cycle[i] = Open{std::move(args[0]), std::move(it)};
            ++num_open;
          }
          r.restore_input("input", *st->in);
          st->cycle = std::move(cycle);
          st->cycle_index = static_cast<size_t>(cycle_index);
          st->block_index = block_index;
          st->num_open = num_open;
          st->end_of_input = r.read_int("end_of_input") != 0;
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
