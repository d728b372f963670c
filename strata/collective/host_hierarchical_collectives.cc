#include "strata/collective/host_hierarchical_collectives.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "strata/base/errors.h"
#include "strata/collective/internal/adopted_lock.h"
#include "strata/collective/internal/reduce.h"
#include "strata/collective/shm_collectives.h"

namespace strata::collective {

namespace {

constexpr const char* kWho = "HostHierarchicalCollectives";

// How long past the leaders' timeout a leader counts as away on its
// cross-host step: Gloo's failure reports take a few seconds more (the wait
// for the peers' records and a bounded read of their progress).
constexpr std::chrono::seconds kReportMargin(10);

// t / divisor as a new tensor (t itself is immutable).
Tensor divided(const Tensor& t, int64_t divisor) {
  Tensor out = Tensor::allocate(t.dtype(), t.shape(), &t.placement());
  if (t.size_bytes() > 0) std::memcpy(out.mutable_raw_data(), t.raw_data(), t.size_bytes());
  internal::divide_in_place(t.dtype(), out.mutable_raw_data(), t.num_elements(), divisor);
  return out;
}

// The tensors of a list packed into one flat tensor per dtype (in order of
// first appearance), and back.
struct ListPacking {
  std::vector<DType> dtypes;
  std::vector<int64_t> totals;
  std::vector<std::pair<size_t, int64_t>> where;  // per tensor: pack, element offset
};

ListPacking plan(const std::vector<Tensor>& tensors) {
  ListPacking p;
  for (const Tensor& t : tensors) {
    auto it = std::find(p.dtypes.begin(), p.dtypes.end(), t.dtype());
    if (it == p.dtypes.end()) {
      p.dtypes.push_back(t.dtype());
      p.totals.push_back(0);
      it = p.dtypes.end() - 1;
    }
    const size_t k = static_cast<size_t>(it - p.dtypes.begin());
    p.where.emplace_back(k, p.totals[k]);
    p.totals[k] += t.num_elements();
  }
  return p;
}

}  // namespace

HostHierarchicalCollectives::HostHierarchicalCollectives(int rank, std::vector<int> host_of_rank,
                                                         std::shared_ptr<ShmCollectives> intra,
                                                         std::shared_ptr<Collectives> leaders,
                                                         std::chrono::milliseconds leader_timeout)
    : rank_(rank),
      host_of_rank_(std::move(host_of_rank)),
      intra_(std::move(intra)),
      leaders_(std::move(leaders)),
      leader_timeout_(leader_timeout) {
  const int n = static_cast<int>(host_of_rank_.size());
  STRATA_CHECK_ARG(rank_ >= 0 && rank_ < n, kWho, ": expected a rank in [0, ", n, "), got ", rank_);
  for (int r = 0; r < n; ++r) {
    const int h = host_of_rank_[r];
    STRATA_CHECK_ARG(h >= 0 && h <= num_hosts_, kWho,
                     ": expected hosts numbered by their lowest rank, but rank ", r, " is on host ",
                     h, " after ", num_hosts_, " hosts");
    if (h == num_hosts_) ++num_hosts_;
  }
  for (int h = 0; h < num_hosts_; ++h) {
    for (int r = 0; r < n; ++r) {
      if (host_of_rank_[r] == h) host_order_.push_back(r);
    }
  }
  host_ = host_of_rank_[rank_];
  const int members =
      static_cast<int>(std::count(host_of_rank_.begin(), host_of_rank_.end(), host_));
  for (int r = 0; r < rank_; ++r) intra_rank_ += host_of_rank_[r] == host_ ? 1 : 0;
  STRATA_CHECK_ARG(
      members == 1 ? intra_ == nullptr : intra_ != nullptr && intra_->size() == members, kWho,
      ": rank ", rank_, " shares its host with ", members - 1, " other ranks: expected ",
      members == 1 ? std::string("no host group") : str_cat("a host group of ", members, " ranks"),
      ", got ", intra_ ? str_cat(intra_->size(), " ranks") : std::string("none"));
  STRATA_CHECK_ARG(intra_ == nullptr || intra_->rank() == intra_rank_, kWho, ": rank ", rank_,
                   " is rank ", intra_rank_, " of its host, but its host group says rank ",
                   intra_ ? intra_->rank() : -1);
  const bool leads = intra_rank_ == 0 && num_hosts_ > 1;
  STRATA_CHECK_ARG(
      leads ? leaders_ != nullptr && leaders_->size() == num_hosts_ : leaders_ == nullptr, kWho,
      ": rank ", rank_, (leads ? " leads host " : " does not lead host "), host_, ": expected ",
      leads ? str_cat("a leaders' group of ", num_hosts_, " ranks")
            : std::string("no leaders' group"),
      ", got ", leaders_ ? str_cat(leaders_->size(), " ranks") : std::string("none"));
}

void HostHierarchicalCollectives::check_rank(int rank) const {
  STRATA_CHECK_ARG(rank == rank_, kWho, ": this object is rank ", rank_, ", called as rank ", rank);
}

template <typename Fn>
auto HostHierarchicalCollectives::across_hosts(Fn&& fn) {
  if (intra_ == nullptr) return fn();
  intra_->set_away_until(std::chrono::steady_clock::now() + leader_timeout_ + kReportMargin);
  try {
    auto out = fn();
    intra_->set_away_until({});
    return out;
  } catch (const Error& e) {
    intra_->fail(e);
    intra_->set_away_until({});
    throw;
  }
}

template <typename Fn>
auto HostHierarchicalCollectives::within_host(Fn&& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    if (leaders_ != nullptr) {
      leaders_->abort(str_cat(kWho, ": host ", host_, " (led by rank ", rank_,
                              ") failed within the host: ", e.what()));
    }
    throw;
  }
}

