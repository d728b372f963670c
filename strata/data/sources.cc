// In-memory sources: from_tensors, from_tensor_slices, range, from_generator.
#include "strata/data/dataset.h"

#include "strata/base/errors.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::make_dataset;
using internal::make_fn_iterator;
using internal::spec_of;
using internal::specs_string;

namespace {

// --- generator -------------------------------------------------------------------

void check_against_spec(const Element& e, const std::vector<TensorSpec>& spec, const char* who) {
  STRATA_CHECK_ARG(e.size() == spec.size(), who, ": expected an element of ", spec.size(),
                   " components matching ", specs_string(spec), ", got ", e.size(), " components");
  for (size_t i = 0; i < e.size(); ++i)
    STRATA_CHECK_ARG(spec[i].is_compatible_with(e[i]), who, ": expected component ", i,
                     " to match ", spec[i].to_string(), ", got shape ", e[i].shape(), " dtype ",
                     e[i].dtype());
}

}  // namespace

Dataset Dataset::from_tensors(const Element& components) {
  auto spec = spec_of(components);
  return make_dataset(
      NodeKind::kTensors, {}, spec,
      [components](const std::vector<Dataset>&) {
        auto done = std::make_shared<bool>(false);
        return make_fn_iterator(
            [components, done]() -> std::optional<Element> {
              if (*done) return std::nullopt;
              *done = true;
              return components;
            },
            [done](internal::StateWriter& w, std::vector<Element>&) {
              w.write_int("done", *done ? 1 : 0);
            },
            [done](internal::StateReader& r) { *done = r.read_int("done") != 0; }, {},
            [done] { *done = false; });
      },
      [](const std::vector<Dataset>&) { return int64_t{1}; });
}

Dataset Dataset::from_tensor_slices(Element components) {
  STRATA_CHECK_ARG(!components.empty(),
                   "from_tensor_slices: expected at least one tensor, got none");
  for (size_t i = 0; i < components.size(); ++i) {
    STRATA_CHECK_ARG(components[i].rank() >= 1, "from_tensor_slices: expected component ", i,
                     " to have rank >= 1, got shape ", components[i].shape());
    STRATA_CHECK_ARG(
        components[i].shape().dim(0) == components[0].shape().dim(0),
        "from_tensor_slices: expected all components to have the same leading dimension, got ",
        components[0].shape().dim(0), " (component 0, shape ", components[0].shape(), ") and ",
        components[i].shape().dim(0), " (component ", i, ", shape ", components[i].shape(), ")");
  }
  std::vector<TensorSpec> spec;
  for (const Tensor& t : components) spec.emplace_back(t.shape().removed(0), t.dtype());
  const int64_t n = components[0].shape().dim(0);
  std::vector<TensorShape> row_shapes;
  std::vector<int64_t> row_sizes;
  for (const Tensor& t : components) {
    row_shapes.push_back(t.shape().removed(0));
    row_sizes.push_back(row_shapes.back().num_elements());
  }
  return make_dataset(
      NodeKind::kTensorSlices, {}, spec,
      [components, n, row_shapes, row_sizes](const std::vector<Dataset>&) {
        auto i = std::make_shared<int64_t>(0);
        return make_fn_iterator(
            [components, n, i, row_shapes, row_sizes]() -> std::optional<Element> {
              if (*i == n) return std::nullopt;
              Element e;
              e.reserve(components.size());
              // One view per component straight onto the shared buffer (a single
              // handle allocation instead of slice + reshape).
              for (size_t c = 0; c < components.size(); ++c)
                e.push_back(Tensor::from_buffer(components[c].buffer(), row_shapes[c],
                                                components[c].offset() + *i * row_sizes[c],
                                                &components[c].placement()));
              ++*i;
              e.with_names_of(components);
              return e;
            },
            [i](internal::StateWriter& w, std::vector<Element>&) { w.write_int("index", *i); },
            [i, n](internal::StateReader& r) {
              const int64_t index = r.read_int("index");
              STRATA_CHECK_ARG(index >= 0 && index <= n, "restoring an iterator: expected a ",
                               "from_tensor_slices position in [0, ", n, "] at ", r.where(),
                               ", got ", index, " (the saved tensors had other sizes)");
              *i = index;
            },
            {}, [i] { *i = 0; });
      },
      [n](const std::vector<Dataset>&) { return n; });
}

Dataset Dataset::range(int64_t stop) { return range(0, stop, 1); }

Dataset Dataset::range(int64_t start, int64_t stop, int64_t step) {
  STRATA_CHECK_ARG(step != 0, "range: expected a non-zero step, got 0");
  return make_dataset(
      NodeKind::kRange, {}, {TensorSpec(TensorShape{}, DType::int64)},
      [start, stop, step](const std::vector<Dataset>&) {
        auto v = std::make_shared<int64_t>(start);
        return make_fn_iterator(
            [v, stop, step]() -> std::optional<Element> {
              if (step > 0 ? *v >= stop : *v <= stop) return std::nullopt;
              Element e{constant(*v)};
              *v += step;
              return e;
            },
            [v](internal::StateWriter& w, std::vector<Element>&) { w.write_int("next", *v); },
            [v](internal::StateReader& r) { *v = r.read_int("next"); });
      },
      [start, stop, step](const std::vector<Dataset>&) {
        return internal::range_cardinality(start, stop, step);
      });
}

Dataset Dataset::from_generator(const GeneratorFactory& factory,
                                const std::vector<TensorSpec>& output_signature) {
  STRATA_CHECK_ARG(factory != nullptr,
                   "from_generator: expected a generator factory, got an empty function");
  return make_dataset(
      NodeKind::kGenerator, {}, output_signature,
      [factory, output_signature](const std::vector<Dataset>&) {
        auto gen = std::make_shared<GeneratorFn>(factory());
        return make_fn_iterator(
            [gen, output_signature]() -> std::optional<Element> {
              auto e = (*gen)();
              if (e) check_against_spec(*e, output_signature, "from_generator");
              return e;
            },
            // TF: a generator's state lives in the program (a Python
            // generator), outside the pipeline: external state.
            [](internal::StateWriter& w, std::vector<Element>&) {
              w.external_state("GeneratorDataset (from_generator)",
                               "its position is held by the C++ generator, outside the pipeline");
            },
            // Not saved: a restored generator starts over (fresh from the factory).
            [](internal::StateReader&) {});
      });
}

}  // namespace strata::data
