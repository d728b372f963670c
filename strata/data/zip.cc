// zip, concatenate and enumerate: transformations that combine streams.
#include "strata/data/dataset.h"

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::input_iter;
using internal::IteratorImpl;
using internal::make_dataset;
using internal::make_fn_iterator;
using internal::specs_string;

namespace {

// The most specific spec compatible with both (dims that differ become -1);
// nullopt if dtypes or ranks differ.
std::optional<TensorSpec> most_specific_compatible(const TensorSpec& a, const TensorSpec& b) {
  if (a.dtype != b.dtype) return std::nullopt;
  if (!a.shape.has_known_rank() || !b.shape.has_known_rank())
    return TensorSpec(TensorShape::unknown_rank(), a.dtype);
  if (a.shape.rank() != b.shape.rank()) return std::nullopt;
  std::vector<int64_t> d(a.shape.rank());
  for (int i = 0; i < a.shape.rank(); ++i)
    d[i] = a.shape.dim(i) == b.shape.dim(i) ? a.shape.dim(i) : -1;
  return TensorSpec(TensorShape(d), a.dtype);
}

}  // namespace

Dataset Dataset::zip(const std::vector<Dataset>& datasets) {
  STRATA_CHECK_ARG(!datasets.empty(), "zip: expected at least one dataset, got none");
  std::vector<TensorSpec> spec;
  for (const Dataset& d : datasets) {
    auto s = d.element_spec();
    spec.insert(spec.end(), s.begin(), s.end());
  }
  return make_dataset(
      NodeKind::kZip, datasets, spec,
      [](const std::vector<Dataset>& inputs) {
        std::vector<std::shared_ptr<IteratorImpl>> its;
        its.reserve(inputs.size());
        for (const Dataset& d : inputs) its.push_back(input_iter(d));
        return make_fn_iterator(
            [its]() -> std::optional<Element> {
              Element out;
              for (const auto& it : its) {
                auto e = it->next();
                if (!e) return std::nullopt;
                STRATA_CHECK(
                    UNIMPLEMENTED, !e->has_names(),
                    "zip: datasets of named components (dict elements) cannot be zipped: "
                    "TensorFlow nests them in a tuple, and Strata's elements are flat; got "
                    "components named ",
                    e->names());
                out.insert(out.end(), e->begin(), e->end());
              }
              return out;
            },
            [its](internal::StateWriter& w, std::vector<Element>&) {
              for (size_t i = 0; i < its.size(); ++i) w.save_input(str_cat("input_", i), *its[i]);
            },
            [its](internal::StateReader& r) {
              for (size_t i = 0; i < its.size(); ++i)
                r.restore_input(str_cat("input_", i), *its[i]);
            });
      },
      [](const std::vector<Dataset>& in) { return internal::zip_cardinality(in); });
}

Dataset Dataset::concatenate(const Dataset& other) const {
  const auto a = element_spec(), b = other.element_spec();
  STRATA_CHECK_ARG(a.size() == b.size(),
                   "concatenate: expected datasets with compatible element specs, got ",
                   specs_string(a), " and ", specs_string(b));
  std::vector<TensorSpec> spec;
  for (size_t i = 0; i < a.size(); ++i) {
    auto s = most_specific_compatible(a[i], b[i]);
    STRATA_CHECK_ARG(s.has_value(),
                     "concatenate: expected datasets with compatible element specs, got ",
                     specs_string(a), " and ", specs_string(b));
    spec.push_back(*s);
  }
  return make_dataset(
      NodeKind::kConcatenate, {*this, other}, spec,
      [](const std::vector<Dataset>& inputs) {
        auto first = input_iter(inputs[0]);
        auto second = std::make_shared<std::shared_ptr<IteratorImpl>>();
        const Dataset& tail = inputs[1];
        return make_fn_iterator(
            [first, second, tail]() -> std::optional<Element> {
              if (!*second) {
                if (auto e = first->next()) return e;
                *second = input_iter(tail);
              }
              return (*second)->next();
            },
            [first, second](internal::StateWriter& w, std::vector<Element>&) {
              w.write_int("in_second", *second ? 1 : 0);
              if (*second) {
                w.save_input("input_1", **second);
              } else {
                w.save_input("input_0", *first);
              }
            },
            [first, second, tail](internal::StateReader& r) {
              second->reset();
              if (r.read_int("in_second") != 0) {
                *second = input_iter(tail);
                r.restore_input("input_1", **second);
              } else {
                r.restore_input("input_0", *first);
              }
            });
      },
      [](const std::vector<Dataset>& in) {
        return internal::concatenate_cardinality(in[0].cardinality(), in[1].cardinality());
      });
}

Dataset Dataset::enumerate(int64_t start) const {
  auto spec = element_spec();
  spec.insert(spec.begin(), TensorSpec(TensorShape{}, DType::int64));
  return make_dataset(
      NodeKind::kEnumerate, {*this}, spec,
      [start](const std::vector<Dataset>& inputs) {
        auto in = input_iter(inputs[0]);
        auto i = std::make_shared<int64_t>(start);
        return make_fn_iterator(
            [in, i]() -> std::optional<Element> {
              auto e = in->next();
              if (!e) return std::nullopt;
              STRATA_CHECK(
                  UNIMPLEMENTED, !e->has_names(),
                  "enumerate: a dataset of named components (dict elements) cannot be "
                  "enumerated: TensorFlow nests them in a tuple (index, dict), and Strata's "
                  "elements are flat; got components named ",
                  e->names());
              e->insert(e->begin(), constant((*i)++));
              return e;
            },
            [in, i](internal::StateWriter& w, std::vector<Element>&) {
              w.write_int("next", *i);
              w.save_input("input", *in);
            },
            [in, i](internal::StateReader& r) {
              *i = r.read_int("next");
              r.restore_input("input", *in);
            });
      },
      [](const std::vector<Dataset>& in) { return in[0].cardinality(); });
}

}  // namespace strata::data
