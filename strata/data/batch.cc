// batch, padded_batch and unbatch.
#include "strata/data/dataset.h"

#include "strata/base/errors.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"
#include "strata/data/internal/tensor_util.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::input_iter;
using internal::IteratorImpl;
using internal::make_dataset;
using internal::make_fn_iterator;
using internal::StateReader;
using internal::StateWriter;

namespace {
// The saver and restorer of a transformation whose only state is its input's.
internal::SaveFn save_input_only(const std::shared_ptr<IteratorImpl>& in) {
  return [in](StateWriter& w, std::vector<Element>&) { w.save_input("input", *in); };
}
internal::RestoreFn restore_input_only(const std::shared_ptr<IteratorImpl>& in) {
  return [in](StateReader& r) { r.restore_input("input", *in); };
}
}  // namespace

namespace {

class BatchNode : public DatasetNode {
 public:
  BatchNode(Dataset input, int64_t batch_size, bool drop_remainder)
      : DatasetNode(NodeKind::kBatch, {std::move(input)}),
        batch_size_(batch_size),
        drop_(drop_remainder) {}
  int64_t cardinality() const override {
    return internal::batch_cardinality(inputs()[0].cardinality(), batch_size_, drop_);
  }
  std::vector<TensorSpec> element_spec() const override {
    auto spec = inputs()[0].element_spec();
    for (auto& s : spec)
      s.shape = s.shape.has_known_rank() ? s.shape.inserted(0, drop_ ? batch_size_ : -1) : s.shape;
    return spec;
  }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    auto in = input_iter(inputs()[0]);
    const int64_t n = batch_size_;
    const bool drop = drop_;
    return make_fn_iterator(
        [in, n, drop]() -> std::optional<Element> {
          std::vector<Element> rows;
          rows.reserve(static_cast<size_t>(n));
          while (static_cast<int64_t>(rows.size()) < n) {
            auto e = in->next();
            if (!e) break;
            rows.push_back(std::move(*e));
          }
          if (rows.empty() || (drop && static_cast<int64_t>(rows.size()) < n)) return std::nullopt;
          return internal::stack_elements(rows, "batch");
        },
        save_input_only(in), restore_input_only(in));
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<BatchNode>(inputs.at(0), batch_size_, drop_);
  }
  int64_t batch_size() const override { return batch_size_; }
  bool drop_remainder() const override { return drop_; }

 private:
  int64_t batch_size_;
  bool drop_;
};

class PaddedBatchNode : public DatasetNode {
 public:
  PaddedBatchNode(Dataset input, int64_t batch_size, PaddedBatchOptions o)
      : DatasetNode(NodeKind::kPaddedBatch, {std::move(input)}),
        batch_size_(batch_size),
        o_(std::move(o)) {}
  int64_t cardinality() const override {
    return internal::batch_cardinality(inputs()[0].cardinality(), batch_size_, o_.drop_remainder);
  }
  std::vector<TensorSpec> element_spec() const override {
    auto spec = inputs()[0].element_spec();
    for (size_t i = 0; i < spec.size(); ++i) {
      TensorShape s = o_.padded_shapes.empty() ? spec[i].shape : o_.padded_shapes[i];
      if (o_.padded_shapes.empty() && s.has_known_rank())
        s = TensorShape(std::vector<int64_t>(s.rank(), -1));
      spec[i].shape = s.inserted(0, o_.drop_remainder ? batch_size_ : -1);
    }
    return spec;
  }
  std::unique_ptr<IteratorImpl> make_iterator() const override {
    auto in = input_iter(inputs()[0]);
    const int64_t n = batch_size_;
    auto o = o_;
    return make_fn_iterator(
        [in, n, o]() -> std::optional<Element> {
          std::vector<Element> rows;
          while (static_cast<int64_t>(rows.size()) < n) {
            auto e = in->next();
            if (!e) break;
            rows.push_back(std::move(*e));
          }
          if (rows.empty() || (o.drop_remainder && static_cast<int64_t>(rows.size()) < n))
            return std::nullopt;
          return internal::pad_and_stack(rows, o.padded_shapes, o.padding_values);
        },
        save_input_only(in), restore_input_only(in));
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<PaddedBatchNode>(inputs.at(0), batch_size_, o_);
  }
  int64_t batch_size() const override { return batch_size_; }
  bool drop_remainder() const override { return o_.drop_remainder; }

