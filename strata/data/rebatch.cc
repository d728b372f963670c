// rebatch (per-replica batch sizes) and the legacy even split.
#include "strata/data/dataset.h"

#include <algorithm>

#include "strata/base/errors.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/tensor_util.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::input_iter;
using internal::IteratorImpl;
using internal::make_fn_iterator;

namespace {

// A flat stream of rows over an iterator of batches.
class RowStream {
 public:
  explicit RowStream(std::shared_ptr<IteratorImpl> in) : in_(std::move(in)) {}
  // Up to n rows as one element (fewer at the end; nullopt when no row is left).
  std::optional<Element> take_rows(int64_t n) {
    std::vector<Element> pieces;
    int64_t got = 0;
    while (got < n) {
      if (!cur_ || pos_ == rows_) {
        auto e = in_->next();
        if (!e) break;
        internal::check_batched(*e, "rebatch");
        cur_ = std::move(e);
        pos_ = 0;
        rows_ = (*cur_)[0].shape().dim(0);
        continue;
      }
      const int64_t k = std::min(n - got, rows_ - pos_);
      Element piece;
      for (const Tensor& t : *cur_) piece.push_back(t.slice_rows(pos_, pos_ + k));
      piece.with_names_of(*cur_);
      pos_ += k;
      got += k;
      pieces.push_back(std::move(piece));
    }
    if (pieces.empty()) return std::nullopt;
    if (pieces.size() == 1) return std::move(pieces[0]);
    return internal::concat_elements(pieces);
  }
  // Zero-row tensors shaped like the latest batch (or the spec, unknown dims 0).
  Element empty_rows(const std::vector<TensorSpec>& spec) const {
    Element r;
    for (size_t i = 0; i < spec.size(); ++i) {
      TensorShape s = cur_ ? (*cur_)[i].shape() : spec[i].shape;
      std::vector<int64_t> d = s.dims();
      for (auto& x : d) x = std::max<int64_t>(x, 0);
      d[0] = 0;
      r.push_back(Tensor::allocate(spec[i].dtype, TensorShape(d)));
    }
    if (cur_) r.with_names_of(*cur_);
    return r;
  }

 private:
  std::shared_ptr<IteratorImpl> in_;
  std::optional<Element> cur_;
  int64_t pos_ = 0;
  int64_t rows_ = 0;
};

class RebatchNode : public DatasetNode {
 public:
  RebatchNode(Dataset input, std::vector<int64_t> sizes, bool drop)
      : DatasetNode(NodeKind::kRebatch, {std::move(input)}),
        sizes_(std::move(sizes)),
        drop_(drop) {}
  std::vector<TensorSpec> element_spec() const override {
    auto spec = inputs()[0].element_spec();
    const bool all_equal =
        std::all_of(sizes_.begin(), sizes_.end(), [&](int64_t s) { return s == sizes_[0]; });
    for (auto& s : spec) s.shape = s.shape.with_dim(0, drop_ && all_equal ? sizes_[0] : -1);
    return spec;
  }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    auto rows = std::make_shared<RowStream>(input_iter(inputs()[0]));
    auto k = std::make_shared<size_t>(0);
    auto sizes = sizes_;
    const bool drop = drop_;
    auto spec = inputs()[0].element_spec();
    return make_fn_iterator([rows, k, sizes, drop, spec]() -> std::optional<Element> {
      const int64_t want = sizes[(*k)++ % sizes.size()];
      if (want == 0) return rows->empty_rows(spec);
      auto e = rows->take_rows(want);
      if (e && drop && (*e)[0].shape().dim(0) < want) return std::nullopt;
      return e;
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<RebatchNode>(inputs.at(0), sizes_, drop_);
  }
  std::vector<int64_t> rebatch_sizes() const override { return sizes_; }
  bool drop_remainder() const override { return drop_; }

 private:
  std::vector<int64_t> sizes_;
  bool drop_;
};

class LegacyRebatchNode : public DatasetNode {
 public:
  LegacyRebatchNode(Dataset input, int64_t n)
      : DatasetNode(NodeKind::kLegacyRebatch, {std::move(input)}), n_(n) {}
  // Every input batch gives n pieces (some possibly empty), as TF's RebatchDataset.
  int64_t cardinality() const override {
    const int64_t c = inputs()[0].cardinality();
    return c < 0 ? c : c * n_;
  }
  std::vector<TensorSpec> element_spec() const override {
    auto spec = inputs()[0].element_spec();
    for (auto& s : spec) {
      const int64_t b = s.shape.dim(0);
      s.shape = s.shape.with_dim(0, b >= 0 && b % n_ == 0 ? b / n_ : -1);
    }
    return spec;
  }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    auto in = input_iter(inputs()[0]);
    auto cur = std::make_shared<std::optional<Element>>();
    auto piece = std::make_shared<int64_t>(0);
    const int64_t n = n_;
    return make_fn_iterator([in, cur, piece, n]() -> std::optional<Element> {
      if (!*cur || *piece == n) {
        *cur = in->next();
        *piece = 0;
        if (!*cur) return std::nullopt;
        internal::check_batched(**cur, "rebatch");
      }
      const int64_t b = (**cur)[0].shape().dim(0);
      const int64_t c = (b + n - 1) / n;
      const int64_t lo = std::min(b, *piece * c), hi = std::min(b, (*piece + 1) * c);
      ++*piece;
      Element out;
      for (const Tensor& t : **cur) out.push_back(t.slice_rows(lo, hi));
      out.with_names_of(**cur);
      return out;
    });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<LegacyRebatchNode>(inputs.at(0), n_);
  }
  int64_t num_shards() const override { return n_; }

 private:
  int64_t n_;
};

}  // namespace

Dataset Dataset::rebatch(std::vector<int64_t> batch_sizes, bool drop_remainder) const {
  STRATA_CHECK_ARG(!batch_sizes.empty(), "rebatch: expected at least one batch size, got none");
  for (int64_t b : batch_sizes)
    STRATA_CHECK_ARG(b >= 0, "rebatch: expected batch sizes >= 0, got ", batch_sizes);
  internal::check_batched_spec(element_spec());
  return Dataset(std::make_shared<RebatchNode>(*this, std::move(batch_sizes), drop_remainder));
}

Dataset Dataset::rebatch_legacy(int64_t num_replicas) const {
  STRATA_CHECK_ARG(num_replicas >= 1, "rebatch_legacy: expected num_replicas >= 1, got ",
                   num_replicas);
  internal::check_batched_spec(element_spec());
  return Dataset(std::make_shared<LegacyRebatchNode>(*this, num_replicas));
}

}  // namespace strata::data
