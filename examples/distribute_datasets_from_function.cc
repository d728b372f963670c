// The seed page's experimental_distribute_datasets_from_function example: the
// dataset function gets an InputContext, batches by the per-replica batch size
// and shards by input pipeline; no automatic rebatching.
//
//   build/examples/distribute_datasets_from_function
#include <iostream>

#include "example_check.h"
#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;
using example::expect;

int main() {
  const int64_t global_batch_size = 8;
  auto dataset_fn = [&](const sd::InputContext& input_context) {
    const int64_t batch_size = input_context.get_per_replica_batch_size(global_batch_size);
    auto d =
        tf::data::Dataset::from_tensors({tf::constant({1.f}, {1, 1})}).repeat().batch(batch_size);
    return d.shard(input_context.num_input_pipelines(), input_context.input_pipeline_id());
  };
  sd::MirroredStrategy strategy;
  auto ds = strategy.experimental_distribute_datasets_from_function(dataset_fn);
  for (const tf::TensorSpec& spec : ds.element_spec())
    std::cout << "element_spec: " << spec << "\n";

  int steps = 0;
  for (const sd::PerReplica<tf::data::Element>& batch : ds) {
    auto replica_results =
        strategy.run([](const tf::data::Element& inputs) { return inputs[0]; }, batch);
    for (const tf::Tensor& r : strategy.experimental_local_results(replica_results)) {
      expect(r.shape().dim(0) == global_batch_size / strategy.num_replicas_in_sync(),
             "each replica gets the per-replica batch size");
    }
    if (++steps == 3) break;  // the dataset repeats forever
  }
  std::cout << "per-replica batch: " << global_batch_size / strategy.num_replicas_in_sync() << "\n";
  // A global batch that the replicas cannot share evenly is refused.
  if (strategy.num_replicas_in_sync() > 1) {
    try {
      strategy.experimental_distribute_datasets_from_function([](const sd::InputContext& ctx) {
        ctx.get_per_replica_batch_size(7);
        return tf::data::Dataset::range(1);
      });
      expect(false, "an indivisible global batch raises");
    } catch (const tf::InvalidArgumentError& e) {
      std::cout << "indivisible batch: " << e.what() << "\n";
    }
  }
  return example::exit_code();
}
