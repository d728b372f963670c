#include "strata/collective/local_collectives.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <optional>
#include <thread>

#include "strata/base/cpu_relax.h"
#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/collective/internal/buffer_pool.h"
#include "strata/collective/internal/reduce.h"
#include "strata/collective/internal/signature.h"
#include "strata/core/device.h"

namespace strata::collective {

using internal::CallSignature;
using internal::CollectiveKind;

namespace {

constexpr const char* kWho = "LocalCollectives";
using Clock = std::chrono::steady_clock;

// Waiters poll the phase counter this many times before blocking: a barrier
// between replica threads that arrive within microseconds of each other then
// costs no system call. Kept short because replica threads often outnumber
// cores, and a spinning thread steals time from the ones still computing.
// Then they block at once: no sched_yield() rounds, which on a loaded machine
// put the waiter behind every other runnable task (the kernel's EEVDF
// scheduler pushes a yielding task's deadline back) and tripled the median
// 1 MiB all-reduce (bench/collective_bench.cc, docs/PERFORMANCE.md).
constexpr int kSpinPolls = 256;

// Output slices start on 64-byte boundaries so that no two rank threads write
// the same cache line.
int64_t slice_elements(int64_t total, int size, DType dtype) {
  const int64_t align = std::max<int64_t>(1, 64 / static_cast<int64_t>(dtype_size(dtype)));
  const int64_t per = (total + size - 1) / size;
  return (per + align - 1) / align * align;
}

struct Range {
  int64_t begin = 0;
  int64_t end = 0;
};

Range slice_of(int64_t total, int size, int rank, DType dtype) {
  const int64_t per = slice_elements(total, size, dtype);
  const int64_t b = std::min(total, per * rank);
  return {b, std::min(total, b + per)};
}

std::string ranks_string(const std::vector<int>& ranks) { return str_cat(ranks); }

// One rank's published call.
struct Request {
  CallSignature sig;
  std::vector<Tensor> tensors;  // keeps the inputs alive while other ranks read them
};

// What the last rank to arrive prepares for everybody.
// Its lists are in the buffer cache (PooledVector): every call makes a plan.
struct Plan {
  ErrorCode error_code = ErrorCode::OK;
  std::string error;
  // all_reduce: one output buffer per dtype; tensor t lives in group group_of[t]
  // at element offset offset_of[t].
  struct Group {
    DType dtype = DType::float32;
    int64_t total = 0;
    std::shared_ptr<Buffer> buffer = nullptr;
    PooledVector<int> tensors = {};
  };
  PooledVector<Group> groups;
  PooledVector<int> group_of;
  PooledVector<int64_t> offset_of;
  // inputs[t][r]: rank r's elements of tensor t.
  PooledVector<PooledVector<const void*>> inputs;
  // all_gather / reduce_scatter / broadcast: the single output.
  std::shared_ptr<Buffer> buffer;
  TensorShape shape;
  PooledVector<int64_t> rank_offset;  // all_gather: element offset of each rank's part
};

}  // namespace

struct internal::LocalState {
  LocalState(int n, CollectiveOptions o)
      : size(n),
        options(o),
        here(n, 0),
        inside(n, 0),
        slots(n),
        pool(std::make_shared<internal::BufferPool>()) {}

  const int size;
  const CollectiveOptions options;

  Mutex mu;
  CondVar cv;
  // Completed barrier phases; written under mu, polled without it.
  std::atomic<uint64_t> phase{0};
  std::atomic<bool> failed{false};
  int arrived STRATA_GUARDED_BY(mu) = 0;
  std::vector<char> here STRATA_GUARDED_BY(mu);    // arrived in the current phase
  std::vector<char> inside STRATA_GUARDED_BY(mu);  // inside a call
  int active STRATA_GUARDED_BY(mu) = 0;
  uint64_t calls STRATA_GUARDED_BY(mu) = 0;  // calls whose first phase completed
  ErrorCode failure_code STRATA_GUARDED_BY(mu) = ErrorCode::OK;
  std::string failure STRATA_GUARDED_BY(mu);
  // Written by the last arriver under mu; read by all ranks between the two
  // barriers of a call (the next writer needs every rank to have arrived again).
  std::vector<Request> slots;
  Plan plan;
  const std::shared_ptr<internal::BufferPool> pool;

