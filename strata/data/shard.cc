// shard, including the auto-sharding variant that requires a non-empty shard.
#include "strata/data/dataset.h"

#include "strata/base/errors.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::input_iter;
using internal::IteratorImpl;
using internal::make_fn_iterator;

namespace {

class ShardNode : public DatasetNode {
 public:
  ShardNode(Dataset input, int64_t n, int64_t index, bool require_non_empty)
      : DatasetNode(NodeKind::kShard, {std::move(input)}),
        n_(n),
        index_(index),
        require_(require_non_empty) {}
  int64_t cardinality() const override {
    return internal::shard_cardinality(inputs()[0].cardinality(), n_, index_);
  }
  std::vector<TensorSpec> element_spec() const override { return inputs()[0].element_spec(); }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    auto in = input_iter(inputs()[0]);
    auto seen = std::make_shared<int64_t>(0);
    auto produced = std::make_shared<bool>(false);
    const int64_t n = n_, index = index_;
    const bool require = require_;
    STRATA_CHECK_ARG(n >= 1, "shard: expected num_shards >= 1, got ", n,
                     " (shard(SHARD_HINT, i) only works under AutoShardPolicy::HINT)");
    return make_fn_iterator(
        [in, seen, produced, n, index, require]() -> std::optional<Element> {
          while (true) {
            auto e = in->next();
            if (!e) {
              STRATA_CHECK_ARG(
                  !require || *produced || *seen >= n,
                  "There aren't enough elements in this dataset for each shard to have at least "
                  "one "
                  "element (# elems = ",
                  *seen, ", # shards = ", n,
                  "). If you are using datasets with distribution strategy, consider setting the "
                  "auto "
                  "sharding policy to either DATA or OFF using the `experimental_distribute."
                  "auto_shard_policy` option of `tf.data.Options()`.");
              return std::nullopt;
            }
            const int64_t i = (*seen)++;
            if (i % n == index) {
              *produced = true;
              return e;
            }
          }
        },
        [in, seen, produced, n, index](internal::StateWriter& w, std::vector<Element>&) {
          w.write_int("num_shards", n);
          w.write_int("index", index);
          w.write_int("seen", *seen);
          w.write_int("produced", *produced ? 1 : 0);
          w.save_input("input", *in);
        },
        [in, seen, produced, n, index](internal::StateReader& r) {
          const int64_t saved_n = r.read_int("num_shards"), saved_index = r.read_int("index");
          STRATA_CHECK_ARG(saved_n == n && saved_index == index,
                           "restoring an iterator: expected the state of shard(", n, ", ", index,
                           ") at ", r.where(), ", got that of shard(", saved_n, ", ", saved_index,
                           ")");
          *seen = r.read_int("seen");
          *produced = r.read_int("produced") != 0;
          r.restore_input("input", *in);
        });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<ShardNode>(inputs.at(0), n_, index_, require_);
  }
  int64_t num_shards() const override { return n_; }
  int64_t shard_index() const override { return index_; }

 private:
  int64_t n_, index_;
  bool require_;
};

}  // namespace

namespace internal {
Dataset shard_require_non_empty(const Dataset& ds, int64_t num_shards, int64_t index) {
  STRATA_CHECK_ARG(num_shards >= 1, "shard: expected num_shards >= 1, got ", num_shards);
  STRATA_CHECK_ARG(index >= 0 && index < num_shards, "shard: expected 0 <= index < num_shards (",
                   num_shards, "), got index ", index);
  return Dataset(std::make_shared<ShardNode>(ds, num_shards, index, true));
}
}  // namespace internal

Dataset Dataset::shard(int64_t num_shards, int64_t index) const {
  // shard(SHARD_HINT, i) is a placeholder for AutoShardPolicy::HINT; iterating
  // it un-rewritten fails.
  if (num_shards == SHARD_HINT && index >= 0)
    return Dataset(std::make_shared<ShardNode>(*this, num_shards, index, false));
  STRATA_CHECK_ARG(num_shards >= 1, "shard: expected num_shards >= 1, got ", num_shards);
  STRATA_CHECK_ARG(index >= 0 && index < num_shards, "shard: expected 0 <= index < num_shards (",
                   num_shards, "), got index ", index);
  return Dataset(std::make_shared<ShardNode>(*this, num_shards, index, false));
}

}  // namespace strata::data
