// The seed page's reduce example: a global batch of 8 split over 2 replicas
// ([0, 1, 2, 3] and [4, 5, 6, 7]). Without an axis reduce adds the replicas'
// values element-wise; with axis 0 it also reduces the batch. A last partial
// batch of 6 split 4 + 2 needs axis 0, and MEAN then weighs every example 1/6.
//
//   build/examples/reduce
#include <iostream>

#include "example_check.h"
#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;
using example::expect;

int main() {
  sd::MirroredStrategy strategy({"CPU:0", "CPU:1"});
  auto dataset = tf::data::Dataset::range(8).map([](const tf::data::Element& e) {
    return tf::data::Element{tf::cast(e[0], tf::DType::float32)};
  });
  auto dist = strategy.experimental_distribute_dataset(dataset.batch(8));
  auto batch = dist.iter().get_next();
  auto per_example = strategy.run([](const tf::data::Element& x) { return x[0]; }, batch);

  tf::Tensor across_replicas = strategy.reduce(sd::ReduceOp::SUM, per_example, std::nullopt);
  std::cout << "SUM, axis=None: " << across_replicas << "\n";
  expect(across_replicas.to_vector<float>() == std::vector<float>{4, 6, 8, 10},
         "[0+4, 1+5, 2+6, 3+7]");
  tf::Tensor whole_batch = strategy.reduce(sd::ReduceOp::SUM, per_example, 0);
  std::cout << "SUM, axis=0: " << whole_batch << "\n";
  expect(whole_batch.item<float>() == 28.f, "0+1+...+7");

  // The last partial batch: 6 examples split [0, 1, 2, 3] and [4, 5].
  auto partial = strategy.experimental_distribute_dataset(
      tf::data::Dataset::range(6)
          .map([](const tf::data::Element& e) {
            return tf::data::Element{tf::cast(e[0], tf::DType::float32)};
          })
          .batch(8));
  auto last =
      strategy.run([](const tf::data::Element& x) { return x[0]; }, partial.iter().get_next());
  for (const tf::Tensor& part : strategy.experimental_local_results(last))
    std::cout << "replica part: " << part << "\n";
  tf::Tensor mean = strategy.reduce(sd::ReduceOp::MEAN, last, 0);
  std::cout << "MEAN, axis=0 over the partial batch: " << mean << "\n";
  expect(mean.item<float>() == 2.5f, "the mean of 0..5 weighs each example 1/6");
  // The mean of the per-replica means would weigh examples 1/8 and 1/4 instead.
  auto means = strategy.run([](const tf::data::Element& x) { return tf::reduce_mean(x[0]); },
                            partial.iter().get_next());
  tf::Tensor mean_of_means = strategy.reduce(sd::ReduceOp::MEAN, means, std::nullopt);
  std::cout << "MEAN of per-replica means: " << mean_of_means << "\n";
  expect(mean_of_means.item<float>() == 3.f, "(1.5 + 4.5) / 2");
  return example::exit_code();
}
