#pragma once
// strata::zip: Python's zip over two sequences, as a vector of pairs.
//
//   opt->apply_gradients(strata::zip(grads, model->trainable_variables()));
//
// The result has the length of the shorter input, as Python's zip.

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace strata {

template <typename A, typename B>
auto zip(const A& a, const B& b) {
  using First = std::decay_t<decltype(*std::begin(a))>;
  using Second = std::decay_t<decltype(*std::begin(b))>;
  std::vector<std::pair<First, Second>> out;
  if constexpr (requires { std::size(a) + std::size(b); }) {
    out.reserve(std::min<size_t>(std::size(a), std::size(b)));
  }
  auto ia = std::begin(a);
  auto ib = std::begin(b);
  for (; ia != std::end(a) && ib != std::end(b); ++ia, ++ib) out.emplace_back(*ia, *ib);
  return out;
}

}  // namespace strata