Tensor HostHierarchicalCollectives::from_leader(const Tensor& t) {
  return within_host([&] { return intra_->broadcast(intra_rank_, t, 0); });
}

Tensor HostHierarchicalCollectives::gather_in_host_order(const Tensor& t, int64_t rows) {
  Tensor g = t;
  if (intra_ != nullptr) g = within_host([&] { return intra_->all_gather(intra_rank_, t); });
  if (leaders_ != nullptr) g = across_hosts([&] { return leaders_->all_gather(host_, g); });
  if (intra_ != nullptr) {
    // The others state the shape and dtype of the leader's result.
    const bool shaped = t.defined() && t.rank() >= 1;
    g = from_leader(leader() || !shaped
                        ? g
                        : Tensor::allocate(t.dtype(), t.shape().with_dim(0, rows), &t.placement()));
  }
  return g;
}

std::vector<Tensor> HostHierarchicalCollectives::all_reduce(int rank,
                                                            const std::vector<Tensor>& tensors,
                                                            ReduceOp op) {
  check_rank(rank);
  MutexLock lock(call_mu_);
  const ReduceOp inner = op == ReduceOp::MEAN ? ReduceOp::SUM : op;
  std::vector<Tensor> partial = tensors;
  if (intra_ != nullptr) {
    partial = within_host([&] { return intra_->all_reduce(intra_rank_, tensors, inner); });
  }
  if (leaders_ != nullptr) {
    partial = across_hosts([&] { return leaders_->all_reduce(host_, partial, inner); });
  }
  if (intra_ != nullptr && !partial.empty()) {
    // One broadcast per dtype of the list, of the leader's results packed flat.
    const ListPacking p = plan(partial);
    std::vector<Tensor> packs;
    for (size_t k = 0; k < p.dtypes.size(); ++k) {
      Tensor flat =
          Tensor::allocate(p.dtypes[k], TensorShape({p.totals[k]}), &partial.front().placement());
      if (leader()) {
        const size_t esize = dtype_size(p.dtypes[k]);
        for (size_t t = 0; t < partial.size(); ++t) {
          if (p.where[t].first != k || partial[t].size_bytes() == 0) continue;
          std::memcpy(static_cast<std::byte*>(flat.mutable_raw_data()) + p.where[t].second * esize,
                      partial[t].raw_data(), partial[t].size_bytes());
        }
      }
      packs.push_back(from_leader(flat));
    }
    for (size_t t = 0; t < partial.size(); ++t) {
      const Tensor& pack = packs[p.where[t].first];
      partial[t] = Tensor::from_buffer(pack.buffer(), partial[t].shape(), p.where[t].second,
                                       &tensors[t].placement());
    }
  }
  if (op == ReduceOp::MEAN) {
    for (Tensor& t : partial) t = divided(t, size());
  }
  return partial;
}

