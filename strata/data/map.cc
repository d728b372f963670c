// map (sequential and parallel) and filter.
#include "strata/data/dataset.h"

#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "strata/base/denormal.h"
#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::autotune_threads;
using internal::input_iter;
using internal::IteratorImpl;
using internal::make_dataset;
using internal::make_fn_iterator;
using internal::spec_of;

namespace {

class MapNode : public DatasetNode {
 public:
  MapNode(Dataset input, MapFn fn, MapOptions o)
      : DatasetNode(NodeKind::kMap, {std::move(input)}),
        fn_(std::move(fn)),
        o_(std::move(o)),
        spec_cache_(std::make_shared<SpecCache>()) {}
  int64_t cardinality() const override { return inputs()[0].cardinality(); }
  std::vector<TensorSpec> element_spec() const override {
    if (!o_.output_signature.empty()) return o_.output_signature;
    // Without a signature the spec is that of the first output element (TF
    // would trace fn; we run it once on the first input element).
    std::call_once(spec_cache_->once, [&] {
      auto it = make_sequential();
      auto e = it->next();
      spec_cache_->spec = e ? spec_of(*e) : inputs()[0].element_spec();
    });
    return spec_cache_->spec;
  }
  std::unique_ptr<IteratorImpl> make_iterator() const override;
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<MapNode>(inputs.at(0), fn_, o_);
  }

 private:
  struct SpecCache {
    std::once_flag once;
    std::vector<TensorSpec> spec;
  };
  std::unique_ptr<IteratorImpl> make_sequential() const {
    auto in = input_iter(inputs()[0]);
    auto fn = fn_;
    return make_fn_iterator(
        [in, fn]() -> std::optional<Element> {
          auto e = in->next();
          if (!e) return std::nullopt;
          return fn(*e);
        },
        [in](internal::StateWriter& w, std::vector<Element>&) { w.save_input("input", *in); },
        [in](internal::StateReader& r) { r.restore_input("input", *in); });
  }
  MapFn fn_;
  MapOptions o_;
  std::shared_ptr<SpecCache> spec_cache_;
};

// Parallel map: `workers` threads each pull the next input element (input
// access serialised by in_mu_), apply fn outside every lock and store the
// result (or the exception) under its sequence number. At most `workers`
// results are outstanding ahead of the consumer. Deterministic mode returns
// results in sequence order; otherwise in completion order.
class ParallelMapIterator : public IteratorImpl {
 public:
  ParallelMapIterator(std::shared_ptr<IteratorImpl> in, MapFn fn, int64_t workers,
                      bool deterministic)
      : in_(std::move(in)), fn_(std::move(fn)), window_(workers), deterministic_(deterministic) {}
  ~ParallelMapIterator() override { stop_workers(/*drain=*/false); }
  std::optional<Element> next() override {
    if (!pending_.empty()) {
      Element e = std::move(pending_.front());
      pending_.erase(pending_.begin());
      return e;
    }
    // The workers start at the first next() (as TF's), so that an iterator
    // made only to be restored reads nothing before the restore.
    if (!started_) {
      started_ = true;
      start_workers();
    }
    MutexLock l(mu_);
    while (true) {
      auto it = deterministic_ ? results_.find(next_out_) : results_.begin();
      if (it != results_.end()) {
        Result r = take(it);
        l.unlock();
        cv_.notify_all();
        if (r.error) std::rethrow_exception(r.error);
        return std::move(r.value);
      }
      if (end_seq_ >= 0 && (deterministic_ ? next_out_ >= end_seq_ : in_flight_ == 0))
        return std::nullopt;
      cv_.wait(mu_);
    }
  }

  // TF's ParallelMapDataset saves its finished results; here the workers
  // finish the calls in flight, and the results in input order are saved
  // (after the elements handed back) as the elements to return first.
  void save(internal::StateWriter& w, std::vector<Element> pushed_back) override {
    if (!started_) {
      pushed_back.insert(pushed_back.end(), pending_.begin(), pending_.end());
      w.write_kind(kind_name());
      w.write_elements("pending", pushed_back);
      w.save_input("input", *in_);
      return;
    }
    stop_workers(/*drain=*/true);
    std::exception_ptr failed;
    {
      MutexLock l(mu_);
      pushed_back.insert(pushed_back.end(), pending_.begin(), pending_.end());
      for (auto& [seq, r] : results_) {
        if (r.error) failed = r.error;
        if (r.value) pushed_back.push_back(*r.value);
      }
    }
    try {
      if (failed) {
        try {
          std::rethrow_exception(failed);
        } catch (const std::exception& e) {
          throw FailedPreconditionError(str_cat(
              "MapDataset: cannot save the iterator's position while the map function's error "
              "on a buffered element is pending (it reaches the consumer first): ",
              e.what()));
        }
      }
      w.write_kind(kind_name());
      w.write_elements("pending", pushed_back);
      w.save_input("input", *in_);
    } catch (...) {
      start_workers();
      throw;
    }
    start_workers();
  }
  void restore(internal::StateReader& r) override {
    stop_workers(/*drain=*/false);
    r.check_kind(kind_name());
    pending_ = r.read_elements("pending");
    r.restore_input("input", *in_);
    {
      MutexLock l(mu_);
      results_.clear();
      next_in_ = next_out_ = consumed_ = in_flight_ = 0;
      end_seq_ = -1;
    }
    started_ = false;
  }

