// The seed page's model-parallel set-up: a TPU system initialised with a
// device assignment of 2 logical devices per replica (computation_shape
// [1, 1, 1, 2]), and a step whose tf.add result is assigned to logical
// device 0. With one replica (the page's first example, `num_replicas` = 1,
// the default) or four (the experimental_assign_to_logical_device example,
// `tpu_assign_logical_device 4`).
//
//   STRATA_CPU_DEVICES=2 build/examples/tpu_assign_logical_device      # 2 logical devices x 1
//   replica STRATA_CPU_DEVICES=8 build/examples/tpu_assign_logical_device 4    # 2 logical devices
//   x 4 replicas
#include <iostream>
#include <string>
#include <vector>

#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;
namespace tpu = strata::tpu::experimental;

namespace {
int failures = 0;
void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "unexpected result: " << what << "\n";
    ++failures;
  }
}
}  // namespace

int main(int argc, char** argv) {
  const int num_replicas = argc > 1 ? std::stoi(argv[1]) : 1;
  sd::cluster_resolver::TPUClusterResolver resolver("");
  tf::config::experimental_connect_to_cluster(resolver);
  tpu::Topology topology = tpu::initialize_tpu_system(resolver);
  tpu::DeviceAssignment device_assignment = tpu::DeviceAssignment::build(
      topology, {.computation_shape = {1, 1, 1, 2}, .num_replicas = num_replicas});
  sd::TPUStrategy strategy(resolver, device_assignment);
  std::cout << strategy.num_replicas_in_sync() << " replica(s) x "
            << strategy.num_logical_devices_per_replica() << " logical devices\n";

  // Per-replica inputs: (features, labels), features [2, 3] filled with the replica id.
  auto dataset_fn = [](const sd::InputContext& ctx) {
    const float id = static_cast<float>(ctx.input_pipeline_id());
    tf::Tensor features = tf::fill({8, 3}, tf::constant(id + 1.f));
    tf::Tensor labels = tf::zeros({8}, tf::DType::int64);
    return tf::data::Dataset::from_tensor_slices({features, labels})
        .batch(2, /*drop_remainder=*/true);
  };
  sd::DistributedDataset dist_dataset =
      strategy.experimental_distribute_datasets_from_function(dataset_fn);
  sd::DistributedIterator iterator = dist_dataset.iter();

  auto step_fn = [&](const tf::data::Element& inputs) {
    const tf::Tensor& features = inputs[0];
    tf::Tensor output = tf::add(features, features);
    // The add's result is placed on logical device 0.
    output = strategy.experimental_assign_to_logical_device(output, 0);
    return output;
  };
  sd::PerReplica<tf::Tensor> out = strategy.run(step_fn, iterator.get_next());

  for (int r = 0; r < strategy.num_replicas_in_sync(); ++r) {
    const tf::Tensor& t = out.values()[static_cast<size_t>(r)];
    std::cout << "replica " << r << " on " << t.device() << ": " << t << "\n";
    expect(t.device() == strategy.logical_devices(r)[0]->name(),
           "replica " + std::to_string(r) + ": output on its logical device 0");
    expect(t.shape() == tf::TensorShape({2, 3}), "per-replica batch of 2");
    expect(tpu::sharding_of(t) != nullptr && tpu::sharding_of(t)->is_maximal() &&
               tpu::sharding_of(t)->maximal_device() == 0,
           "output annotated {maximal device=0}");
    for (float v : t.to_vector<float>()) expect(v == 2.f, "features + features");
  }
  // The assignment's bounds are TF's.
  try {
    strategy.run(
        [&] { return strategy.experimental_assign_to_logical_device(tf::constant(1.f), 2); });
    expect(false, "logical device 2 of 2 is out of range");
  } catch (const tf::InvalidArgumentError& e) {
    std::cout << "InvalidArgumentError: " << e.what() << "\n";
  }
  tpu::shutdown_tpu_system();
  return failures == 0 ? 0 : 1;
}