Tensor HostHierarchicalCollectives::all_gather(int rank, const Tensor& tensor) {
  check_rank(rank);
  MutexLock lock(call_mu_);
  // Every rank's dimension 0 first: the leaders' result has a shape the other
  // ranks of a host must state, and the blocks go back in rank order.
  const int64_t mine = tensor.defined() && tensor.rank() >= 1 ? tensor.shape().dim(0) : 0;
  const std::vector<int64_t> dims =
      gather_in_host_order(constant(std::vector<int64_t>{mine}), size()).to_vector<int64_t>();
  const int64_t rows = std::accumulate(dims.begin(), dims.end(), int64_t{0});
  Tensor g = gather_in_host_order(tensor, rows);
  if (std::is_sorted(host_order_.begin(), host_order_.end())) return g;
  // Back to rank order.
  const size_t row_bytes = rows == 0 ? 0 : g.size_bytes() / static_cast<size_t>(rows);
  std::vector<size_t> offset(size());  // byte offset of each rank's block in g
  size_t at = 0;
  for (size_t i = 0; i < host_order_.size(); ++i) {
    offset[host_order_[i]] = at;
    at += static_cast<size_t>(dims[i]) * row_bytes;
  }
  std::vector<int64_t> rows_of(size());
  for (size_t i = 0; i < host_order_.size(); ++i) rows_of[host_order_[i]] = dims[i];
  Tensor out = Tensor::allocate(g.dtype(), g.shape(), &tensor.placement());
  auto* dst = static_cast<std::byte*>(out.mutable_raw_data());
  const auto* src = static_cast<const std::byte*>(g.raw_data());
  for (int r = 0; r < size(); ++r) {
    const size_t n = static_cast<size_t>(rows_of[r]) * row_bytes;
    if (n > 0) std::memcpy(dst, src + offset[r], n);
    dst += n;
  }
  return out;
}

Tensor HostHierarchicalCollectives::reduce_scatter(int rank, const Tensor& tensor, ReduceOp op) {
  return internal::block_of_rank(all_reduce(rank, tensor, op), rank, size(), kWho);
}

Tensor HostHierarchicalCollectives::broadcast(int rank, const Tensor& tensor, int root) {
  check_rank(rank);
  STRATA_CHECK_ARG(root >= 0 && root < size(), kWho, ": broadcast: expected root in [0, ", size(),
                   "), got ", root);
  MutexLock lock(call_mu_);
  const int root_host = host_of_rank_[root];
  Tensor x = tensor;
  if (host_ == root_host) {
    int root_intra = 0;
    for (int r = 0; r < root; ++r) root_intra += host_of_rank_[r] == root_host ? 1 : 0;
    if (intra_ != nullptr) {
      x = within_host([&] { return intra_->broadcast(intra_rank_, tensor, root_intra); });
    }
    if (leaders_ != nullptr) across_hosts([&] { return leaders_->broadcast(host_, x, root_host); });
    // The root's host learns whether its leader's step succeeded.
    if (intra_ != nullptr) within_host([&] { intra_->barrier(intra_rank_); });
    return x;
  }
  if (leaders_ != nullptr) {
    x = across_hosts([&] { return leaders_->broadcast(host_, tensor, root_host); });
  }
  if (intra_ != nullptr) x = from_leader(x);
  return x;
}

void HostHierarchicalCollectives::barrier(int rank) {
  check_rank(rank);
  MutexLock lock(call_mu_);
  if (intra_ != nullptr) within_host([&] { intra_->barrier(intra_rank_); });
  if (leaders_ != nullptr) {
    across_hosts([&] {
      leaders_->barrier(host_);
      return 0;
    });
  }
  if (intra_ != nullptr) within_host([&] { intra_->barrier(intra_rank_); });
}

void HostHierarchicalCollectives::abort(const std::string& reason) {
  if (intra_ != nullptr) intra_->abort(reason);
  if (leaders_ != nullptr) leaders_->abort(reason);
}

void HostHierarchicalCollectives::reset() {
  STRATA_CHECK(FAILED_PRECONDITION, call_mu_.try_lock(), kWho,
               "::reset: expected no call in progress on rank ", rank_);
  const internal::AdoptedLock lock(call_mu_);
  if (intra_ != nullptr) intra_->reset();
  if (leaders_ != nullptr) leaders_->reset();
}

}  // namespace strata::collective
