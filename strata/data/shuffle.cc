// shuffle: a seeded buffer refilled from the input, as tf.data does.
#include "strata/data/dataset.h"

#include <atomic>
#include <random>

#include "strata/base/errors.h"
#include "strata/core/random.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"
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
  explicit Rng(uint64_t seed, uint64_t stream = 0)
      : seed_(seed), stream_(stream), gen_(seed, stream) {}
  // Its position: seed, stream, blocks drawn, words used of the last block.
  void save(internal::StateWriter& w) const {
    w.write_int("seed", static_cast<int64_t>(seed_));
    w.write_int("stream", static_cast<int64_t>(stream_));
    w.write_int("counter", static_cast<int64_t>(counter_));
    w.write_int("used", pos_);
  }
  static Rng restored(const internal::StateReader& r) {
    Rng rng(static_cast<uint64_t>(r.read_int("seed")), static_cast<uint64_t>(r.read_int("stream")));
    rng.counter_ = static_cast<uint64_t>(r.read_int("counter"));
    const int64_t used = r.read_int("used");
    STRATA_CHECK_ARG(used >= 0 && used <= 4 && (used == 4 || rng.counter_ > 0),
                     "restoring an iterator: expected a shuffle random position at ", r.where(),
                     ", got ", used, " words used of block ", rng.counter_);
    rng.pos_ = static_cast<int>(used);
    if (rng.counter_ > 0) rng.block_ = rng.gen_(rng.counter_ - 1);
    return rng;
  }
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
  uint64_t seed_, stream_;
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
        seeds_(std::make_shared<Seeds>(o.seed.value_or(fresh_seed()))) {}
  int64_t cardinality() const override { return inputs()[0].cardinality(); }
  std::vector<TensorSpec> element_spec() const override { return inputs()[0].element_spec(); }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    // TF: a new seed per iteration when reshuffling, the same order otherwise.
    const uint64_t stream = o_.reshuffle_each_iteration ? seeds_->epoch.fetch_add(1) : 0;
    struct State {
      std::shared_ptr<IteratorImpl> in;
      std::vector<Element> buffer;
      bool end = false;
      Rng rng;
    };
    auto st = std::make_shared<State>(
        State{input_iter(inputs()[0]), {}, false, Rng(seeds_->seed.load(), stream)});
    const size_t cap = static_cast<size_t>(buffer_size_);
    auto seeds = seeds_;
    return make_fn_iterator(
        [st, cap]() -> std::optional<Element> {
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
        },
        // TF saves the buffer, the seeds and the random stream's position,
        // and the dataset's seed generator (the next iteration's stream).
        [st, seeds](internal::StateWriter& w, std::vector<Element>&) {
          w.write_elements("buffer", st->buffer);
          w.write_int("end", st->end ? 1 : 0);
          st->rng.save(w);
          w.write_int("next_epoch", static_cast<int64_t>(seeds->epoch.load()));
          w.save_input("input", *st->in);
        },
        [st, seeds](internal::StateReader& r) {
          st->buffer = r.read_elements("buffer");
          st->end = r.read_int("end") != 0;
          st->rng = Rng::restored(r);
          seeds->seed = static_cast<uint64_t>(r.read_int("seed"));
          seeds->epoch = static_cast<uint64_t>(r.read_int("next_epoch"));
          r.restore_input("input", *st->in);
        });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    ShuffleOptions o = o_;
    o.seed = seeds_->seed.load();
    return std::make_shared<ShuffleNode>(inputs.at(0), buffer_size_, o);
  }

 private:
  int64_t buffer_size_;
  ShuffleOptions o_;
  // The seed and the next iteration's stream (TF's seed generator), shared by
  // the node's iterators; a restore sets both to the saved run's.
  struct Seeds {
    explicit Seeds(uint64_t s) : seed(s) {}
    std::atomic<uint64_t> seed;
    std::atomic<uint64_t> epoch{0};
  };
  std::shared_ptr<Seeds> seeds_;
};

}  // namespace

Dataset Dataset::shuffle(int64_t buffer_size, ShuffleOptions o) const {
  STRATA_CHECK_ARG(buffer_size > 0, "shuffle: expected buffer_size > 0, got ", buffer_size);
  return Dataset(std::make_shared<ShuffleNode>(*this, buffer_size, o));
}

}  // namespace strata::data