  [[noreturn]] void throw_failure() STRATA_REQUIRES(mu) { throw_error(failure_code, failure); }

  void fail(ErrorCode code, std::string message) STRATA_REQUIRES(mu) {
    if (!failed.load(std::memory_order_relaxed)) {
      failure_code = code;
      failure = std::move(message);
      failed.store(true, std::memory_order_release);
    }
    cv.notify_all();
  }

  // Arrives at the current barrier phase. The last rank to arrive runs `leader`
  // first and completes the phase (nullopt); the others get the phase to wait
  // past, with spin_past() and then wait_past().
  template <typename Leader>
  std::optional<uint64_t> arrive(int rank, Leader&& leader) STRATA_REQUIRES(mu) {
    if (failed.load(std::memory_order_relaxed)) throw_failure();
    here[rank] = 1;
    if (++arrived == size) {
      leader();
      arrived = 0;
      std::fill(here.begin(), here.end(), 0);
      phase.fetch_add(1, std::memory_order_release);
      cv.notify_all();
      return std::nullopt;
    }
    return phase.load(std::memory_order_relaxed);
  }

  // Polls a while, without mu, for the phase after `mine`; true once it came.
  bool spin_past(uint64_t mine) const {
    for (int i = 0; i < kSpinPolls; ++i) {
      if (phase.load(std::memory_order_acquire) != mine) return true;
      if (failed.load(std::memory_order_acquire)) return false;
      cpu_relax();
    }
    return false;
  }

