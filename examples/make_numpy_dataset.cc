// The seed page's experimental_make_numpy_dataset example: a dataset sliced from
// an in-memory array, batched and distributed.
//
//   build/examples/make_numpy_dataset
#include <iostream>

#include "example_check.h"
#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;
using example::expect;

int main() {
  sd::MirroredStrategy strategy;
  tf::Tensor numpy_input = tf::ones({10});
  tf::data::Dataset dataset = strategy.experimental_make_numpy_dataset(numpy_input);
  for (const tf::TensorSpec& spec : dataset.element_spec())
    std::cout << "dataset element: " << spec << "\n";
  dataset = dataset.batch(2);
  auto dist_dataset = strategy.experimental_distribute_dataset(dataset);
  float total = 0.f;
  for (const auto& x : dist_dataset) {
    auto sums = strategy.run([](const tf::data::Element& e) { return tf::reduce_sum(e[0]); }, x);
    total += strategy.reduce(sd::ReduceOp::SUM, sums, std::nullopt).item<float>();
  }
  std::cout << "sum of all elements: " << total << "\n";
  expect(total == 10.f, "ten ones");
  return example::exit_code();
}
