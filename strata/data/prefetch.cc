// prefetch: a background producer thread filling a bounded buffer.
#include "strata/data/dataset.h"

#include <deque>
#include <exception>
#include <thread>

#include "strata/base/denormal.h"
#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::input_iter;
using internal::IteratorImpl;

namespace {

// A background std::jthread fills a bounded buffer; errors are buffered in
// order with their type. The destructor wakes and joins the producer.
class PrefetchIterator : public IteratorImpl {
 public:
  PrefetchIterator(std::shared_ptr<IteratorImpl> in, size_t capacity)
      : in_(std::move(in)), capacity_(capacity) {
    thread_ = std::jthread([this] {
      const ScopedFlushDenormal flush;  // as every runtime thread (strata/base/denormal.h)
      produce();
    });
  }
  ~PrefetchIterator() override {
    {
      MutexLock l(mu_);
      cancelled_ = true;
    }
    cv_.notify_all();
    thread_ = std::jthread();  // joins
  }
  std::optional<Element> next() override {
    MutexLock l(mu_);
    cv_.wait(mu_, [&]() STRATA_REQUIRES(mu_) { return !buffer_.empty() || done_; });
    if (buffer_.empty()) return std::nullopt;
    Slot s = std::move(buffer_.front());
    buffer_.pop_front();
    l.unlock();
    cv_.notify_all();
    if (s.error) std::rethrow_exception(s.error);
    return std::move(s.value);
  }

 private:
  struct Slot {
    std::optional<Element> value;
    std::exception_ptr error;
  };
  void produce() {
    while (true) {
      {
        MutexLock l(mu_);
        cv_.wait(mu_,
                 [&]() STRATA_REQUIRES(mu_) { return cancelled_ || buffer_.size() < capacity_; });
        if (cancelled_) return;
      }
      Slot s;
      bool end = false;
      try {
        s.value = in_->next();
      } catch (...) {
        s.error = std::current_exception();
      }
      {
        MutexLock l(mu_);
        end = !s.value && !s.error;
        if (end) {
          done_ = true;
        } else {
          buffer_.push_back(std::move(s));
        }
      }
      cv_.notify_all();
      if (end) return;
    }
  }

  std::shared_ptr<IteratorImpl> in_;
  const size_t capacity_;
  Mutex mu_;
  CondVar cv_;
  std::deque<Slot> buffer_ STRATA_GUARDED_BY(mu_);
  bool done_ STRATA_GUARDED_BY(mu_) = false;
  bool cancelled_ STRATA_GUARDED_BY(mu_) = false;
  std::jthread thread_;
};

// TF's autotuner grows the buffer with demand; a fixed buffer this deep keeps a
// training step fed without unbounded memory.
constexpr int64_t kAutotunePrefetch = 16;

class PrefetchNode : public DatasetNode {
 public:
  PrefetchNode(Dataset input, int64_t n)
      : DatasetNode(NodeKind::kPrefetch, {std::move(input)}), n_(n) {}
  int64_t cardinality() const override { return inputs()[0].cardinality(); }
  std::vector<TensorSpec> element_spec() const override { return inputs()[0].element_spec(); }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    if (n_ == 0) return inputs()[0].node()->make_iterator();
    const int64_t cap = n_ == AUTOTUNE ? kAutotunePrefetch : n_;
    return std::make_unique<PrefetchIterator>(input_iter(inputs()[0]), static_cast<size_t>(cap));
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<PrefetchNode>(inputs.at(0), n_);
  }
  int64_t batch_size() const override { return n_; }

 private:
  int64_t n_;
};

}  // namespace

Dataset Dataset::prefetch(int64_t buffer_size) const {
  STRATA_CHECK_ARG(buffer_size >= 0 || buffer_size == AUTOTUNE,
                   "prefetch: expected buffer_size >= 0 or AUTOTUNE, got ", buffer_size);
  return Dataset(std::make_shared<PrefetchNode>(*this, buffer_size));
}

}  // namespace strata::data