 private:
  int64_t batch_size_;
  PaddedBatchOptions o_;
};

}  // namespace

Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  STRATA_CHECK_ARG(batch_size > 0, "batch: expected batch_size > 0, got ", batch_size);
  return Dataset(std::make_shared<BatchNode>(*this, batch_size, drop_remainder));
}

Dataset Dataset::padded_batch(int64_t batch_size, PaddedBatchOptions o) const {
  STRATA_CHECK_ARG(batch_size > 0, "padded_batch: expected batch_size > 0, got ", batch_size);
  const auto spec = element_spec();
  STRATA_CHECK_ARG(o.padded_shapes.empty() || o.padded_shapes.size() == spec.size(),
                   "padded_batch: expected ", spec.size(), " padded_shapes, got ",
                   o.padded_shapes.size());
  STRATA_CHECK_ARG(o.padding_values.empty() || o.padding_values.size() == spec.size(),
                   "padded_batch: expected ", spec.size(), " padding_values, got ",
                   o.padding_values.size());
  for (size_t i = 0; i < o.padded_shapes.size(); ++i)
    STRATA_CHECK_ARG(o.padded_shapes[i].rank() == spec[i].shape.rank(),
                     "padded_batch: expected padded shape ", i, " of rank ", spec[i].shape.rank(),
                     ", got ", o.padded_shapes[i]);
  for (size_t i = 0; i < o.padding_values.size(); ++i)
    STRATA_CHECK_ARG(
        o.padding_values[i].rank() == 0 && o.padding_values[i].dtype() == spec[i].dtype,
        "padded_batch: expected padding value ", i, " to be a ", spec[i].dtype,
        " scalar, got shape ", o.padding_values[i].shape(), " dtype ", o.padding_values[i].dtype());
  return Dataset(std::make_shared<PaddedBatchNode>(*this, batch_size, std::move(o)));
}

Dataset Dataset::unbatch() const {
  auto spec = element_spec();
  for (size_t i = 0; i < spec.size(); ++i)
    STRATA_CHECK_ARG(!spec[i].shape.has_known_rank() || spec[i].shape.rank() >= 1,
                     "unbatch: expected every component to have rank >= 1, got component ", i,
                     " with shape ", spec[i].shape);
  for (auto& s : spec) s.shape = s.shape.has_known_rank() ? s.shape.removed(0) : s.shape;
  return make_dataset(NodeKind::kUnbatch, {*this}, spec, [](const std::vector<Dataset>& inputs) {
    auto in = input_iter(inputs[0]);
    auto cur = std::make_shared<std::optional<Element>>();
    auto pos = std::make_shared<int64_t>(0);
    return make_fn_iterator(
        [in, cur, pos]() -> std::optional<Element> {
          while (!*cur || *pos == (**cur)[0].shape().dim(0)) {
            *cur = in->next();
            *pos = 0;
            if (!*cur) return std::nullopt;
            internal::check_batched(**cur, "unbatch");
          }
          Element e;
          for (const Tensor& t : **cur)
            e.push_back(t.slice_rows(*pos, *pos + 1).reshaped(t.shape().removed(0)));
          ++*pos;
          e.with_names_of(**cur);
          return e;
        },
        [in, cur, pos](StateWriter& w, std::vector<Element>&) {
          std::vector<Element> current;
          if (*cur) current.push_back(**cur);
          w.write_elements("current", current);
          w.write_int("row", *pos);
          w.save_input("input", *in);
        },
        [in, cur, pos](StateReader& r) {
          std::vector<Element> current = r.read_elements("current");
          *cur = current.empty() ? std::nullopt : std::optional<Element>(std::move(current[0]));
          *pos = r.read_int("row");
          r.restore_input("input", *in);
        });
  });
}

}  // namespace strata::data