  // Blocks until the phase after `mine` or `deadline`. Throws the group's
  // failure, or fails the group with DeadlineExceededError naming the ranks
  // that did not arrive (`missing_means` says at what).
  void wait_past(uint64_t mine, int rank, Clock::time_point deadline, const char* what,
                 uint64_t call, const char* missing_means) STRATA_REQUIRES(mu) {
    cv.wait_until(mu, deadline, [&]() STRATA_REQUIRES(mu) {
      return phase.load(std::memory_order_relaxed) != mine ||
             failed.load(std::memory_order_relaxed);
    });
    if (phase.load(std::memory_order_relaxed) != mine) return;
    if (failed.load(std::memory_order_relaxed)) throw_failure();
    std::vector<int> missing;
    for (int r = 0; r < size; ++r) {
      if (!here[r]) missing.push_back(r);
    }
    fail(ErrorCode::DEADLINE_EXCEEDED,
         str_cat(kWho, " ", what, " #", call, ": rank ", rank, " waited ", options.timeout.count(),
                 "ms for ranks ", ranks_string(missing), " ", missing_means));
    throw_failure();
  }
};

namespace {

// Marks `rank` inside a call for its duration (reset() refuses while any is).
// Takes mu for the marking and the unmarking only, so it outlives the call's
// own lock, which barriers release and re-acquire.
class CallScope {
 public:
  CallScope(internal::LocalState& s, int rank) : s_(s), rank_(rank) {
    MutexLock lock(s_.mu);
    STRATA_CHECK_ARG(!s_.inside[rank], kWho, ": rank ", rank,
                     " is already inside a collective (two threads used the same rank)");
    s_.inside[rank] = 1;
    ++s_.active;
  }
  ~CallScope() {
    MutexLock lock(s_.mu);
    s_.inside[rank_] = 0;
    --s_.active;
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  internal::LocalState& s_;
  int rank_;
};

void check_rank(int rank, int size) {
  STRATA_CHECK_ARG(rank >= 0 && rank < size, kWho, ": expected a rank in [0, ", size, "), got ",
                   rank);
}

// Builds the plan of the call every rank has now published (leader, under mu).
void make_plan(internal::LocalState& s, uint64_t call) STRATA_REQUIRES(s.mu) {
  Plan& plan = s.plan;
  plan = Plan{};
  try {
    const CallSignature& first = s.slots[0].sig;
    for (int r = 1; r < s.size; ++r) {
      if (!s.slots[r].sig.matches(first)) {
        throw InvalidArgumentError(internal::mismatch_message(kWho, call, 0, first.to_string(), r,
                                                              s.slots[r].sig.to_string()));
      }
    }
    first.validate(kWho, s.size);
    const int n = s.size;
    const size_t count = s.slots[0].tensors.size();
    plan.inputs.assign(count, PooledVector<const void*>(n));
    for (size_t t = 0; t < count; ++t) {
      for (int r = 0; r < n; ++r) plan.inputs[t][r] = s.slots[r].tensors[t].raw_data();
    }
    switch (first.kind) {
      case CollectiveKind::all_reduce: {
        plan.group_of.resize(count);
        plan.offset_of.resize(count);
        for (size_t t = 0; t < count; ++t) {
          const DType d = first.tensors[t].dtype;
          auto it = std::find_if(plan.groups.begin(), plan.groups.end(),
                                 [d](const Plan::Group& g) { return g.dtype == d; });
          if (it == plan.groups.end()) {
            plan.groups.push_back(Plan::Group{.dtype = d});
            it = plan.groups.end() - 1;
          }
          plan.group_of[t] = static_cast<int>(it - plan.groups.begin());
          plan.offset_of[t] = it->total;
          it->total += s.slots[0].tensors[t].num_elements();
          it->tensors.push_back(static_cast<int>(t));
        }
        for (Plan::Group& g : plan.groups)
          g.buffer = internal::BufferPool::get(s.pool, g.dtype, g.total);
        break;
      }
      case CollectiveKind::all_gather: {
        const Tensor& t0 = s.slots[0].tensors[0];
        int64_t rows = 0;
        const int64_t row_elems = t0.shape().removed(0).num_elements();
        plan.rank_offset.resize(n);
        for (int r = 0; r < n; ++r) {
          plan.rank_offset[r] = rows * row_elems;
          rows += s.slots[r].tensors[0].shape().dim(0);
        }
        plan.shape = t0.shape().with_dim(0, rows);
        plan.buffer = internal::BufferPool::get(s.pool, t0.dtype(), plan.shape.num_elements());
        break;
      }
      case CollectiveKind::reduce_scatter:
      case CollectiveKind::broadcast: {
        const Tensor& t0 = s.slots[0].tensors[0];
        plan.shape = t0.shape();
        plan.buffer = internal::BufferPool::get(s.pool, t0.dtype(), t0.num_elements());
        break;
      }
      case CollectiveKind::barrier: break;
    }
  } catch (const Error& e) {
    plan.error_code = e.code();
    plan.error = e.what();
  } catch (const std::bad_alloc&) {
    plan.error_code = ErrorCode::RESOURCE_EXHAUSTED;
    plan.error = str_cat(kWho, ": out of memory allocating the output of call #", call);
  }
}

// This rank's share of the work of the current plan.
void do_part(const internal::LocalState& s, CollectiveKind kind, ReduceOp op, int rank, int root) {
  const Plan& plan = s.plan;
  const int n = s.size;
  switch (kind) {
    case CollectiveKind::all_reduce: {
      std::vector<const void*> ins(n);
      for (const Plan::Group& g : plan.groups) {
        const Range mine = slice_of(g.total, n, rank, g.dtype);
        if (mine.begin >= mine.end) continue;
        const size_t esize = dtype_size(g.dtype);
        auto* out = reinterpret_cast<std::byte*>(g.buffer->data());
        for (int t : g.tensors) {
          const int64_t off = plan.offset_of[t];
          const int64_t len = s.slots[0].tensors[t].num_elements();
          const int64_t b = std::max(mine.begin, off);
          const int64_t e = std::min(mine.end, off + len);
          if (b >= e) continue;
          for (int r = 0; r < n; ++r) {
            ins[r] = static_cast<const std::byte*>(plan.inputs[t][r]) + (b - off) * esize;
          }
          internal::reduce_n(g.dtype, op, out + b * esize, ins, e - b, n);
        }
      }
      return;
    }
    case CollectiveKind::all_gather: {
      const Tensor& in = s.slots[rank].tensors[0];
      if (in.size_bytes() > 0) {
        std::memcpy(reinterpret_cast<std::byte*>(plan.buffer->data()) +
                        plan.rank_offset[rank] * dtype_size(in.dtype()),
                    in.raw_data(), in.size_bytes());
      }
      return;
    }
    case CollectiveKind::reduce_scatter: {
      const DType d = plan.buffer->dtype();
      const int64_t block = plan.shape.num_elements() / n;
      const size_t esize = dtype_size(d);
      std::vector<const void*> ins(n);
      for (int r = 0; r < n; ++r) {
        ins[r] = static_cast<const std::byte*>(plan.inputs[0][r]) + rank * block * esize;
      }
      internal::reduce_n(d, op,
                         reinterpret_cast<std::byte*>(plan.buffer->data()) + rank * block * esize,
                         ins, block, n);
      return;
    }
    case CollectiveKind::broadcast: {
      const DType d = plan.buffer->dtype();
      const Range mine = slice_of(plan.shape.num_elements(), n, rank, d);
      if (mine.begin >= mine.end) return;
      const size_t esize = dtype_size(d);
      std::memcpy(reinterpret_cast<std::byte*>(plan.buffer->data()) + mine.begin * esize,
                  static_cast<const std::byte*>(plan.inputs[0][root]) + mine.begin * esize,
                  (mine.end - mine.begin) * esize);
      return;
    }
    case CollectiveKind::barrier: return;
  }
}

}  // namespace

LocalCollectives::LocalCollectives(int size, CollectiveOptions options) {
  STRATA_CHECK_ARG(size >= 1, kWho, ": expected size >= 1, got ", size);
  STRATA_CHECK_ARG(options.timeout.count() > 0, kWho,
                   ": expected CollectiveOptions.timeout > 0, got ", options.timeout.count(), "ms");
  state_ = std::make_unique<internal::LocalState>(size, options);
}

LocalCollectives::~LocalCollectives() = default;

int LocalCollectives::size() const { return state_->size; }

namespace {

// Runs one collective for `rank` and returns the plan's outputs through `finish`
// (called after the last barrier; it may read the plan).
template <typename Finish>
auto run_call(internal::LocalState& s, int rank, CallSignature sig, std::vector<Tensor> tensors,
              Finish&& finish) {
  check_rank(rank, s.size);
  const Clock::time_point deadline = Clock::now() + s.options.timeout;
  const CollectiveKind kind = sig.kind;
  const ReduceOp op = sig.op;
  const int root = sig.root;
  const char* what = internal::kind_name(kind);
  CallScope scope(s, rank);
  MutexLock lock(s.mu);
  if (s.failed.load(std::memory_order_relaxed)) s.throw_failure();
  const uint64_t call = s.calls + 1;
  s.slots[rank] = Request{std::move(sig), std::move(tensors)};
  // Each barrier: arrive under mu, then wait for the others without it (spinning
  // first: they usually come within microseconds).
  std::optional<uint64_t> mine = s.arrive(rank, [&] {
    s.mu.assert_held();  // arrive() runs the leader under mu
    ++s.calls;
    make_plan(s, call);
  });
  lock.unlock();
  if (mine && !s.spin_past(*mine)) {
    lock.lock();
    s.wait_past(*mine, rank, deadline, what, call, "that never arrived");
    lock.unlock();
  }
  if (s.plan.error_code != ErrorCode::OK) throw_error(s.plan.error_code, s.plan.error);
  if (kind != CollectiveKind::barrier) {
    do_part(s, kind, op, rank, root);
    lock.lock();
    mine = s.arrive(rank, [&] {
      // Every rank is done reading the inputs: release them now.
      for (Request& r : s.slots) r.tensors.clear();
    });
    lock.unlock();
    if (mine && !s.spin_past(*mine)) {
      lock.lock();
      s.wait_past(*mine, rank, deadline, what, call, "to finish their part");
      lock.unlock();
    }
  }
  return finish(s.plan);
}

}  // namespace

std::vector<Tensor> LocalCollectives::all_reduce(int rank, const std::vector<Tensor>& tensors,
                                                 ReduceOp op) {
  auto sig = CallSignature::of(CollectiveKind::all_reduce, op, -1, tensors);
  return run_call(*state_, rank, std::move(sig), tensors, [&](const Plan& plan) {
    std::vector<Tensor> out;
    out.reserve(tensors.size());
    for (size_t t = 0; t < tensors.size(); ++t) {
      const Plan::Group& g = plan.groups[plan.group_of[t]];
      out.push_back(Tensor::from_buffer(g.buffer, tensors[t].shape(), plan.offset_of[t],
                                        &tensors[t].placement()));
    }
    return out;
  });
}

Tensor LocalCollectives::all_gather(int rank, const Tensor& tensor) {
  auto sig = CallSignature::of(CollectiveKind::all_gather, ReduceOp::SUM, -1, {&tensor, 1});
  return run_call(*state_, rank, std::move(sig), {tensor}, [&](const Plan& plan) {
    return Tensor::from_buffer(plan.buffer, plan.shape, 0, &tensor.placement());
  });
}

Tensor LocalCollectives::reduce_scatter(int rank, const Tensor& tensor, ReduceOp op) {
  auto sig = CallSignature::of(CollectiveKind::reduce_scatter, op, -1, {&tensor, 1});
  return run_call(*state_, rank, std::move(sig), {tensor}, [&](const Plan& plan) {
    const int n = state_->size;
    const int64_t rows = plan.shape.dim(0) / n;
    const int64_t block = plan.shape.num_elements() / n;
    return Tensor::from_buffer(plan.buffer, plan.shape.with_dim(0, rows), rank * block,
                               &tensor.placement());
  });
}

Tensor LocalCollectives::broadcast(int rank, const Tensor& tensor, int root) {
  auto sig = CallSignature::of(CollectiveKind::broadcast, ReduceOp::SUM, root, {&tensor, 1});
  return run_call(*state_, rank, std::move(sig), {tensor}, [&](const Plan& plan) {
    return Tensor::from_buffer(plan.buffer, plan.shape, 0, &tensor.placement());
  });
}

void LocalCollectives::barrier(int rank) {
  auto sig = CallSignature::of(CollectiveKind::barrier, ReduceOp::SUM, -1, {});
  run_call(*state_, rank, std::move(sig), {}, [](const Plan&) { return 0; });
}

void LocalCollectives::abort(const std::string& reason) {
  MutexLock lock(state_->mu);
  state_->fail(ErrorCode::ABORTED, reason);
}

void LocalCollectives::reset() {
  internal::LocalState& s = *state_;
  MutexLock lock(s.mu);
  STRATA_CHECK(FAILED_PRECONDITION, s.active == 0, kWho,
               "::reset: expected no rank inside a call, got ", s.active);
  s.failed.store(false, std::memory_order_relaxed);
  s.failure_code = ErrorCode::OK;
  s.failure.clear();
  s.arrived = 0;
  std::fill(s.here.begin(), s.here.end(), 0);
  for (Request& r : s.slots) r = Request{};
  s.plan = Plan{};
}

}  // namespace strata::collective
