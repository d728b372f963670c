// shuffle: a seeded buffer refilled from the input, as tf.data does.
#include "strata/data/dataset.h"

#include <atomic>
#include <random>

#include "strata/base/errors.h"
#include "strata/core/random.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::input_iter;
using internal::IteratorImpl;
using internal::make_fn_iterator;

namespace {

uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

// Draws uniform integers in [0, n) from a Philox stream.
class Rng {
 public:
  explicit Rng(uint64_t seed, uint64_t stream = 0) : gen_(seed, stream) {}
  uint64_t uniform(uint64_t n) {
    if (pos_ == 4) {
      block_ = gen_(counter_++);
      pos_ = 0;
    }
    const uint64_t hi = block_[pos_];
    const uint64_t lo = block_[pos_ + 1];
    pos_ += 2;
    return ((hi << 32) | lo) % n;
  }

 private:
  random::Philox gen_;
  uint64_t counter_ = 0;
  random::Philox::Block block_{};
  int pos_ = 4;
};

class ShuffleNode : public DatasetNode {
 public:
  ShuffleNode(Dataset input, int64_t buffer_size, ShuffleOptions o)
      : DatasetNode(NodeKind::kShuffle, {std::move(input)}),
        buffer_size_(buffer_size),
        o_(o),
        seed_(o.seed.value_or(fresh_seed())),
        epoch_(std::make_shared<std::atomic<uint64_t>>(0)) {}
  int64_t cardinality() const override { return inputs()[0].cardinality(); }
  std::vector<TensorSpec> element_spec() const override { return inputs()[0].element_spec(); }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    // TF: a new seed per iteration when reshuffling, the same order otherwise.
    const uint64_t stream = o_.reshuffle_each_iteration ? epoch_->fetch_add(1) : 0;
    struct State {
      std::shared_ptr<IteratorImpl> in;
      std::vector<Element> buffer;
      bool end = false;
      Rng rng;
    };
    auto st =
        std::make_shared<State>(State{input_iter(inputs()[0]), {}, false, Rng(seed_, stream)});
    const size_t cap = static_cast<size_t>(buffer_size_);
    return make_fn_iterator([st, cap]() -> std::optional<Element> {
      while (!st->end && st->buffer.size() < cap) {
        auto e = st->in->next();
        if (!e) {
          st->end = true;
          break;
        }
        st->buffer.push_back(std::move(*e));
      }
      if (st->buffer.empty()) return std::nullopt;
      const size_t i = st->rng.uniform(st->buffer.size());
      Element out = std::move(st->buffer[i]);
      // TF's buffer semantics: the slot is refilled from the input.
      std::optional<Element> refill = st->end ? std::nullopt : st->in->next();
      if (refill) {
        st->buffer[i] = std::move(*refill);
      } else {
        st->end = true;
        st->buffer[i] = std::move(st->buffer.back());
        st->buffer.pop_back();
      }
      return out;
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    ShuffleOptions o = o_;
    o.seed = seed_;
    return std::make_shared<ShuffleNode>(inputs.at(0), buffer_size_, o);
  }

 private:
  int64_t buffer_size_;
  ShuffleOptions o_;
  uint64_t seed_;
  std::shared_ptr<std::atomic<uint64_t>> epoch_;
};

}  // namespace

Dataset Dataset::shuffle(int64_t buffer_size, ShuffleOptions o) const {
  STRATA_CHECK_ARG(buffer_size > 0, "shuffle: expected buffer_size > 0, got ", buffer_size);
  return Dataset(std::make_shared<ShuffleNode>(*this, buffer_size, o));
}

}  // namespace strata::data
