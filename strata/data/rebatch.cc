// rebatch (per-replica batch sizes) and the legacy even split.
#include "strata/data/dataset.h"

#include <algorithm>
#include <deque>

#include "strata/base/errors.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"
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
  // Saves the rows not taken yet, preceded by `pieces` (rows taken but handed
  // back, oldest first), as one element, then the input.
  void save(internal::StateWriter& w, const std::vector<Element>& pieces) {
    std::vector<Element> parts;
    for (const Element& p : pieces)
      if (!p.empty() && p[0].rank() >= 1 && p[0].shape().dim(0) > 0) parts.push_back(p);
    if (cur_ && pos_ < rows_) {
      Element rest;
      for (const Tensor& t : *cur_) rest.push_back(t.slice_rows(pos_, rows_));
      rest.with_names_of(*cur_);
      parts.push_back(std::move(rest));
    }
    std::vector<Element> rows;
    if (!parts.empty())
      rows.push_back(parts.size() == 1 ? parts[0] : internal::concat_elements(parts));
    w.write_elements("rows", rows);
    w.save_input("input", *in_);
  }
  void restore(internal::StateReader& r) {
    std::vector<Element> rows = r.read_elements("rows");
    cur_.reset();
    pos_ = rows_ = 0;
    if (!rows.empty()) {
      internal::check_batched(rows[0], "rebatch");
      rows_ = rows[0][0].shape().dim(0);
      cur_ = std::move(rows[0]);
    }
    r.restore_input("input", *in_);
  }
  // No rows held: the input's state is at this prefix (saved without a rebatch).
  void restore_without(internal::StateReader& r) {
    cur_.reset();
    pos_ = rows_ = 0;
    r.restore_here(*in_);
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
    return make_fn_iterator(
        [rows, k, sizes, drop, spec]() -> std::optional<Element> {
          const int64_t want = sizes[(*k)++ % sizes.size()];
          if (want == 0) return rows->empty_rows(spec);
          auto e = rows->take_rows(want);
          if (e && drop && (*e)[0].shape().dim(0) < want) return std::nullopt;
          return e;
        },
        // The state is the row stream, so that it restores under other batch
        // sizes (another replica count): the pieces handed back become rows
        // again, and the position in the cycle of sizes is saved with them.
        [rows, k, sizes](internal::StateWriter& w, std::vector<Element>& pushed_back) {
          const size_t back = std::min(pushed_back.size(), *k);
          rows->save(w, pushed_back);
          pushed_back.clear();
          w.write("sizes", constant(sizes));
          w.write_int("cycle", static_cast<int64_t>((*k - back) % sizes.size()));
        },
        [rows, k, sizes](internal::StateReader& r) {
          const std::vector<int64_t> saved = r.read("sizes").to_vector<int64_t>();
          const int64_t cycle = r.read_int("cycle");
          STRATA_CHECK(FAILED_PRECONDITION, saved == sizes || cycle == 0,
                       "restoring an iterator: the rebatch at ", r.where(), " was saved after ",
                       cycle, " of its ", saved.size(), " batch sizes ", saved,
                       ", in the middle of a global batch, so it cannot continue with the sizes ",
                       sizes, " (save between steps)");
          *k = saved == sizes ? static_cast<size_t>(cycle) : 0;
          rows->restore(r);
        },
        // Saved under one replica (no rebatch): the next global batch starts
        // the cycle of sizes.
        [rows, k](internal::StateReader& r) {
          *k = 0;
          rows->restore_without(r);
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
    // `queued`: whole input batches taken back at a save (restored before the
    // input); `cur`: the batch being split, `piece` pieces of it returned.
    struct State {
      std::shared_ptr<IteratorImpl> in;
      std::deque<Element> queued;
      std::optional<Element> cur;
      int64_t piece = 0;
    };
    auto st = std::make_shared<State>();
    st->in = input_iter(inputs()[0]);
    const int64_t n = n_;
    return make_fn_iterator(
        [st, n]() -> std::optional<Element> {
          if (!st->cur || st->piece == n) {
            st->piece = 0;
            if (!st->queued.empty()) {
              st->cur = std::move(st->queued.front());
              st->queued.pop_front();
            } else {
              st->cur = st->in->next();
            }
            if (!st->cur) return std::nullopt;
            internal::check_batched(*st->cur, "rebatch");
          }
          const Element& cur = *st->cur;
          const int64_t b = cur[0].shape().dim(0);
          const int64_t c = (b + n - 1) / n;
          const int64_t lo = std::min(b, st->piece * c), hi = std::min(b, (st->piece + 1) * c);
          ++st->piece;
          Element out;
          for (const Tensor& t : cur) out.push_back(t.slice_rows(lo, hi));
          out.with_names_of(cur);
          return out;
        },
        // Pieces handed back (a prefetch above) are taken back: those of the
        // current batch lower its piece count, and earlier ones, n to a batch,
        // become whole batches again, so that between steps the state holds
        // whole batches and restores under another piece count.
        [st, n](internal::StateWriter& w, std::vector<Element>& pushed_back) {
          std::vector<Element> queued;
          std::optional<Element> cur = st->cur;
          int64_t piece = st->piece;
          const int64_t m = static_cast<int64_t>(pushed_back.size());
          if (cur && m <= piece) {
            piece -= m;
            pushed_back.clear();
          } else if (cur && (m - piece) % n == 0) {
            for (int64_t i = 0; i < m - piece; i += n) {
              std::vector<Element> parts(pushed_back.begin() + i, pushed_back.begin() + i + n);
              queued.push_back(internal::concat_elements(parts));
            }
            queued.push_back(std::move(*cur));
            cur.reset();
            piece = 0;
            pushed_back.clear();
          }
          queued.insert(queued.end(), st->queued.begin(), st->queued.end());
          std::vector<Element> current;
          if (cur) current.push_back(std::move(*cur));
          w.write_elements("batches", queued);
          w.write_elements("current", current);
          w.write_int("piece", piece);
          w.write_int("num_replicas", n);
          w.save_input("input", *st->in);
        },
        [st, n](internal::StateReader& r) {
          const int64_t saved_n = r.read_int("num_replicas");
          std::vector<Element> current = r.read_elements("current");
          const int64_t saved_piece = r.read_int("piece");
          STRATA_CHECK(
              FAILED_PRECONDITION,
              saved_n == n || ((current.empty() || saved_piece == 0 || saved_piece == saved_n) &&
                               r.read_int("pending/n") == 0),
              "restoring an iterator: the rebatch at ", r.where(), " into ", saved_n,
              " pieces per batch (a dataset without a static batch size) held pieces "
              "not yet consumed, so it cannot continue with ",
              n, " pieces per batch");
          std::vector<Element> queued =
              r.contains("batches/n") ? r.read_elements("batches") : std::vector<Element>{};
          st->queued.assign(std::make_move_iterator(queued.begin()),
                            std::make_move_iterator(queued.end()));
          st->cur = current.empty() ? std::nullopt : std::optional<Element>(std::move(current[0]));
          st->piece = saved_n == n || saved_piece == 0 ? saved_piece : n;
          r.restore_input("input", *st->in);
        },
        [st, n](internal::StateReader& r) {
          st->queued.clear();
          st->cur.reset();
          st->piece = n;
          r.restore_here(*st->in);
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
