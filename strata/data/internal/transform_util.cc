#include "strata/data/internal/transform_util.h"

#include <thread>

#include "strata/data/internal/node.h"

namespace strata::data::internal {

namespace {

class SimpleNode : public DatasetNode {
 public:
  SimpleNode(NodeKind kind, std::vector<Dataset> inputs, std::vector<TensorSpec> spec,
             IterFactory f)
      : DatasetNode(kind, std::move(inputs)), spec_(std::move(spec)), factory_(std::move(f)) {}
  std::vector<TensorSpec> element_spec() const override { return spec_; }
  std::unique_ptr<IteratorImpl> make_iterator() const override { return factory_(inputs()); }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset> inputs) const override {
    return std::make_shared<SimpleNode>(kind(), std::move(inputs), spec_, factory_);
  }

 private:
  std::vector<TensorSpec> spec_;
  IterFactory factory_;
};

// An iterator whose next() is a lambda over captured state.
class FnIterator : public IteratorImpl {
 public:
  explicit FnIterator(std::function<std::optional<Element>()> fn) : fn_(std::move(fn)) {}
  std::optional<Element> next() override { return fn_(); }

 private:
  std::function<std::optional<Element>()> fn_;
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

std::unique_ptr<IteratorImpl> make_fn_iterator(std::function<std::optional<Element>()> fn) {
  return std::make_unique<FnIterator>(std::move(fn));
}

std::shared_ptr<IteratorImpl> input_iter(const Dataset& d) {
  return std::shared_ptr<IteratorImpl>(d.node()->make_iterator());
}

Dataset make_dataset(NodeKind kind, std::vector<Dataset> inputs, std::vector<TensorSpec> spec,
                     IterFactory f) {
  return Dataset(
      std::make_shared<SimpleNode>(kind, std::move(inputs), std::move(spec), std::move(f)));
}

}  // namespace strata::data::internal
