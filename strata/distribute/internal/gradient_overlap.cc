#include "strata/distribute/internal/gradient_overlap.h"

#include <algorithm>
#include <utility>

#include "strata/base/denormal.h"
#include "strata/base/errors.h"
#include "strata/collective/collectives.h"
#include "strata/ops/array_ops.h"

namespace strata::distribute::internal {

// --- CommunicationThread -----------------------------------------------------

CommunicationThread::CommunicationThread(const Device& device, std::string name)
    : name_(std::move(name)), device_(&device), thread_([this] { main_loop(); }) {}

CommunicationThread::~CommunicationThread() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    changed_.notify_all();
  }
  thread_ = std::jthread();  // joins once the queued jobs have run
}

void CommunicationThread::main_loop() {
  const DeviceScope device(*device_);
  const ScopedFlushDenormal flush;  // as the replica threads (strata/base/denormal.h)
  for (;;) {
    std::function<void()> job;
    bool skip = false;
    {
      MutexLock lock(mu_);
      changed_.wait(mu_, [&]() STRATA_REQUIRES(mu_) { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
      skip = failure_ != nullptr;
    }
    std::exception_ptr error;
    if (!skip) {
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
    }
    job = nullptr;  // the job's tensors go before the waiters look
    MutexLock lock(mu_);
    ++done_;
    if (error && failure_ == nullptr) {
      failure_ = error;
      failed_at_ = done_;
    }
    changed_.notify_all();
  }
}

uint64_t CommunicationThread::post(std::function<void()> job) {
  MutexLock lock(mu_);
  queue_.push_back(std::move(job));
  changed_.notify_all();
  return ++posted_;
}

uint64_t CommunicationThread::last_ticket() const {
  MutexLock lock(mu_);
  return posted_;
}

void CommunicationThread::wait(uint64_t ticket, std::chrono::milliseconds stall_timeout,
                               const std::string& waiter) {
  MutexLock lock(mu_);
  STRATA_INTERNAL_CHECK(ticket <= posted_, name_, ": wait for job ", ticket, " of ", posted_);
  while (done_ < ticket) {
    const uint64_t before = done_;
    const bool progressed = changed_.wait_for(mu_, stall_timeout, [&]() STRATA_REQUIRES(mu_) {
      return done_ >= ticket || done_ != before;
    });
    if (!progressed) {
      throw DeadlineExceededError(
          str_cat(waiter, " waited ", stall_timeout.count(), "ms for ", name_,
                  " to finish collective ", done_ + 1, " of its queue (it waits for job ", ticket,
                  "); the collective should have timed out on its own by then"));
    }
  }
  if (failure_ != nullptr && failed_at_ <= ticket) std::rethrow_exception(failure_);
}

bool CommunicationThread::wait_idle(std::chrono::milliseconds stall_timeout) {
  MutexLock lock(mu_);
  while (done_ < posted_) {
    const uint64_t before = done_;
    if (!changed_.wait_for(mu_, stall_timeout,
                           [&]() STRATA_REQUIRES(mu_) { return done_ != before; })) {
      return false;
    }
  }
  return true;
}

void CommunicationThread::clear_failure() {
  MutexLock lock(mu_);
  failure_ = nullptr;
  failed_at_ = 0;
}

// --- GradientOverlap ---------------------------------------------------------

// Collects one backward pass's gradients into buckets.
class GradientOverlap::Sink final : public GradientSink {
 public:
  Sink(GradientOverlap& owner, size_t num_sources)
      : owner_(&owner), remaining_(num_sources), pass_(std::make_shared<Pass>()) {
    if (remaining_ == 0) owner_->pass_completed(std::move(pass_));
  }

  void gradient_final(size_t source, const Tensor& gradient) override {
    (void)source;
    STRATA_INTERNAL_CHECK(remaining_ > 0, "GradientOverlap: more gradients than sources");
    // The collectives reduce float32 and float64; a gradient of another
    // dtype is left out, so a list holding it never matches this pass.
    if (gradient.defined() &&
        (gradient.dtype() == DType::float32 || gradient.dtype() == DType::float64)) {
      if (!open_) open_ = std::make_shared<Bucket>();
      pass_->where.push_back({gradient.id(), {pass_->buckets.size(), open_->inputs.size()}});
      open_->inputs.push_back(gradient);
      open_bytes_ += static_cast<int64_t>(gradient.size_bytes());
      if (open_bytes_ >= owner_->options_.bucket_bytes) close_bucket();
    }
    if (--remaining_ == 0) {
      if (open_) close_bucket();
      owner_->pass_completed(std::move(pass_));
    }
  }

 private:
  void close_bucket() {
    owner_->post_bucket(open_);
    pass_->buckets.push_back(std::move(open_));
    open_ = nullptr;
    open_bytes_ = 0;
  }

  GradientOverlap* owner_;
  size_t remaining_;
  std::shared_ptr<Pass> pass_;
  std::shared_ptr<Bucket> open_;
  int64_t open_bytes_ = 0;
};

GradientOverlap::GradientOverlap(std::shared_ptr<collective::Collectives> group, int rank,
                                 const Device& device, GradientOverlapOptions options)
    : group_(std::move(group)),
      rank_(rank),
      options_(std::move(options)),
      thread_(device, str_cat(options_.owner, "'s communication thread")) {
  STRATA_INTERNAL_CHECK(group_ != nullptr && options_.bucket_bytes > 0 &&
                        options_.stall_timeout.count() > 0);
}

GradientOverlap::~GradientOverlap() = default;

std::unique_ptr<GradientSink> GradientOverlap::sink(size_t num_sources) {
  return std::make_unique<Sink>(*this, num_sources);
}

void GradientOverlap::post_bucket(const std::shared_ptr<Bucket>& bucket) {
  ++counts_.buckets;
  bucket->ticket = thread_.post([group = group_, rank = rank_, bucket] {
    bucket->outputs = group->all_reduce(rank, bucket->inputs, collective::ReduceOp::SUM);
  });
}

void GradientOverlap::pass_completed(std::shared_ptr<Pass> pass) {
  passes_.push_back(std::move(pass));
}

int64_t GradientOverlap::matching_pass(const std::vector<Tensor>& values) const {
  for (size_t p = 0; p < passes_.size(); ++p) {
    const Pass& pass = *passes_[p];
    if (pass.where.size() != values.size()) continue;
    std::vector<uint64_t> ids;
    ids.reserve(values.size());
    for (const Tensor& v : values) ids.push_back(v.id());
    std::sort(ids.begin(), ids.end());
    if (std::adjacent_find(ids.begin(), ids.end()) != ids.end()) return -1;  // a value twice
    std::vector<uint64_t> own;
    own.reserve(pass.where.size());
    for (const auto& [id, at] : pass.where) own.push_back(id);
    std::sort(own.begin(), own.end());
    if (ids == own) return static_cast<int64_t>(p);
  }
  return -1;
}

std::optional<std::vector<Tensor>> GradientOverlap::take(const std::vector<Tensor>& values,
                                                         bool sum) {
  if (passes_.empty()) return std::nullopt;
  const int64_t mine = sum ? matching_pass(values) : -1;
  // MAX over every replica of (k, -k): equal extremes mean every replica
  // matched the same pass (or none did).
  auto agreement = std::make_shared<Tensor>(constant(std::vector<int64_t>{mine, -mine}));
  const uint64_t ticket = thread_.post([group = group_, rank = rank_, agreement] {
    *agreement = group->all_reduce(rank, *agreement, collective::ReduceOp::MAX);
  });
  thread_.wait(ticket, options_.stall_timeout, options_.owner);
  const std::vector<int64_t> extremes = agreement->to_vector<int64_t>();
  const int64_t highest = extremes[0], lowest = -extremes[1];
  if (highest < 0) return std::nullopt;  // nobody's values were a pass: keep them for later
  if (highest != lowest) {
    // Some replica reduces other values: everybody reduces its own values.
    counts_.discarded += static_cast<int64_t>(passes_.size());
    passes_.clear();
    return std::nullopt;
  }
  const std::shared_ptr<Pass> pass = passes_.at(static_cast<size_t>(highest));
  passes_.erase(passes_.begin() + highest);
  std::vector<Tensor> out;
  out.reserve(values.size());
  for (const Tensor& v : values) {
    const auto it = std::find_if(pass->where.begin(), pass->where.end(),
                                 [&](const auto& w) { return w.first == v.id(); });
    STRATA_INTERNAL_CHECK(it != pass->where.end());
    const auto [bucket, position] = it->second;
    out.push_back(pass->buckets.at(bucket)->outputs.at(position));
  }
  ++counts_.used;
  return out;
}

void GradientOverlap::drain() {
  const uint64_t last = thread_.last_ticket();
  if (last > 0) thread_.wait(last, options_.stall_timeout, options_.owner);
}

void GradientOverlap::finish_step() {
  drain();
  counts_.discarded += static_cast<int64_t>(passes_.size());
  passes_.clear();
}

void GradientOverlap::recover() {
  // Not idle after stall_timeout without progress: the next step's drain()
  // reports it; nothing here may wait without a bound.
  thread_.wait_idle(options_.stall_timeout);
  counts_.discarded += static_cast<int64_t>(passes_.size());
  passes_.clear();
  thread_.clear_failure();
}

}  // namespace strata::distribute::internal