 private:
  struct Result {
    std::optional<Element> value;
    std::exception_ptr error;
  };
  void start_workers() {
    {
      MutexLock l(mu_);
      cancelled_ = draining_ = false;
    }
    for (int64_t i = 0; i < window_; ++i) {
      threads_.emplace_back([this] {
        const ScopedFlushDenormal flush;  // as every runtime thread (strata/base/denormal.h)
        work();
      });
    }
  }
  // drain: the workers finish the calls they started and store the results;
  // otherwise those are dropped.
  void stop_workers(bool drain) {
    {
      MutexLock l(mu_);
      (drain ? draining_ : cancelled_) = true;
    }
    cv_.notify_all();
    threads_.clear();  // joins
  }
  Result take(std::map<int64_t, Result>::iterator it) STRATA_REQUIRES(mu_) {
    Result r = std::move(it->second);
    results_.erase(it);
    ++next_out_;
    ++consumed_;
    return r;
  }
  void work() {
    while (true) {
      int64_t seq = 0;
      std::optional<Element> input;
      std::exception_ptr error;
      {
        MutexLock l(mu_);
        cv_.wait(mu_, [&]() STRATA_REQUIRES(mu_) {
          return cancelled_ || draining_ || end_seq_ >= 0 || next_in_ - consumed_ < window_;
        });
        if (cancelled_ || draining_ || end_seq_ >= 0) return;
      }
      {
        // Input pulls are serialised by in_mu_ (not mu_, so the consumer can
        // take results meanwhile); numbering under it keeps input order.
        MutexLock il(in_mu_);
        {
          MutexLock l(mu_);
          if (cancelled_ || draining_ || end_seq_ >= 0) return;
          // Another worker may have taken the last place in the window
          // since this one saw it open: wait again.
          if (next_in_ - consumed_ >= window_) continue;
          seq = next_in_++;
          ++in_flight_;
        }
        try {
          input = in_->next();
        } catch (...) {
          error = std::current_exception();
        }
        if (!input && !error) {
          {
            MutexLock l(mu_);
            end_seq_ = seq;
            --in_flight_;
          }
          cv_.notify_all();
          return;
        }
      }
      {
        // An input that arrives after the destructor asked the workers to stop
        // is dropped unmapped, so teardown waits for at most the calls already
        // running (the input pull, or fn on an earlier input), not a new one.
        MutexLock l(mu_);
        if (cancelled_) {
          --in_flight_;
          return;
        }
      }
      Result r;
      if (error) {
        r.error = error;
      } else {
        try {
          r.value = fn_(*input);
        } catch (...) {
          r.error = std::current_exception();
        }
      }
      {
        MutexLock l(mu_);
        results_.emplace(seq, std::move(r));
        --in_flight_;
      }
      cv_.notify_all();
    }
  }

  std::shared_ptr<IteratorImpl> in_;
  MapFn fn_;
  const int64_t window_;
  const bool deterministic_;
  Mutex in_mu_;  // serialises in_->next()
  Mutex mu_;
  CondVar cv_;
  std::map<int64_t, Result> results_ STRATA_GUARDED_BY(mu_);
  int64_t next_in_ STRATA_GUARDED_BY(mu_) = 0;
  int64_t next_out_ STRATA_GUARDED_BY(mu_) = 0;
  int64_t consumed_ STRATA_GUARDED_BY(mu_) = 0;
  int64_t in_flight_ STRATA_GUARDED_BY(mu_) = 0;
  int64_t end_seq_ STRATA_GUARDED_BY(mu_) = -1;
  bool cancelled_ STRATA_GUARDED_BY(mu_) = false;
  bool draining_ STRATA_GUARDED_BY(mu_) = false;
  // Restored elements returned before any new result (the consumer's thread only).
  std::vector<Element> pending_;
  bool started_ = false;               // the consumer's thread only
  std::vector<std::jthread> threads_;  // last member: joined before the rest is destroyed
};

}  // namespace

std::unique_ptr<IteratorImpl> MapNode::make_iterator() const {
  const int64_t p = o_.num_parallel_calls == AUTOTUNE ? autotune_threads() : o_.num_parallel_calls;
  if (p <= 1) return make_sequential();
  return std::make_unique<ParallelMapIterator>(input_iter(inputs()[0]), fn_, p,
                                               o_.deterministic.value_or(true));
}

Dataset Dataset::map(MapFn fn, MapOptions o) const {
  STRATA_CHECK_ARG(fn != nullptr, "map: expected a function, got an empty one");
  STRATA_CHECK_ARG(o.num_parallel_calls >= 1 || o.num_parallel_calls == AUTOTUNE,
                   "map: expected num_parallel_calls >= 1 or AUTOTUNE, got ", o.num_parallel_calls);
  return Dataset(std::make_shared<MapNode>(*this, std::move(fn), std::move(o)));
}

Dataset Dataset::filter(const Predicate& pred) const {
  STRATA_CHECK_ARG(pred != nullptr, "filter: expected a predicate, got an empty function");
  return make_dataset(
      NodeKind::kFilter, {*this}, element_spec(), [pred](const std::vector<Dataset>& inputs) {
        auto in = input_iter(inputs[0]);
        return make_fn_iterator(
            [in, pred]() -> std::optional<Element> {
              while (auto e = in->next())
                if (pred(*e)) return e;
              return std::nullopt;
            },
            [in](internal::StateWriter& w, std::vector<Element>&) { w.save_input("input", *in); },
            [in](internal::StateReader& r) { r.restore_input("input", *in); });
      });
}

}  // namespace strata::data
