#pragma once
// strata::zip: Python's zip over two sequences, as a vector of pairs.
//
//   opt->apply_gradients(strata::zip(grads, model->trainable_variables()));
//
// The result has the length of the shorter input, as Python's zip.

#include <algorithm>
#include <utility>
#include <vector>

namespace strata {

template <typename A, typename B>
auto zip(const A& a, const B& b) {
  using First = std::decay_t<decltype(*std::begin(a))>;
  using Second = std::decay_t<decltype(*std::begin(b))>;
  std::vector<std::pair<First, Second>> out;
  auto ia = std::begin(a);
  auto ib = std::begin(b);
  for (; ia != std::end(a) && ib != std::end(b); ++ia, ++ib) out.emplace_back(*ia, *ib);
  return out;
}

}  // namespace strata
