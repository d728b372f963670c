// prefetch: a background producer thread filling a bounded buffer.
#include "strata/data/dataset.h"

#include <deque>
#include <exception>
#include <thread>

#include "strata/base/denormal.h"
#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"
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
      : in_(std::move(in)), capacity_(capacity) {}
  ~PrefetchIterator() override { stop(); }
  std::optional<Element> next() override {
    // The producer starts at the first next() (as TF's), so that an iterator
    // made only to be restored reads nothing before the restore.
    if (!started_) {
      started_ = true;
      start();
    }
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
  // Transparent: the buffered elements are handed back to the input, whose
  // state is saved at this prefix; a restored prefetch refills its buffer.
  void save(internal::StateWriter& w, std::vector<Element> pushed_back) override {
    if (!started_) {
      w.save_here(*in_, std::move(pushed_back));
      return;
    }
    stop();
    try {
      {
        MutexLock l(mu_);
        for (const Slot& s : buffer_) {
          if (s.error) {
            try {
              std::rethrow_exception(s.error);
            } catch (const std::exception& e) {
              throw FailedPreconditionError(
                  str_cat("PrefetchDataset: cannot save the iterator's position while an input "
                          "error is buffered (it reaches the consumer first): ",
                          e.what()));
            }
          }
          pushed_back.push_back(*s.value);
        }
      }
      w.save_here(*in_, std::move(pushed_back));
    } catch (...) {
      start();
      throw;
    }
    start();
  }
  void restore(internal::StateReader& r) override {
    stop();
    {
      MutexLock l(mu_);
      buffer_.clear();
      done_ = false;
    }
    r.restore_here(*in_);
    started_ = false;
  }

 private:
  struct Slot {
    std::optional<Element> value;
    std::exception_ptr error;
  };
  void start() {
    {
      MutexLock l(mu_);
      if (done_) return;
      cancelled_ = false;
    }
    thread_ = std::jthread([this] {
      const ScopedFlushDenormal flush;  // as every runtime thread (strata/base/denormal.h)
      produce();
    });
  }
  // Wakes and joins the producer; an element it was reading is buffered first.
  void stop() {
    {
      MutexLock l(mu_);
      cancelled_ = true;
    }
    cv_.notify_all();
    thread_ = std::jthread();  // joins
  }
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
  bool started_ = false;  // the consumer's thread only
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
    if (n_ == 0) return internal::make_iter(inputs()[0]);
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
