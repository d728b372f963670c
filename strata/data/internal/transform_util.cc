#include "strata/data/internal/transform_util.h"

#include <algorithm>
#include <deque>
#include <thread>

#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"

namespace strata::data::internal {

namespace {

class SimpleNode : public DatasetNode {
 public:
  SimpleNode(NodeKind kind, std::vector<Dataset> inputs, std::vector<TensorSpec> spec,
             IterFactory f, CardinalityFn card)
      : DatasetNode(kind, std::move(inputs)),
        spec_(std::move(spec)),
        factory_(std::move(f)),
        card_(std::move(card)) {}
  std::vector<TensorSpec> element_spec() const override { return spec_; }
  int64_t cardinality() const override { return card_ ? card_(inputs()) : UNKNOWN_CARDINALITY; }
  std::unique_ptr<IteratorImpl> make_iterator() const override { return factory_(inputs()); }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<SimpleNode>(kind(), std::move(inputs), spec_, factory_, card_);
  }

 private:
  std::vector<TensorSpec> spec_;
  IterFactory factory_;
  CardinalityFn card_;
};

// An iterator whose next() is a lambda over captured state. Elements handed
// back at a save and restored later wait in pending_, returned first.
class FnIterator : public IteratorImpl {
 public:
  FnIterator(std::function<std::optional<Element>()> fn, SaveFn save, RestoreFn restore,
             RestoreFn restore_without, RewindFn rewind)
      : fn_(std::move(fn)),
        save_(std::move(save)),
        restore_(std::move(restore)),
        restore_without_(std::move(restore_without)),
        rewind_(std::move(rewind)) {}
  std::optional<Element> next() override {
    if (!pending_.empty()) {
      Element e = std::move(pending_.front());
      pending_.pop_front();
      return e;
    }
    return fn_();
  }
  void save(StateWriter& w, std::vector<Element> pushed_back) override {
    if (!save_) {
      IteratorImpl::save(w, std::move(pushed_back));
      return;
    }
    w.write_kind(kind_name());
    pushed_back.insert(pushed_back.end(), pending_.begin(), pending_.end());
    save_(w, pushed_back);
    w.write_elements("pending", pushed_back);
  }
  bool rewind() override {
    if (!rewind_) return false;
    pending_.clear();
    rewind_();
    return true;
  }
  void restore(StateReader& r) override {
    if (!restore_) {
      IteratorImpl::restore(r);
      return;
    }
    if (restore_without_ && r.saved_kind() != kind_name()) {
      pending_.clear();
      restore_without_(r);
      return;
    }
    r.check_kind(kind_name());
    restore_(r);
    std::vector<Element> pending = r.read_elements("pending");
    pending_.assign(std::make_move_iterator(pending.begin()),
                    std::make_move_iterator(pending.end()));
  }

 private:
  std::function<std::optional<Element>()> fn_;
  SaveFn save_;
  RestoreFn restore_;
  RestoreFn restore_without_;
  RewindFn rewind_;
  std::deque<Element> pending_;
};

}  // namespace

int64_t autotune_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 4 : static_cast<int64_t>(n);
}

std::vector<TensorSpec> spec_of(const Element& e) {
  std::vector<TensorSpec> s;
  s.reserve(e.size());
  for (const Tensor& t : e) s.emplace_back(t.shape(), t.dtype());
  return s;
}

std::string specs_string(const std::vector<TensorSpec>& specs) {
  std::string r = "(";
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i) r += ", ";
    r += specs[i].to_string();
  }
  return r + ")";
}

std::unique_ptr<IteratorImpl> make_fn_iterator(std::function<std::optional<Element>()> fn,
                                               SaveFn save, RestoreFn restore,
                                               RestoreFn restore_without, RewindFn rewind) {
  return std::make_unique<FnIterator>(std::move(fn), std::move(save), std::move(restore),
                                      std::move(restore_without), std::move(rewind));
}

std::unique_ptr<IteratorImpl> make_iter(const Dataset& d) {
  auto it = d.node()->make_iterator();
  it->set_kind(d.kind());
  return it;
}

std::shared_ptr<IteratorImpl> input_iter(const Dataset& d) { return make_iter(d); }

Dataset make_dataset(NodeKind kind, std::vector<Dataset> inputs, std::vector<TensorSpec> spec,
                     IterFactory f, CardinalityFn card) {
  return Dataset(std::make_shared<SimpleNode>(kind, std::move(inputs), std::move(spec),
                                              std::move(f), std::move(card)));
}

int64_t repeat_cardinality(int64_t n, int64_t count) {
  if (n == INFINITE_CARDINALITY || n == UNKNOWN_CARDINALITY) return n;
  if (n == 0 || count == 0) return 0;
  return count == kInfinite ? INFINITE_CARDINALITY : n * count;
}

int64_t take_cardinality(int64_t n, int64_t count) {
  if (count == kInfinite) return n;
  if (n == INFINITE_CARDINALITY) return count;
  if (n == UNKNOWN_CARDINALITY) return n;
  return std::min(n, count);
}

int64_t skip_cardinality(int64_t n, int64_t count) {
  if (n == INFINITE_CARDINALITY || n == UNKNOWN_CARDINALITY) return n;
  if (count == kInfinite) return 0;
  return std::max<int64_t>(0, n - count);
}

int64_t batch_cardinality(int64_t n, int64_t batch_size, bool drop_remainder) {
  if (n == INFINITE_CARDINALITY || n == UNKNOWN_CARDINALITY) return n;
  return drop_remainder ? n / batch_size : (n + batch_size - 1) / batch_size;
}

int64_t shard_cardinality(int64_t n, int64_t num_shards, int64_t index) {
  if (num_shards <= 0) return UNKNOWN_CARDINALITY;  // SHARD_HINT before the rewrite
  if (n == INFINITE_CARDINALITY || n == UNKNOWN_CARDINALITY) return n;
  return n / num_shards + (index < n % num_shards ? 1 : 0);
}

int64_t range_cardinality(int64_t start, int64_t stop, int64_t step) {
  if (step > 0) return stop > start ? (stop - start + step - 1) / step : 0;
  return start > stop ? (start - stop - step - 1) / -step : 0;
}

int64_t zip_cardinality(const std::vector<Dataset>& inputs) {
  int64_t result = INFINITE_CARDINALITY;
  for (const Dataset& d : inputs) {
    const int64_t n = d.cardinality();
    if (n == UNKNOWN_CARDINALITY) return n;
    if (n == INFINITE_CARDINALITY) continue;
    result = result == INFINITE_CARDINALITY ? n : std::min(result, n);
  }
  return result;
}

int64_t concatenate_cardinality(int64_t a, int64_t b) {
  if (a == UNKNOWN_CARDINALITY || b == UNKNOWN_CARDINALITY) return UNKNOWN_CARDINALITY;
  if (a == INFINITE_CARDINALITY || b == INFINITE_CARDINALITY) return INFINITE_CARDINALITY;
  return a + b;
}

}  // namespace strata::data::internal
